//! `seed-pods --kubeconfig PATH --n N`: fills a real cluster with the benchmark's Pods.
//!
//! Creates the fixture namespaces of `kinformer_testing::fixtures`, each with the `default`
//! ServiceAccount (Pod admission requires it, and no controller-manager runs beside the e2e
//! control plane to create it), then `N` fixture Pods, 32 requests in flight. An object that
//! already exists is left as it is, so a second run only adds what is missing.
//!
//! Then it lists every Pod of the cluster, paged and consistent, and prints one JSON line,
//! `{"pods":N,"checksum":"HEX"}`: the bench checksum (kinformer-testing's) of what the server
//! holds, which a peer's view of the cluster must equal. Nothing changes the Pods afterwards
//! (no kubelet, scheduler or controller runs beside the benchmark's control plane).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::{path::PathBuf, process::ExitCode, time::Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kinformer_testing::fixtures;
use kube_client::{
    Api, Client, Config, ResourceExt,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

const IN_FLIGHT: usize = 32;

async fn create<K>(api: &Api<K>, object: Value) -> Result<(), String>
where
    K: kube_client::Resource
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).map_err(|err| err.to_string())?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube_client::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err.to_string()),
    }
}

/// The fixture Pod as a real API server takes it: no status (a create ignores it anyway),
/// no managedFields (the server writes its own), no UID in the owner reference's way.
fn pod(i: usize) -> Value {
    let mut pod = fixtures::pod(i);
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(object) = pod.as_object_mut() {
        object.remove("status");
    }
    pod
}

async fn run(path: PathBuf, count: usize) -> Result<(), String> {
    let kubeconfig =
        Kubeconfig::read_from(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|err| format!("{}: {err}", path.display()))?;
    let client = Client::try_from(config).map_err(|err| err.to_string())?;
    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for n in 0..fixtures::NAMESPACES.min(count.max(1)) {
        let name = fixtures::namespace_of(n);
        create(&namespaces, json!({ "metadata": { "name": name } })).await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        create(&accounts, json!({ "metadata": { "name": "default" } })).await?;
    }
    stream::iter(0..count)
        .map(|i| {
            let client = client.clone();
            async move {
                let object = pod(i);
                let namespace = fixtures::namespace_of(i);
                let pods: Api<Pod> = Api::namespaced(client, &namespace);
                create(&pods, object).await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    eprintln!(
        "seed-pods: {count} Pods in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let held = held_pods(&Api::<Pod>::all(client)).await?;
    println!(
        "{}",
        json!({ "pods": held.len(), "checksum": kinformer_testing::bench::checksum(held) })
    );
    Ok(())
}

/// Every Pod the server holds, as `(namespace/name, resourceVersion)`, from a consistent
/// paged list.
async fn held_pods(pods: &Api<Pod>) -> Result<Vec<(String, String)>, String> {
    let mut held = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = pods.list(&params).await.map_err(|err| err.to_string())?;
        held.extend(page.items.iter().map(|pod| {
            (
                format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                pod.resource_version().unwrap_or_default(),
            )
        }));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(held),
        }
    }
}

/// The command line; the fields' doc comments are the help.
#[derive(Debug, Parser)]
#[command(
    name = "seed-pods",
    about = "Fills a real cluster with the benchmark's fixture namespaces and Pods",
    args_override_self = true
)]
struct Options {
    /// the kubeconfig of the cluster (its current context)
    #[arg(long, value_name = "PATH")]
    kubeconfig: PathBuf,
    /// how many Pods
    #[arg(long = "n", value_name = "N")]
    count: usize,
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    match run(options.kubeconfig, options.count).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("seed-pods: {message}");
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
        let options = Options::try_parse_from(["seed-pods", "--kubeconfig", "kc", "--n", "20000"])
            .expect("valid");
        assert_eq!(
            (options.kubeconfig, options.count),
            (PathBuf::from("kc"), 20_000)
        );
        assert!(Options::try_parse_from(["seed-pods", "--kubeconfig", "kc"]).is_err());
        assert!(Options::try_parse_from(["seed-pods", "--n", "1"]).is_err());
    }
}
