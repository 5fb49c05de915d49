//! What the examples share.

use std::{future::Future, path::PathBuf, pin::Pin, task::Poll};

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

/// Ctrl-C, listened for from this call on. tokio installs its handler when `ctrl_c()` is first
/// polled, and until then a Ctrl-C ends the process on the spot; so this polls it once here,
/// before the program starts anything a user (or a test) may react to by pressing Ctrl-C.
#[allow(
    dead_code,
    reason = "the soak runs for a set time and listens for no Ctrl-C"
)]
pub(crate) async fn ctrl_c() -> std::io::Result<Pin<Box<dyn Future<Output = ()> + Send>>> {
    let mut pressed = Box::pin(tokio::signal::ctrl_c());
    match std::future::poll_fn(|cx| Poll::Ready(pressed.as_mut().poll(cx))).await {
        Poll::Pending => Ok(Box::pin(async move {
            // The handler is installed, so receiving cannot fail any more.
            let _ = pressed.await;
        })),
        Poll::Ready(Ok(())) => Ok(Box::pin(std::future::ready(()))),
        Poll::Ready(Err(error)) => Err(error),
    }
}
