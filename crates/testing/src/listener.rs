//! The listening socket: accepting connections, serving each over HTTP/1 through
//! [`Shared::serve`], and taking the port down and up again.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{Error, Result};
use crate::shared::Shared;

/// Closes the listening socket and every open connection, and with them every watch.
pub(crate) async fn stop_listener(shared: &Shared) {
    let task = shared.listener.lock().take();
    if let Some(task) = task {
        task.abort();
        // The task was aborted on purpose; its JoinError carries nothing to report.
        let _ = task.await;
    }
    shared.store.lock().close_watchers();
}

/// Listens again on the address the server was bound to.
pub(crate) async fn restart_listener(shared: &Arc<Shared>) -> Result<()> {
    stop_listener(shared).await;
    let addr = *shared.addr.lock();
    let (_, task) = spawn_listener(shared.clone(), addr).await?;
    *shared.listener.lock() = Some(task);
    Ok(())
}

/// Binds `addr` and accepts on it in a task; returns the bound address and the task.
pub(crate) async fn spawn_listener(
    shared: Arc<Shared>,
    addr: SocketAddr,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let bind_error = |source| Error::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    let task = tokio::spawn(accept_loop(shared, listener));
    Ok((bound, task))
}

/// Accepts until aborted; dropping the JoinSet then aborts every connection with it.
async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(shared.clone(), stream));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: TcpStream) {
    // Watch events are small writes that must not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |request| {
        let serve = (shared.serve)(shared.clone(), request);
        async move { Ok::<_, Infallible>(serve.await) }
    });
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%error, "connection ended with an error");
    }
}
