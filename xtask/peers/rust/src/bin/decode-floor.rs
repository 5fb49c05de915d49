//! `decode-floor --kubeconfig PATH`: the cost of decoding a Pod list with no informer at all.
//!
//! Fetches every page of the cluster's Pods (500 a page) once, keeps the raw bytes, then times
//! serde_json decoding them into k8s-openapi `List<Pod>`s: on one thread, then spread over every
//! core. Prints one JSON line: `{"objects","bytes","single_ms","parallel_ms","threads"}`. It is
//! the floor an informer's initial sync can approach: everything an informer does beyond this
//! (queueing, keying, indexing, notifying) is its own cost.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::{path::PathBuf, process::ExitCode, time::Instant};

use k8s_openapi::{List, api::core::v1::Pod};
use kube_client::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

const PAGE: usize = 500;

async fn client(path: &PathBuf) -> Result<Client, String> {
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|err| format!("{}: {err}", path.display()))?;
    Client::try_from(config).map_err(|err| err.to_string())
}

/// Every page of the Pod list, as the server sent it.
async fn fetch_pages(client: &Client) -> Result<Vec<Vec<u8>>, String> {
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut uri = format!("/api/v1/pods?limit={PAGE}");
        if let Some(token) = &token {
            uri.push_str("&continue=");
            uri.push_str(&form_encode(token));
        }
        let request = http::Request::get(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|err| err.to_string())?;
        let body = client
            .request_text(request)
            .await
            .map_err(|err| format!("listing Pods: {err}"))?;
        // Only the continue token is needed here; decoding is what is timed later.
        let meta: serde_json::Value = serde_json::from_str(&body).map_err(|err| err.to_string())?;
        token = meta
            .pointer("/metadata/continue")
            .and_then(|v| v.as_str())
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        pages.push(body.into_bytes());
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

fn decode(pages: &[Vec<u8>]) -> Result<Vec<Pod>, String> {
    let mut pods = Vec::new();
    for page in pages {
        let list: List<Pod> = serde_json::from_slice(page).map_err(|err| err.to_string())?;
        pods.extend(list.items);
    }
    Ok(pods)
}

async fn run(path: PathBuf) -> Result<serde_json::Value, String> {
    let client = client(&path).await?;
    let pages = fetch_pages(&client).await?;
    let bytes: usize = pages.iter().map(Vec::len).sum();

    let started = Instant::now();
    let pods = decode(&pages)?;
    let single = started.elapsed();
    let objects = pods.len();
    drop(pods);

    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let started = Instant::now();
    let per_thread = pages.len().div_ceil(threads).max(1);
    let decoded: Result<usize, String> = std::thread::scope(|scope| {
        let workers: Vec<_> = pages
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || decode(chunk).map(|pods| pods.len())))
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
    Ok(serde_json::json!({
        "objects": objects,
        "bytes": bytes,
        "single_ms": single.as_secs_f64() * 1e3,
        "parallel_ms": parallel.as_secs_f64() * 1e3,
        "threads": threads,
    }))
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let path = match (args.next().as_deref(), args.next()) {
        (Some("--kubeconfig"), Some(path)) => PathBuf::from(path),
        _ => {
            eprintln!("usage: decode-floor --kubeconfig PATH");
            return ExitCode::from(2);
        }
    };
    match run(path).await {
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
