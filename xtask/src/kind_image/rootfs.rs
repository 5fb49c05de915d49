//! The node's root filesystem for `cargo xtask kind-image`: Debian by debootstrap, with the
//! packages kind's base image installs, from the mirror this host's apt uses.

use std::{
    env, fs,
    path::{Path, PathBuf},
    time::Instant,
};

use super::{DEBIAN_SUITE, idle, remove_tree, run_captured};

/// What kind's base image installs, less NFS, iSCSI and fuse-overlayfs (for storage tests and
/// rootless nodes, neither of which this image serves).
const NODE_PACKAGES: &[&str] = &[
    "systemd",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
];

/// The debootstrapped Debian tree with the node's packages, as `rootfs.tar` in the cache.
pub(super) fn build_rootfs(dir: &Path) -> Result<PathBuf, String> {
    let tar = dir.join(format!("rootfs-{DEBIAN_SUITE}.tar"));
    if tar.is_file() {
        return Ok(tar);
    }
    let mirror = debian_mirror()?;
    let started = Instant::now();
    eprintln!("xtask: debootstrapping Debian {DEBIAN_SUITE} for the node from {mirror}");
    let tree = dir.join("rootfs.partial");
    remove_tree(&tree)?;
    let mut debootstrap = idle("debootstrap");
    debootstrap
        .args(["--variant=minbase", "--merged-usr"])
        .arg(format!("--include={}", NODE_PACKAGES.join(",")))
        .arg(DEBIAN_SUITE)
        .arg(&tree)
        .arg(&mirror);
    run_captured(debootstrap)?;
    // Package lists and downloaded .debs are no part of a node.
    for junk in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        let path = tree.join(junk);
        remove_tree(&path)?;
        fs::create_dir_all(&path).map_err(|err| format!("creating {}: {err}", path.display()))?;
    }
    super::pack_tree(&tree, &tar)?;
    remove_tree(&tree)?;
    eprintln!(
        "xtask: node root filesystem ready in {:.0?}",
        started.elapsed()
    );
    Ok(tar)
}

/// The Debian mirror this machine's apt uses for [`DEBIAN_SUITE`], or `KINFORMER_DEBIAN_MIRROR`.
fn debian_mirror() -> Result<String, String> {
    if let Ok(mirror) = env::var("KINFORMER_DEBIAN_MIRROR") {
        return Ok(mirror);
    }
    let mut texts = Vec::new();
    if let Ok(text) = fs::read_to_string("/etc/apt/sources.list") {
        texts.push(text);
    }
    if let Ok(entries) = fs::read_dir("/etc/apt/sources.list.d") {
        for entry in entries.flatten() {
            let path = entry.path();
            if path
                .extension()
                .is_some_and(|ext| ext == "sources" || ext == "list")
            {
                texts.extend(fs::read_to_string(path).ok());
            }
        }
    }
    texts
        .iter()
        .find_map(|text| mirror_in(text, DEBIAN_SUITE))
        .ok_or(format!(
            "no Debian {DEBIAN_SUITE} mirror found in /etc/apt/sources.list(.d); set \
             KINFORMER_DEBIAN_MIRROR to one"
        ))
}

/// The first URI serving `suite` in an apt sources text, one-line (`deb URI suite ...`) or
/// deb822 (`URIs:` / `Suites:` paragraphs).
fn mirror_in(text: &str, suite: &str) -> Option<String> {
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        if words.next() != Some("deb") {
            continue;
        }
        let words: Vec<&str> = words.filter(|word| !word.starts_with('[')).collect();
        if words.get(1) == Some(&suite) {
            return words.first().map(|uri| (*uri).to_owned());
        }
    }
    text.split("\n\n").find_map(|paragraph| {
        let field = |name: &str| {
            paragraph.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
        };
        let serves = field("Suites")?.split_whitespace().any(|s| s == suite)
            && field("Types").is_some_and(|types| types.split_whitespace().any(|t| t == "deb"));
        serves
            .then(|| field("URIs"))?
            .and_then(|uris| uris.split_whitespace().next().map(str::to_owned))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_read_from_one_line_and_deb822_sources() {
        let one_line = "# comment\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n";
        assert_eq!(
            mirror_in(one_line, "bookworm").as_deref(),
            Some("http://mirror.example/debian")
        );
        let deb822 = "Types: deb\nURIs: http://mirror.example/debian-security\n\
                      Suites: bookworm-security\n\nTypes: deb\nURIs: http://mirror.example/debian\n\
                      Suites: bookworm bookworm-updates\nComponents: main\n";
        assert_eq!(
            mirror_in(deb822, "bookworm").as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(mirror_in(deb822, "trixie"), None);
    }
}
