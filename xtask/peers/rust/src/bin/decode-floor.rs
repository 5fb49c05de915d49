//! `decode-floor --kubeconfig PATH`: the cost of decoding a Pod list with no informer at all.
//!
//! Fetches every page of the cluster's Pods (500 a page) once in JSON and once in protobuf,
//! keeps the raw bytes, then times decoding them into k8s-openapi `Pod`s (serde_json for JSON,
//! kinformer_protobuf for protobuf): on one thread, then spread over every core. Prints one
//! JSON line: `{"objects","bytes","single_ms","parallel_ms","threads","protobuf_bytes",
//! "protobuf_single_ms","protobuf_parallel_ms"}`. It is the floor an informer's initial sync can
//! approach: everything an informer does beyond this (queueing, keying, indexing, notifying) is
//! its own cost.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::{path::PathBuf, process::ExitCode, time::Instant};

use clap::Parser;
use k8s_openapi::{List, api::core::v1::Pod};
use kinformer::protobuf::{DecodeOptions, Envelope, from_message, list_items};
use kube_client::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// The same allocator as the Rust peers, so the floor is theirs.
#[global_allocator]
static ALLOCATOR: kinformer_bench_peers::PeerAllocator = kinformer_bench_peers::PeerAllocator;

const PAGE: usize = 500;

async fn client(path: &PathBuf) -> Result<Client, String> {
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|err| format!("{}: {err}", path.display()))?;
    Client::try_from(config).map_err(|err| err.to_string())
}

/// Every page of the Pod list, as the server sent it in `format`.
async fn fetch_pages(client: &Client, format: Format) -> Result<Vec<Vec<u8>>, String> {
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut uri = format!("/api/v1/pods?limit={PAGE}");
        if let Some(token) = &token {
            uri.push_str("&continue=");
            uri.push_str(&form_encode(token));
        }
        let accept = match format {
            Format::Json => "application/json",
            Format::Protobuf => kinformer::protobuf::CONTENT_TYPE,
        };
        let request = http::Request::get(uri)
            .header(http::header::ACCEPT, accept)
            .body(kube_client::client::Body::from(Vec::new()))
            .map_err(|err| err.to_string())?;
        let response = client
            .send(request)
            .await
            .map_err(|err| format!("listing Pods: {err}"))?;
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .map_err(|err| format!("reading the Pod list: {err}"))?
            .to_bytes()
            .to_vec();
        // Only the continue token is needed here; decoding is what is timed later.
        token = continue_token(&body, format)?;
        pages.push(body);
        if token.is_none() {
            return Ok(pages);
        }
    }
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Json,
    Protobuf,
}

#[derive(serde::Deserialize)]
struct ListMeta {
    metadata: ContinueToken,
}

#[derive(serde::Deserialize)]
struct ContinueToken {
    #[serde(rename = "continue", default)]
    token: Option<String>,
}

fn continue_token(body: &[u8], format: Format) -> Result<Option<String>, String> {
    let list: ListMeta = match format {
        Format::Json => serde_json::from_slice(body).map_err(|err| err.to_string())?,
        Format::Protobuf => Envelope::parse(body)
            .and_then(|envelope| envelope.decode(DecodeOptions::default()))
            .map_err(|err| err.to_string())?,
    };
    Ok(list.metadata.token.filter(|token| !token.is_empty()))
}

fn decode(pages: &[Vec<u8>], format: Format) -> Result<Vec<Pod>, String> {
    let mut pods = Vec::new();
    for page in pages {
        match format {
            Format::Json => {
                let list: List<Pod> =
                    serde_json::from_slice(page).map_err(|err| err.to_string())?;
                pods.extend(list.items);
            }
            Format::Protobuf => {
                let envelope = Envelope::parse(page).map_err(|err| err.to_string())?;
                let message = envelope.message().map_err(|err| err.to_string())?;
                let items = list_items(envelope.raw, message).map_err(|err| err.to_string())?;
                for item in items.bytes {
                    pods.push(
                        from_message(item, items.message, DecodeOptions::default())
                            .map_err(|err| err.to_string())?,
                    );
                }
            }
        }
    }
    Ok(pods)
}

/// Decoding times of `pages` on one thread and on `threads`, and the number of Pods.
fn time_decoding(
    pages: &[Vec<u8>],
    format: Format,
    threads: usize,
) -> Result<(f64, f64, usize), String> {
    let started = Instant::now();
    let pods = decode(pages, format)?;
    let single = started.elapsed();
    let objects = pods.len();
    drop(pods);

    let started = Instant::now();
    let per_thread = pages.len().div_ceil(threads).max(1);
    let decoded: Result<usize, String> = std::thread::scope(|scope| {
        let workers: Vec<_> = pages
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || decode(chunk, format).map(|pods| pods.len())))
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .map_err(|_| "a decode thread panicked".to_owned())?
            })
            .sum()
    });
    let parallel = started.elapsed();
    if decoded? != objects {
        return Err("the parallel decode found a different number of Pods".into());
    }
    Ok((
        single.as_secs_f64() * 1e3,
        parallel.as_secs_f64() * 1e3,
        objects,
    ))
}

async fn run(path: PathBuf) -> Result<serde_json::Value, String> {
    let client = client(&path).await?;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let pages = fetch_pages(&client, Format::Json).await?;
    let bytes: usize = pages.iter().map(Vec::len).sum();
    let (single_ms, parallel_ms, objects) = time_decoding(&pages, Format::Json, threads)?;
    drop(pages);
    let pages = fetch_pages(&client, Format::Protobuf).await?;
    let protobuf_bytes: usize = pages.iter().map(Vec::len).sum();
    let (protobuf_single_ms, protobuf_parallel_ms, protobuf_objects) =
        time_decoding(&pages, Format::Protobuf, threads)?;
    if protobuf_objects != objects {
        return Err("JSON and protobuf lists hold different numbers of Pods".into());
    }
    Ok(serde_json::json!({
        "objects": objects,
        "bytes": bytes,
        "single_ms": single_ms,
        "parallel_ms": parallel_ms,
        "threads": threads,
        "protobuf_bytes": protobuf_bytes,
        "protobuf_single_ms": protobuf_single_ms,
        "protobuf_parallel_ms": protobuf_parallel_ms,
    }))
}

/// The command line; the field's doc comment is its help.
#[derive(Debug, Parser)]
#[command(
    name = "decode-floor",
    about = "Times decoding the cluster's Pod list with no informer at all; prints one JSON line",
    args_override_self = true
)]
struct Options {
    /// the kubeconfig of the server to fetch the Pods from (its current context)
    #[arg(long, value_name = "PATH")]
    kubeconfig: PathBuf,
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    match run(options.kubeconfig).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("decode-floor: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_harness_command_line_parses() {
        Options::command().debug_assert();
        // As xtask/src/benchsuite/runner.rs builds it.
        let options =
            Options::try_parse_from(["decode-floor", "--kubeconfig", "kc"]).expect("valid");
        assert_eq!(options.kubeconfig, PathBuf::from("kc"));
        assert!(Options::try_parse_from(["decode-floor"]).is_err());
    }
}
