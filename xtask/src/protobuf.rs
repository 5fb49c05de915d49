//! `cargo xtask protobuf-schema` and `cargo xtask protobuf-fixtures`: kinformer-store's protobuf
//! generated tables and its differential fixtures, both made by Go programs over client-go's own
//! types and serializers (xtask/peers/client-go/cmd/proto-schema and cmd/proto-fixtures).

use std::{fs, process::Command};

use crate::{project_root, run};

const GENERATED: &str = "crates/store/src/protobuf/generated.rs";
const FIXTURES: &str = "crates/store/tests/protobuf-fixtures";

fn go_in_peer(args: &[&str]) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(project_root().join("xtask/peers/client-go"))
        .env("GOTOOLCHAIN", "local")
        .args(args);
    command
}

/// Regenerates the tables; with `--check`, fails instead when the committed ones differ.
pub(crate) fn schema(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        other => return Err(format!("unexpected arguments {other:?}; try --check")),
    };
    let mut generate = go_in_peer(&["run", "./cmd/proto-schema"]);
    eprintln!("xtask: running {generate:?}");
    let output = generate
        .output()
        .map_err(|error| format!("could not start go: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "proto-schema failed with {}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let fresh = project_root().join("target/protobuf-generated.rs");
    fs::create_dir_all(project_root().join("target")).map_err(|error| error.to_string())?;
    fs::write(&fresh, &output.stdout).map_err(|error| error.to_string())?;
    let mut rustfmt = Command::new("rustfmt");
    rustfmt.args(["--edition", "2024"]).arg(&fresh);
    run(rustfmt)?;
    let target = project_root().join(GENERATED);
    let fresh_text = fs::read(&fresh).map_err(|error| error.to_string())?;
    if check {
        let committed = fs::read(&target).map_err(|error| error.to_string())?;
        return if committed == fresh_text {
            Ok(())
        } else {
            Err(format!(
                "{GENERATED} is stale; run `cargo xtask protobuf-schema`"
            ))
        };
    }
    fs::write(&target, fresh_text).map_err(|error| error.to_string())?;
    eprintln!("xtask: wrote {GENERATED}");
    Ok(())
}

/// Re-encodes every fixture with client-go's protobuf serializer.
pub(crate) fn fixtures() -> Result<(), String> {
    let dir = project_root().join(FIXTURES);
    let dir = dir.to_str().ok_or("the fixture path is not UTF-8")?;
    run(go_in_peer(&["run", "./cmd/proto-fixtures", dir]))
}
