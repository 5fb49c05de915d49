//! The one HTTP client of the control plane and of xtask, for the servers they start on
//! loopback: etcd's `/health` and JSON gateway (plain HTTP), kube-apiserver's `/readyz` (HTTPS
//! with a self-signed certificate and a bearer token), and the fake API server's admin endpoints
//! (plain HTTP, JSON).
//!
//! It is kube-client's, which the workspace already builds (hyper-util's client with rustls),
//! driven from xtask's synchronous code on a runtime of its own. It trusts any certificate, as
//! `curl -k` does: it only ever talks to servers on loopback that its caller started.

use std::time::Duration;

use kube_client::{Client, Config};
use serde_json::Value;
use tokio::runtime::Runtime;

/// A blocking client of one server, on a runtime of its own (so, inside an async runtime, call
/// it from `spawn_blocking`).
pub struct Http {
    runtime: Runtime,
    client: Client,
    /// `Authorization: Bearer ...`, when the server wants one.
    token: Option<String>,
    base: String,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").field("base", &self.base).finish()
    }
}

impl Http {
    /// A client of the server at `base` (`http://HOST:PORT` or `https://HOST:PORT`) that gives
    /// up on a request after `timeout`.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, String> {
        let url = base
            .parse()
            .map_err(|err| format!("{base:?} is not a URL: {err}"))?;
        let mut config = Config::new(url);
        config.accept_invalid_certs = true;
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        // Every caller polls or fails on its own terms; retries would only hide that.
        config.default_retry = false;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("starting an HTTP runtime: {err}"))?;
        let client = {
            let _inside = runtime.enter();
            Client::try_from(config).map_err(|err| format!("an HTTP client of {base}: {err}"))?
        };
        Ok(Self {
            runtime,
            client,
            token: None,
            base: base.to_owned(),
        })
    }

    /// Sends `token` as a bearer token with every request.
    pub fn bearer(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    /// The body of `GET path` (path and query), when the server answers 2xx.
    pub fn get(&self, path: &str) -> Result<String, String> {
        let mut request = http::Request::get(path);
        if let Some(token) = &self.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Vec::new())
            .map_err(|err| format!("GET {path}: {err}"))?;
        self.runtime
            .block_on(self.client.request_text(request))
            .map_err(|err| format!("GET {}{path}: {err}", self.base))
    }

    /// `POST path` with a JSON `body`; the answer parsed as JSON, when the server answers 2xx.
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Value, String> {
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|err| format!("POST {path}: {err}"))?;
        let answer = self
            .runtime
            .block_on(self.client.request_text(request))
            .map_err(|err| format!("POST {}{path}: {err}", self.base))?;
        serde_json::from_str(&answer).map_err(|err| format!("POST {}{path}: {err}", self.base))
    }

    /// `GET path`, its body parsed as JSON.
    pub fn get_json(&self, path: &str) -> Result<Value, String> {
        let body = self.get(path)?;
        serde_json::from_str(&body).map_err(|err| format!("GET {}{path}: {err}", self.base))
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead, BufReader, Write},
        net::TcpListener,
        sync::mpsc,
        thread,
    };

    use super::*;

    /// A server on loopback that answers one request with `response` and reports the
    /// request's head.
    fn answer_once(response: &'static str) -> (String, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let base = format!("http://{}", listener.local_addr().expect("bound"));
        let (heads, seen) = mpsc::channel();
        thread::spawn(move || {
            let (stream, _) = listener.accept().expect("a connection");
            let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let _ = heads.send(head);
            let mut stream = stream;
            let _ = stream.write_all(response.as_bytes());
        });
        (base, seen)
    }

    fn client(base: &str) -> Http {
        Http::new(base, Duration::from_secs(5)).expect("a client")
    }

    #[test]
    fn chunked_bodies_are_reassembled() {
        let (base, _) = answer_once(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n",
        );
        let value = client(&base)
            .get_json("/admin/content-types")
            .expect("a JSON body");
        assert_eq!(value, serde_json::json!({ "a": 1 }));
        let (base, _) = answer_once(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n",
        );
        assert!(client(&base).get("/admin/content-types").is_err());
    }

    #[test]
    fn the_path_query_and_bearer_token_reach_the_server() {
        let (base, seen) =
            answer_once("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        let body = client(&base)
            .bearer("abc")
            .get("/readyz?verbose=0")
            .expect("a body");
        assert_eq!(body, "ok");
        let head = seen
            .recv()
            .expect("the request's head")
            .to_ascii_lowercase();
        assert!(
            head.starts_with("get /readyz?verbose=0 http/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("authorization: bearer abc\r\n"), "{head}");
    }

    #[test]
    fn an_error_status_or_no_server_is_an_error() {
        let (base, _) = answer_once(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom",
        );
        assert!(client(&base).get("/health").is_err());
        let closed = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let base = format!("http://{}", closed.local_addr().expect("bound"));
        drop(closed);
        assert!(client(&base).get("/health").is_err());
    }

    /// kube-apiserver's certificate is self-signed; `openssl s_server` stands in for it.
    #[test]
    fn a_self_signed_https_server_is_reached() {
        let dir = std::env::temp_dir().join(format!("xtask-http-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("the openssl CLI, which the control plane needs too");
        assert!(made.status.success(), "{made:?}");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut server = std::process::Command::new("openssl")
            .args([
                "s_server",
                "-quiet",
                "-www",
                "-accept",
                &port.to_string(),
                "-cert",
            ])
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("openssl s_server starts");
        let https = client(&format!("https://127.0.0.1:{port}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let answer = loop {
            match https.get("/") {
                Ok(body) => break Ok(body),
                Err(err) if std::time::Instant::now() > deadline => break Err(err),
                // Polling for the server to listen: it says nothing when it does.
                Err(_) => thread::sleep(Duration::from_millis(50)),
            }
        };
        let _ = server.kill();
        let _ = server.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let body = answer.expect("an answer over TLS");
        assert!(body.contains("s_server"), "{body}");
    }
}
