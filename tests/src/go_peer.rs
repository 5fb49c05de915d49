//! Builds a Go peer program once and talks to it over stdin/stdout.

use std::{
    fs,
    io::{self, BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    sync::{
        Mutex, MutexGuard, OnceLock,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread,
};

/// Why a Go peer could not be built or run.
///
/// Every variant is a hard failure: a differential test must never pass by skipping its peer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `go` is not on `PATH`.
    #[error(
        "the Go toolchain is missing (`go` not found on PATH): the differential tests need Go \
         1.26 or newer to build the client-go peer in {module}"
    )]
    GoMissing {
        /// The Go module that could not be built.
        module: PathBuf,
    },
    /// `go build` ran and failed.
    #[error("`go build` of {program} in {module} failed:\n{output}")]
    BuildFailed {
        /// The program (`cmd/<program>`).
        program: String,
        /// The Go module.
        module: PathBuf,
        /// What `go build` printed.
        output: String,
    },
    /// Reading the sources, writing the cache, or talking to the process failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The peer closed its output early, usually because it exited with an error.
    #[error(
        "the Go peer stopped answering after {answered} of {expected} lines; stderr:\n{stderr}"
    )]
    PeerExited {
        /// Lines answered before it stopped.
        answered: usize,
        /// Lines it should have answered.
        expected: usize,
        /// What it printed on stderr.
        stderr: String,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// The Go module holding the client-go peers: `xtask/peers/client-go`.
pub fn peer_module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("xtask")
        .join("peers")
        .join("client-go")
}

/// A running Go peer program: send it script lines, read one answer line per line sent.
#[derive(Debug)]
pub struct GoPeer {
    child: Child,
    // Lines go to the peer from their own thread, so a peer that answers while still reading a
    // long script can never deadlock against us on full pipes.
    lines: Option<mpsc::Sender<String>>,
    writer: Option<thread::JoinHandle<io::Result<()>>>,
    answers: BufReader<ChildStdout>,
}

impl GoPeer {
    /// Builds `cmd/<program>` of [`peer_module_dir`] into `cache_root` (unless a build of the
    /// same sources is already there) and starts it.
    ///
    /// The build is keyed by a hash of every `.go` file, `go.mod` and `go.sum`, so editing the
    /// peer rebuilds it and nothing else does. `go build` runs with `-mod=readonly`: the
    /// committed `go.sum` must be complete.
    ///
    /// # Errors
    ///
    /// When Go is missing, the build fails, or the program cannot be started.
    pub fn start(program: &str, cache_root: &Path) -> Result<Self, Error> {
        let binary = build_peer(program, cache_root)?;
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_error(format!("starting {}", binary.display())))?;
        let mut stdin = child.stdin.take().ok_or_else(|| Error::Io {
            context: "taking the peer's stdin".into(),
            source: io::ErrorKind::BrokenPipe.into(),
        })?;
        let stdout = child.stdout.take().ok_or_else(|| Error::Io {
            context: "taking the peer's stdout".into(),
            source: io::ErrorKind::BrokenPipe.into(),
        })?;
        let (lines, receiver) = mpsc::channel::<String>();
        let writer = thread::spawn(move || {
            for line in receiver {
                stdin.write_all(line.as_bytes())?;
                stdin.write_all(b"\n")?;
                stdin.flush()?;
            }
            Ok(())
        });
        Ok(Self {
            child,
            lines: Some(lines),
            writer: Some(writer),
            answers: BufReader::new(stdout),
        })
    }

    /// The one peer of `program` that the tests of a binary share, started in `cell` at first
    /// use (see [`start`](Self::start)); a test that failed while holding it left it between
    /// scripts, so it is handed on as it is.
    ///
    /// # Panics
    ///
    /// When the peer cannot be built or started: a differential test needs its peer.
    pub fn shared(
        cell: &'static OnceLock<Mutex<GoPeer>>,
        program: &str,
        cache_root: &Path,
    ) -> MutexGuard<'static, GoPeer> {
        cell.get_or_init(|| match Self::start(program, cache_root) {
            Ok(peer) => Mutex::new(peer),
            Err(error) => panic!("the client-go peer is required for this test: {error}"),
        })
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `lines` and returns the peer's answers, one per line, in order.
    ///
    /// # Errors
    ///
    /// When the peer exits or stops answering.
    pub fn exchange(&mut self, lines: &[String]) -> Result<Vec<String>, Error> {
        let Some(sender) = &self.lines else {
            return Err(self.exited(0, lines.len()));
        };
        // The writer thread batches nothing: one channel message per script keeps it simple.
        let mut script = String::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                script.push('\n');
            }
            script.push_str(line);
        }
        if sender.send(script).is_err() {
            return Err(self.exited(0, lines.len()));
        }
        let mut answers = Vec::with_capacity(lines.len());
        for answered in 0..lines.len() {
            let mut answer = String::new();
            let read = self
                .answers
                .read_line(&mut answer)
                .map_err(io_error("reading the peer's answers"))?;
            if read == 0 {
                return Err(self.exited(answered, lines.len()));
            }
            answer.truncate(answer.trim_end().len());
            answers.push(answer);
        }
        Ok(answers)
    }

    fn exited(&mut self, answered: usize, expected: usize) -> Error {
        self.lines = None;
        let _ = self.child.kill();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        Error::PeerExited {
            answered,
            expected,
            stderr,
        }
    }
}

impl Drop for GoPeer {
    fn drop(&mut self) {
        // Closing the channel ends the writer, which closes stdin, which ends the peer. A peer
        // left mid-answer (a test failed between an exchange's send and its reads) blocks on
        // its full stdout and never reads stdin again, so it is killed first: the writer's
        // blocked write then fails instead of waiting forever.
        self.lines = None;
        let _ = self.child.kill();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        let _ = self.child.wait();
    }
}

/// Builds `cmd/<program>` of [`peer_module_dir`] into `cache_root` (unless a build of the same
/// sources is already there) and returns the binary's path, for a peer that is run with its own
/// arguments and talks in its own way rather than through [`GoPeer`].
///
/// # Errors
///
/// When Go is missing or the build fails.
pub fn build_peer(program: &str, cache_root: &Path) -> Result<PathBuf, Error> {
    let module = peer_module_dir();
    let hash = source_hash(&module)?;
    let dir = cache_root
        .join("go-peers")
        .join(format!("{program}-{hash:016x}"));
    let binary = dir.join(program);
    if binary.is_file() {
        return Ok(binary);
    }
    fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
    // Built under a name no other build shares and renamed, so concurrent builds (test
    // binaries, or the tests of one binary) never run or move each other's half-written file.
    static BUILDS: AtomicU64 = AtomicU64::new(0);
    let partial = dir.join(format!(
        "{program}.partial-{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    let output = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&partial)
        .arg(format!("./cmd/{program}"))
        .current_dir(&module)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .output()
        .map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => Error::GoMissing {
                module: module.clone(),
            },
            _ => Error::Io {
                context: "running `go build`".into(),
                source: err,
            },
        })?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        return Err(Error::BuildFailed {
            program: program.to_owned(),
            module,
            output: text,
        });
    }
    fs::rename(&partial, &binary).map_err(io_error(format!("moving {}", partial.display())))?;
    remove_stale_builds(cache_root, program, &dir);
    Ok(binary)
}

/// Removes builds of `program` from older sources (some 13 MB each). Best effort: a
/// build still in use elsewhere is simply left for next time.
fn remove_stale_builds(cache_root: &Path, program: &str, current: &Path) {
    let Ok(entries) = fs::read_dir(cache_root.join("go-peers")) else {
        return;
    };
    let prefix = format!("{program}-");
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with(&prefix));
        if ours && path != current {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// FNV-1a over the relative paths and contents of the module's Go sources, `go.mod` and
/// `go.sum`, visited in sorted order so the hash depends on the sources alone.
fn source_hash(module: &Path) -> Result<u64, Error> {
    let mut files = Vec::new();
    collect_sources(module, &mut files)?;
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for file in files {
        let relative = file.strip_prefix(module).unwrap_or(&file);
        feed(relative.to_string_lossy().as_bytes());
        feed(&fs::read(&file).map_err(io_error(format!("reading {}", file.display())))?);
    }
    Ok(hash)
}

fn collect_sources(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries = fs::read_dir(dir).map_err(io_error(format!("listing {}", dir.display())))?;
    for entry in entries {
        let path = entry
            .map_err(io_error(format!("listing {}", dir.display())))?
            .path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            collect_sources(&path, files)?;
        } else if name.ends_with(".go") || name == "go.mod" || name == "go.sum" {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_hash_changes_with_the_sources() {
        let root = std::env::temp_dir().join(format!("kinformer-hash-{}", std::process::id()));
        fs::create_dir_all(root.join("cmd")).unwrap();
        fs::write(root.join("go.mod"), "module x\n").unwrap();
        fs::write(root.join("cmd").join("main.go"), "package main\n").unwrap();
        fs::write(root.join("README.md"), "not a source\n").unwrap();
        let before = source_hash(&root).unwrap();
        assert_eq!(before, source_hash(&root).unwrap());
        fs::write(root.join("README.md"), "still not a source\n").unwrap();
        assert_eq!(before, source_hash(&root).unwrap());
        fs::write(root.join("cmd").join("main.go"), "package main // edited\n").unwrap();
        assert_ne!(before, source_hash(&root).unwrap());
        fs::remove_dir_all(&root).unwrap();
    }
}
