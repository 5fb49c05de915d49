//! The fake API server as a child process: started seeded, asked over HTTP for what it served
//! and for a checksum of its objects, killed on drop.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use kinformer_controlplane::Http;

use super::{runner::on_4k_pages, scenarios::ALLOCATOR_ENV};

/// The command that starts the fake seeded with `objects` of `resource`, on the same 4 KiB
/// pages as the Rust peers (it runs on their allocator).
pub(super) fn command(
    program: &Path,
    kubeconfig: &Path,
    resource: &str,
    objects: usize,
) -> Command {
    let mut command = Command::new(program);
    command
        .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--seed", &format!("{resource}={objects}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // The server runs on the peers' tuned allocator whatever the harness's shell exports.
        .env_remove(ALLOCATOR_ENV);
    on_4k_pages(&mut command);
    command
}

/// A running fake API server, killed on drop.
pub(super) struct FakeServer {
    pub(super) child: Child,
    /// Its admin endpoints, over plain HTTP.
    http: Http,
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
        let mut child = command(program, &kubeconfig, resource, objects)
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
        let http = match Http::new(&format!("http://{addr}"), Duration::from_secs(60)) {
            Ok(http) => http,
            Err(err) => {
                let _ = child.kill();
                return Err(err);
            }
        };
        Ok(Self {
            child,
            http,
            kubeconfig,
        })
    }

    pub(super) fn get(&self, path: &str) -> Result<Value, String> {
        self.http.get_json(path)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
