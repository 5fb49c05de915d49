//! What the examples share.

use std::path::PathBuf;

/// `KUBECONFIG`'s first existing file, else `~/.kube/config` if it exists: where kube-client
/// would look, so an example informs the cluster a user's `kubectl` talks to.
pub(crate) fn kubeconfig() -> Option<PathBuf> {
    if let Some(paths) = std::env::var_os("KUBECONFIG") {
        return std::env::split_paths(&paths).find(|path| path.is_file());
    }
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".kube").join("config")).filter(|path| path.is_file())
}

/// A client for the cluster kube-client finds (kubeconfig or in-cluster), without kube-client's
/// retry layer: the reflector owns retries.
pub(crate) async fn client() -> Result<kube_client::Client, kube_client::Error> {
    kinformer::reflector::informer_client(None).await
}
