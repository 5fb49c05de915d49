//! `cargo xtask kind-image`: the kind node image `kindest/node:v1.37.2`, built on this machine
//! from the Go module proxy and Debian's packages, for machines that reach no image registry.
//!
//! Every piece is built from source or from Debian, then cached under
//! `~/.cache/kinformer/kind/<versions>/` (kinformer-controlplane's cache root), so only
//! the first run pays for the Go builds; a cold run needs nothing but the registries:
//! - the Kubernetes binaries from `xtask/kind` (same replace list and version stamps as the
//!   local control plane, whose kube-apiserver and etcd the image reuses), the container runtime,
//!   crictl, CNI plugins, CoreDNS and the kind CLI from `xtask/kind/runtime`, and pause from
//!   `build/pause/linux/pause.c` in the k8s.io/kubernetes module, with a static gcc;
//! - the images `kubeadm config images list` names, each a binary on `scratch` (kube-proxy on
//!   the node's Debian tree, for iptables), saved as docker archives;
//! - the node's root filesystem: `debootstrap --variant=minbase` with the packages kind's base
//!   image installs, kind's base files from the sigs.k8s.io/kind module, kinformer's changes in
//!   `xtask/kind/node` (static ptp CNI, restricted oom scores, `--fail-cgroupv1=false`), and
//!   the images preloaded into its containerd, pinned, so nothing is ever pulled.
//!
//! The tree becomes one `docker import`ed layer (what kind's own Dockerfile squashes to), not a
//! `kind build node-image` run, which still fetches images it does not find in its archives.
//! The packed tree and the image carry a key of the versions and of `xtask/kind/node`; a run
//! whose key matches the image in Docker (or the cached tar) assembles nothing.
//!
//! The host may need changes first: Debian's `docker.io`, `debootstrap` and `libseccomp-dev`
//! when absent; where root lacks `CAP_SYS_RESOURCE` (kind runs nodes `--privileged`, and runc
//! then fails to apply every capability), `kinformer-runc` (`xtask/kind/cmd/kinformer-runc`)
//! installed and registered as Docker's default runtime in `/etc/docker/daemon.json`, which
//! restarts dockerd; and a running dockerd. The task makes them only with `--prepare-host`,
//! printing each; without it, it lists what it would change and stops.

#![allow(clippy::print_stderr, reason = "xtask reports its progress on stderr")]

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use serde_json::Value;

use crate::{
    controlplane::{self, ETCD_VERSION, KUBERNETES_VERSION},
    project_root,
};

mod host;
mod node;
mod rootfs;

pub(crate) use host::docker_answers;
use node::{assemble_node, cached_node_key, image_key, image_size, node_key, remove_image};
pub(crate) use node::{image_exists, import_node_tar};

/// The node image `cargo xtask e2e --kind` runs, published by kind or built here.
pub(crate) const NODE_IMAGE: &str = "kindest/node:v1.37.2";
/// The kind CLI; `xtask/kind/runtime/go.mod` pins it.
const KIND_VERSION: &str = "v0.33.0";
/// containerd and runc as kind's base image (images/base/Dockerfile) pins them.
const CONTAINERD_VERSION: &str = "v2.3.4";
const RUNC_VERSION: &str = "v1.4.3";
/// cri-tools as kind's base image pins it (v1.37 needs a newer k8s.io/cri-api than containerd).
const CRICTL_VERSION: &str = "v1.36.0";
const CNI_PLUGINS_VERSION: &str = "v1.9.1";
/// What kubeadm v1.37 deploys (`CoreDNSVersion`, `PauseVersion`, `DefaultEtcdVersion`).
const COREDNS_VERSION: &str = "v1.14.6";
const PAUSE_VERSION: &str = "3.10.2";
const ETCD_IMAGE_TAG: &str = "3.7.0-0";
/// The Debian release of the node's root filesystem (and of this machine).
const DEBIAN_SUITE: &str = "bookworm";
/// The image label that names the versions an image from this task was built with.
const KEY_LABEL: &str = "dev.kinformer.kind-image";

/// The cache folder's name: every version that goes into the image.
pub(crate) fn versions_key() -> String {
    format!(
        "k8s-{KUBERNETES_VERSION}_kind-{KIND_VERSION}_containerd-{CONTAINERD_VERSION}_runc-{RUNC_VERSION}\
         _crictl-{CRICTL_VERSION}_cni-{CNI_PLUGINS_VERSION}_coredns-{COREDNS_VERSION}_debian-{DEBIAN_SUITE}"
    )
}

/// `~/.cache/kinformer/kind/<versions>`.
pub(crate) fn cache_dir() -> PathBuf {
    controlplane::cache_root().join("kind").join(versions_key())
}

/// The node's root filesystem as a tar, which `e2e --kind` imports when Docker lost the image.
pub(crate) fn cached_node_tar() -> PathBuf {
    cache_dir().join("node.tar")
}

/// A built binary in the cache (`kind`, `kubectl`, ...), when it is there.
pub(crate) fn cached_binary(name: &str) -> Option<PathBuf> {
    Some(cache_dir().join("bin").join(name)).filter(|path| path.is_file())
}

/// Runs `cargo xtask kind-image`; with `check`, only says whether the image is at hand. The
/// host changes it needs are made with `prepare_host`, and refused, listed, without.
pub(crate) fn kind_image(check_only: bool, prepare_host: bool) -> Result<(), String> {
    if check_only {
        return check();
    }
    let started = Instant::now();
    if !host::is_root() {
        return Err(
            "kind-image runs as root: it debootstraps and chroots (and with --prepare-host \
             installs packages)"
                .into(),
        );
    }
    let plan = host::HostPlan::of_this_host()?;
    let needed = plan.changes();
    let changes = if needed.is_empty() {
        Vec::new()
    } else if prepare_host {
        plan.apply()?
    } else {
        return Err(format!(
            "this host needs changes before the node image can be built and run:\n  - {}\n\
             `cargo xtask kind-image --prepare-host` makes them (and prints each)",
            needed.join("\n  - ")
        ));
    };
    let dir = cache_dir();
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).map_err(|err| format!("creating {}: {err}", bin.display()))?;
    build_binaries(&bin)?;
    check_image_names(&bin)?;
    let rootfs = rootfs::build_rootfs(&dir)?;
    let images = build_images(&dir, &bin, &rootfs)?;
    let key = node_key()?;
    if image_key(NODE_IMAGE).as_deref() == Some(key.as_str()) {
        eprintln!("xtask: {NODE_IMAGE} in Docker is built from these pieces ({key})");
    } else if fs::read_to_string(cached_node_key()).ok().as_deref() == Some(key.as_str())
        && cached_node_tar().is_file()
    {
        import_node_tar()?;
    } else {
        assemble_node(&dir, &bin, &rootfs, &images, &key)?;
    }
    let size = image_size(NODE_IMAGE)?;
    eprintln!(
        "xtask: {NODE_IMAGE} is ready ({size}) in {:.0?}; pieces cached in {}",
        started.elapsed(),
        dir.display()
    );
    if changes.is_empty() {
        eprintln!("xtask: no change to this host was needed");
    } else {
        eprintln!("xtask: changes made to this host:");
        for change in &changes {
            eprintln!("  - {change}");
        }
    }
    Ok(())
}

/// `kind-image --check`: succeeds when `e2e --kind` can run on the node image without
/// building or pulling it (what `.ci/run` asks before running the kind backend), and says why
/// not otherwise. Starts nothing and changes nothing.
fn check() -> Result<(), String> {
    let in_docker = docker_answers() && image_exists(NODE_IMAGE);
    if !in_docker && !cached_node_tar().is_file() {
        return Err(format!(
            "{NODE_IMAGE} is neither in Docker nor cached in {}",
            cached_node_tar().display()
        ));
    }
    if !docker_answers() && !present("dockerd") {
        return Err("no Docker engine answers and dockerd is not installed".to_owned());
    }
    if !present("kind") && cached_binary("kind").is_none() {
        return Err("no kind CLI on PATH or in the cache".to_owned());
    }
    let source = if in_docker {
        "in Docker"
    } else {
        "in the cache"
    };
    eprintln!("xtask: {NODE_IMAGE} is ready {source}");
    Ok(())
}

/// Whether `probe` (a command on PATH or an absolute path) exists.
fn present(probe: &str) -> bool {
    if probe.starts_with('/') {
        return Path::new(probe).exists();
    }
    env::var_os("PATH").is_some_and(|path| {
        env::split_paths(&path)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .any(|dir| dir.join(probe).is_file())
    })
}

/// One `go build` of a package from one of the two Go modules under `xtask/kind`.
struct Go {
    name: &'static str,
    module: &'static str,
    package: &'static str,
    cgo: bool,
    tags: &'static str,
    ldflags: Vec<String>,
}

impl Go {
    /// A package of `xtask/kind`: Kubernetes (stamped like the control plane) or the wrapper.
    fn kind(name: &'static str, package: &'static str) -> Self {
        Self {
            name,
            module: "xtask/kind",
            package,
            cgo: false,
            tags: "",
            ldflags: if package.starts_with("k8s.io/") {
                controlplane::kube_version_ldflags()
            } else {
                Vec::new()
            },
        }
    }

    /// A package of `xtask/kind/runtime`, with `-X` stamps of its version.
    fn runtime(name: &'static str, package: &'static str, stamps: &[String]) -> Self {
        Self {
            name,
            module: "xtask/kind/runtime",
            package,
            cgo: false,
            tags: "",
            ldflags: stamps.iter().map(|stamp| format!("-X {stamp}")).collect(),
        }
    }
}

/// Every Go binary of the node image.
fn go_binaries() -> Vec<Go> {
    let containerd = [
        format!("github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"),
        "github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
            .to_owned(),
    ];
    let cni = [format!(
        "github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion={CNI_PLUGINS_VERSION}"
    )];
    let mut binaries = vec![
        Go::kind("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
        Go::kind("kubeadm", "k8s.io/kubernetes/cmd/kubeadm"),
        Go::kind("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
        Go::kind(
            "kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
        ),
        Go::kind("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
        Go::kind("kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy"),
        Go::runtime(
            "crictl",
            "sigs.k8s.io/cri-tools/cmd/crictl",
            &[format!(
                "sigs.k8s.io/cri-tools/pkg/version.Version={}",
                CRICTL_VERSION.trim_start_matches('v')
            )],
        ),
        Go::runtime(
            "ptp",
            "github.com/containernetworking/plugins/plugins/main/ptp",
            &cni,
        ),
        Go::runtime(
            "host-local",
            "github.com/containernetworking/plugins/plugins/ipam/host-local",
            &cni,
        ),
        Go::runtime(
            "portmap",
            "github.com/containernetworking/plugins/plugins/meta/portmap",
            &cni,
        ),
        Go::runtime(
            "loopback",
            "github.com/containernetworking/plugins/plugins/main/loopback",
            &cni,
        ),
        Go::runtime("coredns", "github.com/coredns/coredns", &[]),
        Go::runtime("kind", "sigs.k8s.io/kind", &[]),
    ];
    for (name, package) in [
        (
            "containerd",
            "github.com/containerd/containerd/v2/cmd/containerd",
        ),
        ("ctr", "github.com/containerd/containerd/v2/cmd/ctr"),
        (
            "containerd-shim-runc-v2",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        ),
    ] {
        binaries.push(Go {
            // kind's base image leaves these snapshotters out too; btrfs would need cgo.
            tags: "no_aufs no_zfs no_btrfs no_devmapper",
            ..Go::runtime(name, package, &containerd)
        });
    }
    // runc needs cgo (nsenter, libseccomp); linked statically, like kind's, so it runs on any
    // node userland.
    let mut runc = Go::runtime(
        "runc",
        "github.com/opencontainers/runc",
        &[format!(
            "main.version={}",
            RUNC_VERSION.trim_start_matches('v')
        )],
    );
    runc.cgo = true;
    runc.tags = "seccomp urfave_cli_no_docs netgo osusergo";
    runc.ldflags.push("-linkmode=external".to_owned());
    runc.ldflags.push("-extldflags=-static".to_owned());
    binaries.push(runc);
    binaries
}

/// Builds every binary missing from `bin`, and copies in kube-apiserver and etcd from the
/// local control plane's cache (building them there first if need be).
fn build_binaries(bin: &Path) -> Result<(), String> {
    for go in go_binaries() {
        let output = bin.join(go.name);
        if !output.is_file() {
            go_build(&go, &output)?;
        }
    }
    controlplane::ensure_binaries()?;
    for name in ["kube-apiserver", "etcd"] {
        let output = bin.join(name);
        if !output.is_file() {
            copy_atomically(&controlplane::binary_dir().join(name), &output)?;
        }
    }
    let pause = bin.join("pause");
    if !pause.is_file() {
        let source =
            module_dir("xtask/kind", "k8s.io/kubernetes")?.join("build/pause/linux/pause.c");
        let partial = partial_path(&pause);
        let mut gcc = Command::new("nice");
        gcc.args(["-n", "19", "gcc", "-Os", "-Wall", "-Werror", "-static"])
            .arg(format!("-DVERSION=v{PAUSE_VERSION}-kinformer"))
            .arg("-o")
            .arg(&partial)
            .arg(source);
        run_captured(gcc)?;
        rename(&partial, &pause)?;
    }
    Ok(())
}

/// `go build` of one package into `output` (through a partial file, so an interrupted build
/// never looks cached), at idle priority.
fn go_build(go: &Go, output: &Path) -> Result<(), String> {
    let started = Instant::now();
    eprintln!("xtask: building {} ({})", go.name, go.package);
    let partial = partial_path(output);
    let mut command = idle("go");
    command
        .args(["build", "-trimpath"])
        .arg(format!("-tags={}", go.tags))
        // -s -w: no symbol table or DWARF, as Kubernetes' release builds; the image is a third
        // smaller.
        .arg(format!("-ldflags=-s -w {}", go.ldflags.join(" ")))
        .arg("-o")
        .arg(&partial)
        .arg(go.package)
        .current_dir(project_root().join(go.module))
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", if go.cgo { "1" } else { "0" });
    crate::run(command).map_err(|err| {
        format!("{err} (is Go 1.26 installed and the Go module proxy reachable?)")
    })?;
    rename(&partial, output)?;
    eprintln!("xtask: built {} in {:.0?}", go.name, started.elapsed());
    Ok(())
}

/// Tars `tree` (numeric owners) into `tar`, through a partial file renamed once complete.
fn pack_tree(tree: &Path, tar: &Path) -> Result<(), String> {
    let partial = partial_path(tar);
    let mut pack = idle("tar");
    pack.arg("-C")
        .arg(tree)
        .args(["--numeric-owner", "-cf"])
        .arg(&partial)
        .arg(".");
    if let Err(err) = run_captured(pack) {
        // A full disk is the usual cause: the partial tar must not keep the space.
        remove_file(&partial)?;
        return Err(err);
    }
    rename(&partial, tar)
}

/// `nice -n 19 ionice -c3 PROGRAM`: the image build must not starve whatever else runs.
fn idle(program: &str) -> Command {
    let mut command = Command::new("nice");
    command.args(["-n", "19"]);
    if present("ionice") {
        command.args(["ionice", "-c3"]);
    }
    command.arg(program);
    command
}

/// The folder of `module_path` as the Go module in `module` resolves it (downloaded if need be).
fn module_dir(module: &str, module_path: &str) -> Result<PathBuf, String> {
    let mut command = Command::new("go");
    command
        .args(["mod", "download", "-json", module_path])
        .current_dir(project_root().join(module))
        .env("GOTOOLCHAIN", "local");
    let output = run_captured(command)?;
    let info: Value = serde_json::from_slice(&output)
        .map_err(|err| format!("go mod download -json {module_path}: {err}"))?;
    info["Dir"].as_str().map(PathBuf::from).ok_or(format!(
        "go mod download -json {module_path} printed no Dir"
    ))
}

/// One image kubeadm or containerd needs, built from cached pieces.
struct Image {
    reference: String,
    /// The archive's file name in `images/`.
    file: &'static str,
    /// The binary copied in, and where.
    binary: &'static str,
    path: &'static str,
    /// Whether it is built on the node's Debian tree (kube-proxy runs iptables) or `scratch`.
    on_rootfs: bool,
    extra: &'static str,
}

fn node_images() -> Vec<Image> {
    let registry = "registry.k8s.io";
    let kube = |name: &'static str, on_rootfs: bool| Image {
        reference: format!("{registry}/{name}:{KUBERNETES_VERSION}"),
        file: name,
        binary: name,
        path: "/usr/local/bin/",
        on_rootfs,
        extra: "",
    };
    vec![
        kube("kube-apiserver", false),
        kube("kube-controller-manager", false),
        kube("kube-scheduler", false),
        kube("kube-proxy", true),
        Image {
            reference: format!("{registry}/etcd:{ETCD_IMAGE_TAG}"),
            file: "etcd",
            binary: "etcd",
            path: "/usr/local/bin/",
            on_rootfs: false,
            extra: "",
        },
        Image {
            reference: format!("{registry}/coredns/coredns:{COREDNS_VERSION}"),
            file: "coredns",
            binary: "coredns",
            path: "/coredns",
            on_rootfs: false,
            extra: "ENTRYPOINT [\"/coredns\"]\n",
        },
        Image {
            reference: format!("{registry}/pause:{PAUSE_VERSION}"),
            file: "pause",
            binary: "pause",
            path: "/pause",
            on_rootfs: false,
            extra: "USER 65535:65535\nENTRYPOINT [\"/pause\"]\n",
        },
    ]
}

/// Fails unless the images built here are exactly the ones the built kubeadm asks for (and
/// etcd is the release the control plane runs), so a version bump cannot leave one behind.
fn check_image_names(bin: &Path) -> Result<(), String> {
    let mut command = Command::new(bin.join("kubeadm"));
    command.args([
        "config",
        "images",
        "list",
        "--kubernetes-version",
        KUBERNETES_VERSION,
    ]);
    let listed = String::from_utf8_lossy(&run_captured(command)?).to_string();
    let mut wanted: Vec<&str> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    wanted.sort_unstable();
    let images = node_images();
    let mut built: Vec<&str> = images
        .iter()
        .map(|image| image.reference.as_str())
        .collect();
    built.sort_unstable();
    if wanted != built {
        return Err(format!(
            "kubeadm {KUBERNETES_VERSION} lists images {wanted:?}, but kind-image builds {built:?}; \
             update the versions in xtask/src/kind_image.rs"
        ));
    }
    if !ETCD_IMAGE_TAG.starts_with(ETCD_VERSION.trim_start_matches('v')) {
        return Err(format!(
            "the etcd image tag {ETCD_IMAGE_TAG} is not the etcd {ETCD_VERSION} the image ships"
        ));
    }
    Ok(())
}

/// Builds (or finds) each image's docker archive in `images/`.
fn build_images(dir: &Path, bin: &Path, rootfs: &Path) -> Result<PathBuf, String> {
    let images = dir.join("images");
    fs::create_dir_all(&images).map_err(|err| format!("creating {}: {err}", images.display()))?;
    let base = format!("kinformer/kind-rootfs:{DEBIAN_SUITE}");
    for image in node_images() {
        let archive = images.join(format!("{}.tar", image.file));
        if archive.is_file() {
            continue;
        }
        if image.on_rootfs && !image_exists(&base) {
            let mut import = Command::new("docker");
            import.arg("import").arg(rootfs).arg(&base);
            run_captured(import)?;
        }
        let context = dir.join(format!("context-{}", image.file));
        remove_tree(&context)?;
        fs::create_dir_all(&context)
            .map_err(|err| format!("creating {}: {err}", context.display()))?;
        fs::copy(bin.join(image.binary), context.join(image.binary))
            .map_err(|err| format!("copying {} into its image: {err}", image.binary))?;
        let from = if image.on_rootfs {
            base.as_str()
        } else {
            "scratch"
        };
        let dockerfile = format!(
            "FROM {from}\nCOPY {binary} {path}\n\
             ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n{extra}",
            binary = image.binary,
            path = image.path,
            extra = image.extra
        );
        fs::write(context.join("Dockerfile"), dockerfile)
            .map_err(|err| format!("writing the Dockerfile of {}: {err}", image.reference))?;
        eprintln!("xtask: building image {}", image.reference);
        let mut build = Command::new("docker");
        build
            .args(["build", "--quiet", "--tag", &image.reference])
            .arg(&context)
            .env("DOCKER_BUILDKIT", "0");
        run_captured(build)?;
        let partial = partial_path(&archive);
        let mut save = Command::new("docker");
        save.args(["save", "--output"])
            .arg(&partial)
            .arg(&image.reference);
        run_captured(save)?;
        rename(&partial, &archive)?;
        remove_tree(&context)?;
        // The archive is what the node gets; Docker need not keep a copy.
        remove_image(&image.reference)?;
    }
    if image_exists(&base) {
        remove_image(&base)?;
    }
    Ok(images)
}

/// Runs `command`, returning its stdout; on failure the error names the command and carries
/// its stderr.
fn run_captured(mut command: Command) -> Result<Vec<u8>, String> {
    eprintln!("xtask: running {command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("could not start {command:?}: {err}"))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "{command:?} failed with {}:\n{}",
            output.status,
            tail.join("\n")
        ))
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    path.with_file_name(name)
}

fn rename(from: &Path, to: &Path) -> Result<(), String> {
    fs::rename(from, to)
        .map_err(|err| format!("moving {} to {}: {err}", from.display(), to.display()))
}

fn copy_atomically(from: &Path, to: &Path) -> Result<(), String> {
    let partial = partial_path(to);
    fs::copy(from, &partial)
        .map_err(|err| format!("copying {} to {}: {err}", from.display(), partial.display()))?;
    rename(&partial, to)
}

fn remove_file(path: &Path) -> Result<(), String> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("removing {}: {err}", path.display())),
    }
}

fn remove_tree(path: &Path) -> Result<(), String> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("removing {}: {err}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_modules_pin_the_versions_the_image_is_keyed_by() {
        let kubernetes = include_str!("../kind/go.mod");
        let runtime = include_str!("../kind/runtime/go.mod");
        let pins = |text: &str, module: &str| {
            text.lines()
                .map(str::trim)
                .filter_map(|line| line.strip_prefix(&format!("{module} ")))
                .map(|rest| {
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(pins(kubernetes, "k8s.io/kubernetes"), [KUBERNETES_VERSION]);
        for (module, version) in [
            ("sigs.k8s.io/kind", KIND_VERSION),
            ("github.com/containerd/containerd/v2", CONTAINERD_VERSION),
            ("github.com/opencontainers/runc", RUNC_VERSION),
            ("sigs.k8s.io/cri-tools", CRICTL_VERSION),
            (
                "github.com/containernetworking/plugins",
                CNI_PLUGINS_VERSION,
            ),
            ("github.com/coredns/coredns", COREDNS_VERSION),
        ] {
            assert_eq!(
                pins(runtime, module),
                [version],
                "{module} in xtask/kind/runtime/go.mod"
            );
        }
        assert_eq!(NODE_IMAGE, format!("kindest/node:{KUBERNETES_VERSION}"));
    }

    #[test]
    fn the_images_are_the_kubeadm_set_plus_nothing_else() {
        let images = node_images();
        let references: Vec<&str> = images
            .iter()
            .map(|image| image.reference.as_str())
            .collect();
        assert!(references.contains(&"registry.k8s.io/pause:3.10.2"));
        assert!(references.contains(&"registry.k8s.io/coredns/coredns:v1.14.6"));
        assert!(references.contains(&"registry.k8s.io/etcd:3.7.0-0"));
        assert_eq!(references.len(), 7);
        let containerd = include_str!("../kind/node/containerd-config.toml");
        assert!(containerd.contains(&format!(
            "sandbox_image = \"registry.k8s.io/pause:{PAUSE_VERSION}\""
        )));
    }
}
