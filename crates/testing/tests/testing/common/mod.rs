//! Helpers shared by the integration tests: raw HTTP (to see exact status codes, headers and
//! watch lines) and small object builders.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_testing::FakeApiServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Upper bound for anything a test waits on, so a bug fails the test instead of hanging it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// A whole HTTP response.
#[derive(Debug)]
pub(crate) struct Raw {
    pub(crate) status: u16,
    pub(crate) headers: String,
    pub(crate) body: Vec<u8>,
}

impl Raw {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }

    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

async fn send_request(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    // HTTP/1.0: no chunked encoding, the body runs until the server closes.
    let mut request = format!(
        "{method} {path} HTTP/1.0\r\nHost: fake\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write body");
    BufReader::new(stream)
}

async fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, String) {
    let mut status_line = String::new();
    reader
        .read_line(&mut status_line)
        .await
        .expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    let mut headers = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("header line");
        if line.trim().is_empty() {
            break;
        }
        headers.push_str(&line);
    }
    (status, headers)
}

/// One request, the whole response.
pub(crate) async fn raw(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Raw {
    tokio::time::timeout(PATIENCE, async {
        let mut reader = send_request(server, method, path, headers, body).await;
        let (status, headers) = read_head(&mut reader).await;
        let mut body = Vec::new();
        reader.read_to_end(&mut body).await.expect("body");
        Raw {
            status,
            headers,
            body,
        }
    })
    .await
    .expect("the server answered in time")
}

pub(crate) async fn get(server: &FakeApiServer, path: &str) -> Raw {
    raw(server, "GET", path, &[], b"").await
}

/// An open watch stream read line by line.
pub(crate) struct RawWatch {
    pub(crate) status: u16,
    reader: BufReader<TcpStream>,
}

impl RawWatch {
    pub(crate) async fn open(server: &FakeApiServer, path: &str) -> Self {
        Self::open_with(server, path, &[]).await.0
    }

    /// Opens a watch with request headers; also returns the response headers.
    pub(crate) async fn open_with(
        server: &FakeApiServer,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (Self, String) {
        let mut reader = send_request(server, "GET", path, headers, b"").await;
        let (status, headers) = tokio::time::timeout(PATIENCE, read_head(&mut reader))
            .await
            .expect("watch headers in time");
        (Self { status, reader }, headers)
    }

    /// The next length-prefixed frame of a protobuf watch, or `None` when the stream ended.
    pub(crate) async fn next_frame(&mut self) -> Option<Vec<u8>> {
        tokio::time::timeout(PATIENCE, async {
            let mut prefix = [0u8; 4];
            match self.reader.read_exact(&mut prefix).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
                Err(e) => panic!("watch read failed: {e}"),
            }
            let mut frame = vec![0u8; u32::from_be_bytes(prefix) as usize];
            self.reader
                .read_exact(&mut frame)
                .await
                .expect("a whole frame");
            Some(frame)
        })
        .await
        .expect("a frame or the end in time")
    }

    /// The next line as JSON, or `None` when the server ended the stream.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        self.next_within(PATIENCE)
            .await
            .expect("a line or the end in time")
    }

    /// `Err` if nothing arrives within `wait`.
    pub(crate) async fn next_within(&mut self, wait: Duration) -> Result<Option<Value>, ()> {
        let mut line = String::new();
        match tokio::time::timeout(wait, self.reader.read_line(&mut line)).await {
            Err(_) => Err(()),
            Ok(Ok(0)) => Ok(None),
            Ok(Ok(_)) => Ok(Some(
                serde_json::from_str(&line).expect("a JSON watch line"),
            )),
            Ok(Err(e)) => panic!("watch read failed: {e}"),
        }
    }

    pub(crate) async fn next_line_text(&mut self) -> Option<String> {
        let mut line = String::new();
        match tokio::time::timeout(PATIENCE, self.reader.read_line(&mut line)).await {
            Ok(Ok(0)) => None,
            Ok(Ok(_)) => Some(line),
            other => panic!("no watch line in time: {other:?}"),
        }
    }
}

pub(crate) fn pod(name: &str, labels: &Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": labels },
        "spec": { "containers": [{ "name": "main", "image": "registry.example.com/app:1" }] },
    }))
    .expect("a valid Pod")
}

pub(crate) fn config_map(name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "data": { "value": data },
    }))
    .expect("a valid ConfigMap")
}

/// The Status inside a kube-client API error.
pub(crate) fn api_status(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
