//! The fake API server's bench endpoints, called through the peer's own kube `Client` (so
//! they travel the same connection pool and TLS set-up as the informer's requests).

use kube_client::Client;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::cli::Resource;

/// A handle on `/admin/bench/*`.
#[derive(Clone)]
pub struct Admin {
    client: Client,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
struct Started {
    sentinel: String,
}

/// What `relist` changed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Relisted {
    /// The sentinel's key, `namespace/name`.
    pub sentinel: String,
    /// Objects updated.
    pub updated: u64,
    /// Objects deleted.
    pub deleted: u64,
}

/// The server's checksum of its current objects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerChecksum {
    /// Objects of the resource.
    pub count: u64,
    /// The protocol's checksum.
    pub checksum: String,
}

impl Admin {
    /// Bench calls over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
    ) -> Result<T, String> {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(Vec::new())
            .map_err(|error| format!("{path}: {error}"))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|error| format!("{path}: {error}"))?;
        serde_json::from_str(&text).map_err(|error| format!("{path} answered {text:?}: {error}"))
    }

    /// Starts `count` updates of `resource` at `rate` per second (0: flat out) and returns the
    /// key of the sentinel the server creates after the last one.
    ///
    /// # Errors
    ///
    /// When the server refuses or answers something else.
    pub async fn update(
        &self,
        resource: Resource,
        count: u64,
        rate: u64,
    ) -> Result<String, String> {
        let path = format!(
            "/admin/bench/update?resource={}&count={count}&rate={rate}",
            resource.plural()
        );
        let started: Started = self.call(http::Method::POST, &path).await?;
        Ok(started.sentinel)
    }

    /// Forces a relist with changes to `fraction` of the objects of `resource`.
    ///
    /// # Errors
    ///
    /// When the server refuses or answers something else.
    pub async fn relist(&self, resource: Resource, fraction: f64) -> Result<Relisted, String> {
        let path = format!(
            "/admin/bench/relist?resource={}&fraction={fraction}",
            resource.plural()
        );
        self.call(http::Method::POST, &path).await
    }

    /// The server's checksum of `resource`.
    ///
    /// # Errors
    ///
    /// When the server refuses or answers something else.
    pub async fn checksum(&self, resource: Resource) -> Result<ServerChecksum, String> {
        let path = format!("/admin/bench/checksum?resource={}", resource.plural());
        self.call(http::Method::GET, &path).await
    }
}
