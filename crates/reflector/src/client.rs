//! A kube-client `Client` built for informers.

use kube_client::{Client, Config};

/// A kube-client [`Client`] for informers: from `config`, or when it is `None` from the
/// cluster kube-client finds (`KUBECONFIG` or `~/.kube/config`, else the in-cluster service
/// account), with kube-client's retry layer off either way.
///
/// The reflector owns retries and backoff. kube-client's retry layer (on by default) retries
/// 429, 503 and 504 up to 15 times with doubling delays before the reflector sees them, which
/// hides what the reflector must act on (a "too large resource version" 504 means relisting at
/// the latest version) and stacks a second backoff under the reflector's. A client built any
/// other way should set `Config::default_retry` to `false` too.
///
/// ```no_run
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// // The cluster `kubectl` talks to, or the one this Pod runs in.
/// let client = kinformer_reflector::informer_client(None).await?;
/// // A given configuration.
/// let config = kube_client::Config::new("https://127.0.0.1:6443".parse()?);
/// let client = kinformer_reflector::informer_client(Some(config)).await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`kube_client::Error::InferConfig`] when `config` is `None` and no configuration is found;
/// what kube-client reports when it cannot build its HTTP stack (a bad certificate, say).
pub async fn informer_client(config: Option<Config>) -> Result<Client, kube_client::Error> {
    let mut config = match config {
        Some(config) => config,
        None => Config::infer()
            .await
            .map_err(kube_client::Error::InferConfig)?,
    };
    config.default_retry = false;
    Client::try_from(config)
}
