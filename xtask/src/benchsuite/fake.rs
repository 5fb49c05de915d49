//! The fake API server as a child process: started seeded, asked over HTTP for what it served
//! and for a checksum of its objects, killed on drop.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

/// A running fake API server, killed on drop.
pub(super) struct FakeServer {
    pub(super) child: Child,
    pub(super) addr: String,
    pub(super) kubeconfig: PathBuf,
}

impl FakeServer {
    pub(super) fn start(
        program: &Path,
        dir: &Path,
        resource: &str,
        objects: usize,
    ) -> Result<Self, String> {
        let kubeconfig = dir.join("fake-kubeconfig");
        let mut child = Command::new(program)
            .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--seed", &format!("{resource}={objects}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("starting {}: {err}", program.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut addr = String::new();
        stdout
            .read_line(&mut addr)
            .map_err(|err| format!("reading the fake's address: {err}"))?;
        let addr = addr.trim().to_owned();
        // The fake listens before it has seeded; it says "serving" on stderr once it has.
        let mut stderr = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        loop {
            line.clear();
            let read = stderr
                .read_line(&mut line)
                .map_err(|err| format!("reading the fake's stderr: {err}"))?;
            if read == 0 {
                let _ = child.kill();
                return Err(format!("the fake API server exited while seeding ({addr})"));
            }
            if line.starts_with("serving") {
                break;
            }
        }
        // Keep draining both pipes so the server never blocks on a full one.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Ok(Self {
            child,
            addr,
            kubeconfig,
        })
    }

    pub(super) fn get(&self, path: &str) -> Result<Value, String> {
        http_get_json(&self.addr, path)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on loopback, answering the JSON body.
fn http_get_json(addr: &str, path: &str) -> Result<Value, String> {
    let mut stream =
        TcpStream::connect(addr).map_err(|err| format!("connecting to {addr}: {err}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|err| err.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    )
    .map_err(|err| format!("GET {path}: {err}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|err| format!("GET {path}: {err}"))?;
    let (head, body) = split_http_response(&raw).ok_or_else(|| format!("GET {path}: no header"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "GET {path}: {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body).ok_or_else(|| format!("GET {path}: malformed chunked body"))?
    } else {
        body.to_vec()
    };
    serde_json::from_slice(&body).map_err(|err| format!("GET {path}: {err}"))
}

fn split_http_response(raw: &[u8]) -> Option<(String, &[u8])> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((
        String::from_utf8_lossy(&raw[..end]).into_owned(),
        &raw[end + 4..],
    ))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

pub(super) fn fake_server_checksum(fake: &FakeServer, resource: &str) -> Result<String, String> {
    let answer = fake.get(&format!("/admin/bench/checksum?resource={resource}"))?;
    answer
        .get("checksum")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("the checksum endpoint answered {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_reassembled() {
        assert_eq!(
            dechunk(b"4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n").as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        assert_eq!(dechunk(b"zz\r\n"), None);
    }
}
