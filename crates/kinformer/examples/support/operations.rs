//! What a controller shows its operators: `/metrics` in the Prometheus text format and
//! `/healthz`, over hyper.

use std::{convert::Infallible, fmt::Write as _, sync::Arc};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header, service::service_fn};
use hyper_util::rt::TokioIo;
use kinformer::{factory::SharedInformerFactory, wait::CancellationToken};
use prometheus_client::{encoding::text::encode, registry::Registry};
use tokio::net::TcpListener;

/// Serves `/metrics` (everything in `registry`) and `/healthz` (200 when every informer of
/// `factory` has synced and none is failing, else 503 naming the ones that are not) on
/// `listener` until `stop` fires.
pub(crate) async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    factory: SharedInformerFactory,
    stop: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting an operations connection failed");
                    continue;
                }
            },
        };
        let (registry, factory) = (Arc::clone(&registry), factory.clone());
        let service = service_fn(move |request: Request<Incoming>| {
            let response = respond(request.uri().path(), &registry, &factory);
            async move { Ok::<_, Infallible>(response) }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "an operations connection ended with an error");
            }
        });
    }
}

fn respond(
    path: &str,
    registry: &Registry,
    factory: &SharedInformerFactory,
) -> Response<Full<Bytes>> {
    match path {
        "/metrics" => {
            let mut text = String::new();
            if encode(&mut text, registry).is_err() {
                return reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "encoding failed\n".into(),
                );
            }
            reply(
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                text,
            )
        }
        "/healthz" => {
            let mut unhealthy = String::new();
            let mut informers: Vec<_> = factory.health().into_iter().collect();
            informers.sort_by_key(|(key, _)| key.to_string());
            for (key, health) in &informers {
                if !health.sync.synced || health.sync.consecutive_failures > 0 {
                    let _ = writeln!(unhealthy, "{key}: {}", health.sync);
                }
            }
            if unhealthy.is_empty() {
                reply(StatusCode::OK, "text/plain", "ok\n".into())
            } else {
                reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", unhealthy)
            }
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}
