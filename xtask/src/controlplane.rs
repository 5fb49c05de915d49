//! `cargo xtask control-plane up|down|env|build|restart-apiserver`: the commands of the
//! kinformer-controlplane crate (`xtask/controlplane`), which owns the real kube-apiserver and
//! etcd on loopback that `e2e --local`, `soak` and `bench` run against.

pub(crate) use kinformer_controlplane::{
    ApiServerOutage, ControlPlane, ETCD_VERSION, KUBERNETES_VERSION, Options, binary_dir,
    cache_root, ensure_binaries, kube_version_ldflags,
};

/// Runs `cargo xtask control-plane <up|down|env|build|restart-apiserver>`.
pub(crate) fn control_plane(flags: &crate::flags::ControlPlane) -> Result<(), String> {
    use kinformer_controlplane as plane;
    match flags.command.as_str() {
        "up" => plane::up(&flags.options.options()),
        "down" => plane::down(),
        "env" => plane::print_env(),
        "build" => ensure_binaries().map(|_| ()),
        "restart-apiserver" => plane::restart_apiserver(),
        other => Err(format!(
            "unknown control-plane command {other:?}; expected up, down, env, build or restart-apiserver"
        )),
    }
}
#[cfg(test)]
mod tests {
    use crate::flags::{self, Task};

    fn parse(args: &[&str]) -> Result<Task, String> {
        let args: Vec<String> = ["control-plane"]
            .iter()
            .chain(args)
            .map(|arg| (*arg).to_owned())
            .collect();
        flags::parse(&args).map_err(|err| err.to_string())
    }

    #[test]
    fn control_plane_flags_are_taken_and_the_rest_returned() {
        let Ok(Task::ControlPlane(flags)) = parse(&[
            "--no-watch-cache",
            "--etcd-compaction-interval",
            "10s",
            "up",
        ]) else {
            panic!("valid flags");
        };
        assert!(flags.options.no_watch_cache);
        assert_eq!(
            flags.options.etcd_compaction_interval.as_deref(),
            Some("10s")
        );
        assert_eq!(flags.command, "up");
    }

    #[test]
    fn a_compaction_interval_without_a_value_is_an_error() {
        assert!(parse(&["up", "--etcd-compaction-interval"]).is_err());
    }
}
