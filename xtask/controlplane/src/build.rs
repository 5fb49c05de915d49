//! The binaries: kube-apiserver and etcd built from the Go module beside this crate's manifest
//! and cached by Kubernetes version, so only the first run pays for the Go build.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use crate::{ETCD_VERSION, KUBERNETES_VERSION, processes::run};

/// Paths of the two cached binaries, from [`ensure_binaries`].
#[derive(Debug, Clone)]
pub struct Binaries {
    pub(crate) etcd: PathBuf,
    pub(crate) kube_apiserver: PathBuf,
}

/// `$KINFORMER_CACHE_DIR`, else `$XDG_CACHE_HOME/kinformer`, else `~/.cache/kinformer`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = env::var_os("KINFORMER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("kinformer");
    }
    env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache"))
        .unwrap_or_else(env::temp_dir)
        .join("kinformer")
}

/// The folder holding the binaries for [`KUBERNETES_VERSION`].
pub fn binary_dir() -> PathBuf {
    cache_root().join("controlplane").join(KUBERNETES_VERSION)
}

/// Where `control-plane up` keeps its state (PIDs, kubeconfig, logs).
pub(crate) fn state_dir() -> PathBuf {
    cache_root().join("controlplane").join("run")
}

/// Builds kube-apiserver and etcd into the cache unless both are already there.
///
/// # Errors
///
/// When the Go build fails (Go 1.26 and the Go module proxy are needed) or the cache cannot be
/// written.
pub fn ensure_binaries() -> Result<Binaries, String> {
    let dir = binary_dir();
    let binaries = Binaries {
        etcd: dir.join("etcd"),
        kube_apiserver: dir.join("kube-apiserver"),
    };
    if binaries.etcd.is_file() && binaries.kube_apiserver.is_file() {
        return Ok(binaries);
    }
    // The Go module lives beside this crate's manifest.
    let module = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Build into a fresh folder and rename, so an interrupted build never looks cached.
    let staging = dir.with_file_name(format!(
        "{KUBERNETES_VERSION}.partial-{}",
        std::process::id()
    ));
    fs::create_dir_all(&staging).map_err(|err| format!("creating {}: {err}", staging.display()))?;
    let started = Instant::now();
    eprintln!(
        "xtask: building kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} (first run only; many minutes)"
    );
    go_build(module, &staging.join("etcd"), "./cmd/etcd", &[])?;
    let version_flags = kube_version_ldflags();
    go_build(
        module,
        &staging.join("kube-apiserver"),
        "k8s.io/kubernetes/cmd/kube-apiserver",
        &version_flags,
    )?;
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|err| format!("clearing {}: {err}", dir.display()))?;
    }
    fs::rename(&staging, &dir)
        .map_err(|err| format!("moving the build into {}: {err}", dir.display()))?;
    eprintln!(
        "xtask: built the control plane in {:.0?} into {}",
        started.elapsed(),
        dir.display()
    );
    Ok(binaries)
}

/// `-X` flags that make `/version` report the real release instead of `v0.0.0-master`.
pub fn kube_version_ldflags() -> Vec<String> {
    let trimmed = KUBERNETES_VERSION.trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    let package = "k8s.io/component-base/version";
    vec![
        format!("-X {package}.gitVersion={KUBERNETES_VERSION}"),
        format!("-X {package}.gitMajor={major}"),
        format!("-X {package}.gitMinor={minor}"),
        format!("-X {package}.gitTreeState=clean"),
    ]
}

fn go_build(module: &Path, output: &Path, package: &str, ldflags: &[String]) -> Result<(), String> {
    // nice: the build takes minutes of both cores; whatever else runs should keep going.
    let mut command = Command::new("nice");
    command
        .args(["-n", "19", "go", "build", "-trimpath"])
        .arg(format!("-ldflags={}", ldflags.join(" ")))
        .arg("-o")
        .arg(output)
        .arg(package)
        .current_dir(module)
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0");
    run(command)
        .map_err(|err| format!("{err} (is Go 1.26 installed and the Go module proxy reachable?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ldflags_name_the_release_and_its_minor() {
        let flags = kube_version_ldflags();
        assert!(flags.contains(&format!(
            "-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}"
        )));
        assert!(flags.contains(&"-X k8s.io/component-base/version.gitMinor=37".to_owned()));
    }
}
