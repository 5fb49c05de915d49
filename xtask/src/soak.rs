//! `cargo xtask soak`: kinformer's `soak` example (crates/kinformer/examples/soak.rs) for N
//! minutes against a local kube-apiserver + etcd that this task kills and restarts every few
//! minutes, or against the fake API server (`--fake`), which the example disrupts itself.
//!
//! The example checks the caches, the handlers' views and the controller against the server
//! every minute and fails on any divergence or on threads, descriptors, tasks or memory that
//! grow; this task adds the outages and says how many the run survived.

use std::{
    env,
    process::{Child, Command},
    thread,
    time::{Duration, Instant},
};

use crate::{
    controlplane::{self, ApiServerOutage, ControlPlane, Options},
    flags::Soak,
};

/// kube-apiserver compacts etcd this often during a soak (its default is five minutes).
const COMPACTION_INTERVAL: &str = "1m";

/// Runs `cargo xtask soak`.
pub(crate) fn soak(args: &Soak) -> Result<(), String> {
    let minutes = args.minutes.to_string();
    if args.fake {
        let mut example = example();
        example.args(["--fake", "--minutes", &minutes]);
        return crate::run(example);
    }
    let binaries = controlplane::ensure_binaries()?;
    let dir = env::temp_dir().join(format!("kinformer-soak-{}", std::process::id()));
    let options = Options {
        etcd_compaction_interval: Some(COMPACTION_INTERVAL.to_owned()),
        ..Options::default()
    };
    let mut plane = ControlPlane::start(&binaries, &options, &dir, false)?;
    eprintln!(
        "xtask: control plane ready at {} (logs in {}); kube-apiserver restarts every {:?}",
        plane.server(),
        plane.dir().display(),
        args.restart_every
    );
    let mut example = example();
    example
        .args(["--minutes", &minutes])
        .env("KUBECONFIG", plane.kubeconfig());
    eprintln!("xtask: running {example:?}");
    let result = example
        .spawn()
        .map_err(|err| format!("could not start the soak example: {err}"))
        .and_then(|child| outages(child, &mut plane, args.restart_every));
    plane.stop();
    let restarts = result?;
    eprintln!("xtask: the soak passed, surviving {restarts} kube-apiserver restarts");
    Ok(())
}

/// The soak example, built and run by cargo.
fn example() -> Command {
    let mut command = crate::cargo();
    command.args(["run", "-q", "-p", "kinformer", "--example", "soak", "--"]);
    command
}

/// Kills and restarts kube-apiserver every `every` until `child` exits; the number of
/// restarts when it passed.
fn outages(
    mut child: Child,
    plane: &mut impl ApiServerOutage,
    every: Duration,
) -> Result<u32, String> {
    let mut restarts = 0;
    let mut next = Instant::now() + every;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(restarts),
            Ok(Some(status)) => {
                return Err(format!(
                    "the soak failed ({status}) after {restarts} kube-apiserver restarts"
                ));
            }
            Ok(None) => {}
            Err(err) => return Err(format!("waiting for the soak example: {err}")),
        }
        if Instant::now() >= next {
            let started = Instant::now();
            let restarted = plane
                .kill_apiserver()
                .and_then(|()| plane.start_apiserver());
            if let Err(err) = restarted {
                let _ = child.kill();
                return Err(format!("restarting kube-apiserver: {err}"));
            }
            restarts += 1;
            eprintln!(
                "xtask: kube-apiserver restart {restarts} (SIGKILL, then ready again in {:.1?})",
                started.elapsed()
            );
            next = Instant::now() + every;
        }
        thread::sleep(Duration::from_millis(200)); // polling a child process and a clock
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::flags::{self, Soak, Task};

    fn args(list: &[&str]) -> Result<Soak, String> {
        let line: Vec<String> = ["soak"]
            .iter()
            .chain(list)
            .map(ToString::to_string)
            .collect();
        match flags::parse(&line).map_err(|err| err.to_string())? {
            Task::Soak(soak) => Ok(soak),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn flags_parse_with_defaults_and_refuse_nonsense() {
        assert_eq!(
            args(&[]),
            Ok(Soak {
                minutes: 3,
                fake: false,
                restart_every: Duration::from_secs(120)
            })
        );
        assert_eq!(
            args(&["--minutes", "30", "--restart-every", "90", "--fake"]),
            Ok(Soak {
                minutes: 30,
                fake: true,
                restart_every: Duration::from_secs(90)
            })
        );
        assert!(args(&["--minutes", "0"]).is_err());
        assert!(args(&["--minutes"]).is_err());
        assert!(args(&["--bogus"]).unwrap_err().contains("Usage"));
    }
}
