#!/bin/bash
# Lays out a kind node's root filesystem for `cargo xtask kind-image`, the way kind's own base
# image (images/base/Dockerfile in sigs.k8s.io/kind) and `kind build node-image` do, from pieces
# xtask built: run as root, with the environment below, on a debootstrapped Debian tree.
#
#   ROOTFS      the tree to fill in (Debian minbase plus the node's packages)
#   BIN         the built binaries (Kubernetes, containerd, runc, crictl, CNI plugins)
#   KIND_FILES  images/base/files from the sigs.k8s.io/kind module
#   OVERLAY     this folder: the files kinformer changes or adds
#   IMAGES      docker-archive tars of every image kubeadm and containerd need
#   WORK        a scratch folder for the importing containerd's state and socket
#   K8S_VERSION the Kubernetes release, written to /kind/version
set -o errexit -o nounset -o pipefail

step() { echo "assemble: $*" >&2; }

step "kind's base files"
install -d -m 0755 "$ROOTFS/usr/local/bin" "$ROOTFS/kind/bin" "$ROOTFS/etc/containerd" \
  "$ROOTFS/etc/default" "$ROOTFS/etc/sysctl.d" "$ROOTFS/etc/systemd/system/kubelet.service.d" \
  "$ROOTFS/LICENSES" "$ROOTFS/kind/manifests" "$ROOTFS/etc/cni/net.d" "$ROOTFS/opt/cni/bin" \
  "$ROOTFS/usr/local/sbin" "$ROOTFS/etc/kubernetes/manifests"
install -m 0755 "$KIND_FILES"/usr/local/bin/* "$ROOTFS/usr/local/bin/"
install -m 0644 "$KIND_FILES"/kind/README.txt "$ROOTFS/kind/"
install -m 0755 "$KIND_FILES"/kind/bin/* "$ROOTFS/kind/bin/"
install -m 0644 "$KIND_FILES"/LICENSES/* "$ROOTFS/LICENSES/"
install -m 0644 "$KIND_FILES"/etc/crictl.yaml "$ROOTFS/etc/"
install -m 0644 "$KIND_FILES"/etc/default/* "$ROOTFS/etc/default/"
install -m 0644 "$KIND_FILES"/etc/sysctl.d/* "$ROOTFS/etc/sysctl.d/"
install -m 0644 "$KIND_FILES"/etc/systemd/system/*.service "$KIND_FILES"/etc/systemd/system/*.slice \
  "$ROOTFS/etc/systemd/system/"
install -m 0644 "$KIND_FILES"/etc/systemd/system/kubelet.service.d/* \
  "$ROOTFS/etc/systemd/system/kubelet.service.d/"

step "kinformer's changes: containerd config, static CNI, kubelet flags, manifests"
# kind's config with the sandbox image kubeadm expects and restrict_oom_score_adj (see the file).
install -m 0644 "$OVERLAY/containerd-config.toml" "$ROOTFS/etc/containerd/config.toml"
install -m 0644 "$OVERLAY/10-kinformer-ptp.conflist" "$ROOTFS/etc/cni/net.d/"
install -m 0644 "$OVERLAY/default-cni.yaml" "$OVERLAY/default-storage.yaml" "$ROOTFS/kind/manifests/"
# kubelet 1.37 refuses to start on cgroup v1 unless told otherwise; kind's file sets one flag
# and no newline, so the line is written whole.
echo "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --fail-cgroupv1=false" \
  > "$ROOTFS/etc/default/kubelet"
printf '%s' "$K8S_VERSION" > "$ROOTFS/kind/version"

step "binaries"
install -m 0755 "$BIN"/kubelet "$BIN"/kubeadm "$BIN"/kubectl "$ROOTFS/usr/bin/"
install -m 0755 "$BIN"/containerd "$BIN"/ctr "$BIN"/containerd-shim-runc-v2 "$BIN"/crictl \
  "$ROOTFS/usr/local/bin/"
install -m 0755 "$BIN"/runc "$ROOTFS/usr/local/sbin/runc"
install -m 0755 "$BIN"/ptp "$BIN"/host-local "$BIN"/portmap "$BIN"/loopback "$ROOTFS/opt/cni/bin/"

step "systemd units (as kind's base image sets them)"
find "$ROOTFS/lib/systemd/system/sysinit.target.wants/" -name "systemd-tmpfiles-setup.service" -delete
rm -f "$ROOTFS"/lib/systemd/system/multi-user.target.wants/* \
  "$ROOTFS"/etc/systemd/system/*.wants/* \
  "$ROOTFS"/lib/systemd/system/local-fs.target.wants/* \
  "$ROOTFS"/lib/systemd/system/sockets.target.wants/*udev* \
  "$ROOTFS"/lib/systemd/system/sockets.target.wants/*initctl* \
  "$ROOTFS"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> "$ROOTFS/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$ROOTFS/sbin/init"
systemctl --root="$ROOTFS" enable kubelet.service containerd.service undo-mount-hacks.service
systemctl --root="$ROOTFS" mask systemd-binfmt.service
# debootstrap leaves the build host's name and resolver behind; Docker provides both at run time.
rm -f "$ROOTFS/etc/hostname" "$ROOTFS/etc/resolv.conf"
: > "$ROOTFS/etc/machine-id"

step "containerd's base runtime spec (kind's hook, no rlimits)"
"$BIN/ctr" oci spec \
  | chroot "$ROOTFS" jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}
      | del(.process.rlimits)' \
  > "$ROOTFS/etc/containerd/cri-base.json"

step "preloading images into the node's containerd"
# A unix socket path has at most 107 bytes, so the state (and socket) live in a short folder.
state=$(mktemp -d /tmp/kinformer-containerd.XXXXXX)
socket="$state/containerd.sock"
cat > "$WORK/containerd-import.toml" <<TOML
version = 3
root = "$ROOTFS/var/lib/containerd"
state = "$state"
# Only the content and metadata stores are needed to import; nothing runs here.
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$socket"
[ttrpc]
  address = "$socket.ttrpc"
TOML
"$BIN/containerd" --config "$WORK/containerd-import.toml" --log-level warn \
  > "$WORK/containerd-import.log" 2>&1 &
containerd_pid=$!
trap 'kill "$containerd_pid" 2>/dev/null || true; wait "$containerd_pid" 2>/dev/null || true; rm -rf "$state"' EXIT
for _ in $(seq 1 50); do
  [ -S "$socket" ] && break
  sleep 0.2
done
if ! "$BIN/ctr" --address "$socket" version > /dev/null; then
  echo "assemble: containerd did not come up; its log:" >&2
  cat "$WORK/containerd-import.log" >&2
  exit 1
fi
for image in "$IMAGES"/*.tar; do
  "$BIN/ctr" --address "$socket" --namespace k8s.io images import \
    --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack "$image"
done
"$BIN/ctr" --address "$socket" --namespace k8s.io images list -q | grep -v '^sha256:' >&2
kill "$containerd_pid"
wait "$containerd_pid" || true
trap - EXIT
rm -rf "$state"
step "done"
