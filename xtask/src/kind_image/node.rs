//! The node image itself: the tree `xtask/kind/node/assemble.sh` lays out, packed into the
//! cache and imported into Docker, under a key of what it is made of.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use super::{
    KEY_LABEL, NODE_IMAGE, cache_dir, cached_node_tar, idle, module_dir, pack_tree, remove_file,
    remove_tree, run_captured, versions_key,
};
use crate::{controlplane::KUBERNETES_VERSION, project_root};

/// What the node image is made of: [`versions_key`] and a digest of `xtask/kind/node` (the
/// overlay and `assemble.sh`), so a change to either rebuilds the tree, and nothing else does.
pub(super) fn node_key() -> Result<String, String> {
    let overlay = project_root().join("xtask/kind/node");
    let mut files: Vec<PathBuf> = fs::read_dir(&overlay)
        .and_then(|entries| {
            entries
                .map(|entry| entry.map(|entry| entry.path()))
                .collect()
        })
        .map_err(|err: std::io::Error| format!("reading {}: {err}", overlay.display()))?;
    files.sort_unstable();
    // 64-bit FNV-1a over each file's name and contents.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for file in &files {
        let name = file.file_name().unwrap_or_default().as_encoded_bytes();
        let contents =
            fs::read(file).map_err(|err| format!("reading {}: {err}", file.display()))?;
        for byte in name.iter().chain([&0]).chain(&contents).chain([&0]) {
            digest = (digest ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    Ok(format!("{}_node-{digest:016x}", versions_key()))
}

/// The [`node_key`] the cached `node.tar` was packed with.
pub(super) fn cached_node_key() -> PathBuf {
    cache_dir().join("node.key")
}

pub(super) fn remove_image(reference: &str) -> Result<(), String> {
    let mut remove = Command::new("docker");
    remove.args(["image", "rm", reference]);
    run_captured(remove).map(|_| ())
}

/// The [`node_key`] label of a local image, if Docker has it.
pub(super) fn image_key(reference: &str) -> Option<String> {
    let output = Command::new("docker")
        .args(["image", "inspect", "--format"])
        .arg(format!("{{{{index .Config.Labels \"{KEY_LABEL}\"}}}}"))
        .arg(reference)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let key = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.success() && !key.is_empty()).then_some(key)
}

/// The ID of a local image, if Docker has it.
pub(super) fn image_id(reference: &str) -> Option<String> {
    let output = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", reference])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Lays out the node's tree (`xtask/kind/node/assemble.sh`), tars it into the cache and
/// imports it as [`NODE_IMAGE`].
pub(super) fn assemble_node(
    dir: &Path,
    bin: &Path,
    rootfs: &Path,
    images: &Path,
    key: &str,
) -> Result<(), String> {
    let started = Instant::now();
    let work = dir.join("work");
    remove_tree(&work)?;
    // The old tar is stale: gone before the new one is written, it is 1.2 GB less at the peak.
    remove_file(&cached_node_key())?;
    remove_file(&cached_node_tar())?;
    let tree = work.join("rootfs");
    fs::create_dir_all(&tree).map_err(|err| format!("creating {}: {err}", tree.display()))?;
    let mut unpack = idle("tar");
    unpack
        .arg("-C")
        .arg(&tree)
        .args(["--numeric-owner", "-xf"])
        .arg(rootfs);
    run_captured(unpack)?;
    let node = project_root().join("xtask/kind/node");
    let mut assemble = Command::new("bash");
    assemble
        .arg(node.join("assemble.sh"))
        .env("ROOTFS", &tree)
        .env("BIN", bin)
        .env(
            "KIND_FILES",
            module_dir("xtask/kind/runtime", "sigs.k8s.io/kind")?.join("images/base/files"),
        )
        .env("OVERLAY", &node)
        .env("IMAGES", images)
        .env("WORK", &work)
        .env("K8S_VERSION", KUBERNETES_VERSION);
    crate::run(assemble)?;
    let packed = pack_tree(&tree, &cached_node_tar());
    remove_tree(&work)?;
    packed?;
    fs::write(cached_node_key(), key)
        .map_err(|err| format!("writing {}: {err}", cached_node_key().display()))?;
    import_node_tar()?;
    eprintln!(
        "xtask: node image assembled and imported in {:.0?}",
        started.elapsed()
    );
    Ok(())
}

/// `docker import`s the cached node tree as [`NODE_IMAGE`], then gives it the settings kind's
/// base image carries (systemd's container hint and stop signal, kind's entrypoint) through a
/// `docker build` that adds no layer: `docker import --change` takes no `STOPSIGNAL`.
pub(crate) fn import_node_tar() -> Result<(), String> {
    let imported = format!("kinformer/kind-node-tree:{KUBERNETES_VERSION}");
    let mut import = Command::new("docker");
    import.arg("import").arg(cached_node_tar()).arg(&imported);
    run_captured(import)?;
    let context = cache_dir().join("context-node");
    remove_tree(&context)?;
    fs::create_dir_all(&context).map_err(|err| format!("creating {}: {err}", context.display()))?;
    let dockerfile = format!(
        "FROM {imported}\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\n\
         LABEL {KEY_LABEL}={key}\nENTRYPOINT [\"/usr/local/bin/entrypoint\", \"/sbin/init\"]\n",
        key = fs::read_to_string(cached_node_key()).unwrap_or_else(|_| versions_key())
    );
    fs::write(context.join("Dockerfile"), dockerfile)
        .map_err(|err| format!("writing the node image's Dockerfile: {err}"))?;
    let previous = image_id(NODE_IMAGE);
    let mut build = Command::new("docker");
    build
        .args(["build", "--quiet", "--tag", NODE_IMAGE])
        .arg(&context)
        .env("DOCKER_BUILDKIT", "0");
    run_captured(build)?;
    remove_tree(&context)?;
    // Only the name goes: the layer is the node image's.
    remove_image(&imported)?;
    // A node image this replaced would stay behind nameless, 1.2 GB at a time.
    if let Some(previous) = previous.filter(|id| image_id(NODE_IMAGE).as_ref() != Some(id))
        && let Err(err) = remove_image(&previous)
    {
        eprintln!(
            "xtask: the replaced node image {previous} stays (a kind node may use it): {err}"
        );
    }
    Ok(())
}

pub(crate) fn image_exists(reference: &str) -> bool {
    image_id(reference).is_some()
}

/// The image's size as `docker image ls` prints it.
pub(super) fn image_size(reference: &str) -> Result<String, String> {
    let mut command = Command::new("docker");
    command.args(["image", "ls", "--format", "{{.Size}}", reference]);
    let output = run_captured(command)?;
    Ok(String::from_utf8_lossy(&output).trim().to_owned())
}
