//! `cargo xtask control-plane up|down|env|restart-apiserver`: a control plane detached into the
//! cache's `controlplane/run` folder, which outlives xtask and which `e2e --local` reuses.

use std::{fs, io::Write as _, time::Instant};

use crate::{
    ApiServerOutage as _, ControlPlane, Options, build::ensure_binaries, build::state_dir,
    processes::alive, processes::stop_pids, state::read_state,
};

/// `control-plane up`: starts a control plane that outlives this process, unless one is up
/// already, and prints its settings.
///
/// # Errors
///
/// When the binaries cannot be built or the plane does not start.
pub fn up(options: &Options) -> Result<(), String> {
    if running().is_some() {
        eprintln!(
            "xtask: a control plane is already up; `cargo xtask control-plane env` prints its settings"
        );
        return print_env();
    }
    let dir = state_dir();
    if read_state(&dir).is_some() {
        // A plane that is partly gone: what is left of it goes first.
        down()?;
    }
    let binaries = ensure_binaries()?;
    let _ = fs::remove_dir_all(&dir);
    let started = Instant::now();
    let plane = ControlPlane::start(&binaries, options, &dir, true)?;
    eprintln!(
        "xtask: control plane up in {:.1?} (PIDs {:?}); stop it with `cargo xtask control-plane down`",
        started.elapsed(),
        plane.pids()
    );
    plane.detach();
    print_env()
}

/// `control-plane down`: stops the control plane `up` started, and removes its folder.
///
/// # Errors
///
/// When its folder cannot be removed.
pub fn down() -> Result<(), String> {
    let dir = state_dir();
    let Some(state) = read_state(&dir) else {
        eprintln!("xtask: no control plane is up");
        return Ok(());
    };
    stop_pids(&state.pids);
    fs::remove_dir_all(&dir).map_err(|err| format!("removing {}: {err}", dir.display()))?;
    eprintln!("xtask: control plane down");
    Ok(())
}

/// `control-plane env`: the settings that point `cargo test` (and kubectl) at the control
/// plane `up` started, as `export` lines on stdout.
///
/// # Errors
///
/// When no control plane is up.
#[allow(
    clippy::print_stdout,
    reason = "the environment is this command's output"
)]
pub fn print_env() -> Result<(), String> {
    let dir = state_dir();
    let plane = ControlPlane::attach(&dir)
        .map_err(|_| "no control plane is up; start one with `cargo xtask control-plane up`")?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "export KUBECONFIG={kubeconfig}\nexport KINFORMER_E2E_BACKEND=local\n\
         export KINFORMER_E2E_KUBECONFIG={kubeconfig}\nexport {env}={dir}\n\
         export KINFORMER_E2E_WATCH_CACHE={watch_cache}",
        kubeconfig = plane.kubeconfig().display(),
        env = crate::CONTROL_PLANE_ENV,
        dir = dir.display(),
        watch_cache = plane.watch_cache()
    )
    .map_err(|err| format!("writing to stdout: {err}"))
}

/// `control-plane restart-apiserver`: SIGKILLs kube-apiserver of the plane that is up (if it
/// still runs) and starts it again with the same flags.
///
/// # Errors
///
/// When no control plane is up, or kube-apiserver does not come back.
pub fn restart_apiserver() -> Result<(), String> {
    let mut plane = ControlPlane::attach(&state_dir())
        .map_err(|_| "no control plane is up; start one with `cargo xtask control-plane up`")?;
    plane.restartable()?;
    let started = Instant::now();
    if !plane.apiserver_down() {
        plane.kill_apiserver()?;
    }
    plane.start_apiserver()?;
    eprintln!(
        "xtask: kube-apiserver killed and ready again in {:.1?}",
        started.elapsed()
    );
    Ok(())
}

/// The control plane `up` started, when all its processes run (`e2e --local` reuses it).
pub fn running() -> Option<ControlPlane> {
    let plane = ControlPlane::attach(&state_dir()).ok()?;
    (!plane.pids().is_empty() && plane.pids().iter().all(|pid| alive(*pid))).then_some(plane)
}
