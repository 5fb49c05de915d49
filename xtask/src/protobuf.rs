//! `cargo xtask protobuf-schema` and `cargo xtask protobuf-fixtures`: kinformer-protobuf's
//! generated tables and its differential fixtures, both made by Go programs over client-go's own
//! types and serializers (xtask/peers/client-go/cmd/proto-schema and cmd/proto-fixtures).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    process::Command,
};

use crate::{project_root, run};

mod decoders;

const GENERATED: &str = "crates/protobuf/src/generated";
const FIXTURES: &str = "crates/protobuf/tests/fixtures";

fn go_in_peer(args: &[&str]) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(project_root().join("xtask/peers/client-go"))
        .env("GOTOOLCHAIN", "local")
        .args(args);
    command
}

/// Regenerates the tables; with `--check`, fails instead when the committed ones differ. With
/// `--from FILE`, splits a saved run of the generator instead of running Go.
pub(crate) fn schema(check: bool, from: Option<String>) -> Result<(), String> {
    let fresh = project_root().join("target/protobuf-generated.rs");
    fs::create_dir_all(project_root().join("target")).map_err(|error| error.to_string())?;
    match from {
        Some(file) => {
            fs::copy(&file, &fresh).map_err(|error| format!("{file}: {error}"))?;
        }
        None => {
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
            fs::write(&fresh, &output.stdout).map_err(|error| error.to_string())?;
        }
    }
    let mut rustfmt = Command::new("rustfmt");
    rustfmt.args(["--edition", "2024"]).arg(&fresh);
    run(rustfmt)?;
    let fresh_text = fs::read_to_string(&fresh).map_err(|error| error.to_string())?;
    let files = split_by_group(&fresh_text)?;
    sync_dir(GENERATED, &files, check)?;
    if check {
        return decoders::generate(true);
    }
    eprintln!("xtask: wrote {} files under {GENERATED}", files.len());
    decoders::generate(false)
}

/// Writes `files` (name to text) into `dir` under the project root, removing the `.rs` files
/// it no longer has; with `check`, fails instead when what is there differs.
fn sync_dir(dir: &str, files: &BTreeMap<String, String>, check: bool) -> Result<(), String> {
    let path = project_root().join(dir);
    let committed: BTreeSet<String> = fs::read_dir(&path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| name.ends_with(".rs"))
                .collect()
        })
        .unwrap_or_default();
    if check {
        let stale = files.keys().cloned().collect::<BTreeSet<_>>() != committed
            || files.iter().any(|(name, text)| {
                fs::read_to_string(path.join(name)).ok().as_ref() != Some(text)
            });
        return if stale {
            Err(format!("{dir} is stale; run `cargo xtask protobuf-schema`"))
        } else {
            Ok(())
        };
    }
    fs::create_dir_all(&path).map_err(|error| error.to_string())?;
    for name in committed.iter().filter(|name| !files.contains_key(*name)) {
        fs::remove_file(path.join(name)).map_err(|error| error.to_string())?;
    }
    for (name, text) in files {
        fs::write(path.join(name), text).map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Splits the generator's one file into a module per API group (`core.rs`, `apps.rs`, `meta.rs`
/// for apimachinery's meta/v1) and a `mod.rs` that declares them, re-exports every table and
/// keeps the kind index.
///
/// Each table follows a `/// k8s.io/...` doc line naming its Go type, which names the group.
/// The tables refer to each other across groups; every group module imports the others through
/// `mod.rs`'s re-exports.
fn split_by_group(text: &str) -> Result<BTreeMap<String, String>, String> {
    const IMPORT: &str = "use crate::schema::{Field, Message, Shape, Ty};";
    let mut lines = text.lines().peekable();
    let header = lines.next().ok_or("the generator wrote nothing")?;
    if !header.starts_with("//! @generated") {
        return Err(format!("unexpected first line {header:?}"));
    }
    let mut groups: BTreeMap<String, String> = BTreeMap::new();
    let mut index = String::new();
    let mut current: Option<String> = None;
    for line in lines {
        if line == IMPORT {
            continue;
        }
        if let Some(path) = line.strip_prefix("/// k8s.io/") {
            current = Some(group_of(path)?);
        } else if line.starts_with("/// Every kind") {
            current = None;
        }
        match &current {
            Some(group) => {
                let body = groups.entry(group.clone()).or_default();
                body.push_str(line);
                body.push('\n');
            }
            None => {
                index.push_str(line);
                index.push('\n');
            }
        }
    }
    let mut files = BTreeMap::new();
    let mut module =
        format!("{header}\n//!\n//! One module per API group; the kind index is here.\n\n");
    for group in groups.keys() {
        module.push_str(&format!("mod {group};\n"));
    }
    module.push('\n');
    for group in groups.keys() {
        // `self::` keeps `core` from meaning the core library.
        module.push_str(&format!("pub use self::{group}::*;\n"));
    }
    module.push_str("\nuse crate::schema::Message;\n");
    module.push('\n');
    module.push_str(index.trim_matches('\n'));
    module.push('\n');
    files.insert("mod.rs".to_owned(), module);
    for (group, body) in &groups {
        // Only a group that names another group's tables imports them.
        let defined: BTreeSet<&str> = body
            .lines()
            .filter_map(|line| line.strip_prefix("pub static "))
            .filter_map(|rest| rest.split(':').next())
            .collect();
        let foreign = referenced_tables(body)
            .iter()
            .any(|name| !defined.contains(name));
        let imports = if foreign {
            format!("use super::*;\n{IMPORT}")
        } else {
            IMPORT.to_owned()
        };
        let text = format!("{header}\n\n{imports}\n\n{}\n", body.trim_matches('\n'));
        files.insert(format!("{group}.rs"), text);
    }
    Ok(files)
}

/// The tables a body refers to: every `&NAME` with an upper-case name.
fn referenced_tables(body: &str) -> BTreeSet<&str> {
    body.match_indices('&')
        .filter_map(|(at, _)| {
            let rest = &body[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            (end > 0).then(|| &rest[..end])
        })
        .collect()
}

/// `api/apps/v1.Deployment` is `apps`; apimachinery's `pkg/apis/meta/v1.Status` is `meta`.
fn group_of(path: &str) -> Result<String, String> {
    let package = path.split('.').next().unwrap_or(path);
    let parts: Vec<&str> = package.split('/').collect();
    match parts.as_slice() {
        ["api", group, _version] => Ok((*group).to_owned()),
        ["apimachinery", "pkg", "apis", group, _version] => Ok((*group).to_owned()),
        _ => Err(format!("cannot tell the API group of {path:?}")),
    }
}

/// Re-encodes every fixture with client-go's protobuf serializer, and copies k8s.io/api's own
/// compatibility fixtures (every kind with every field filled, in JSON and in Go's protobuf).
pub(crate) fn fixtures() -> Result<(), String> {
    let dir = project_root().join(FIXTURES);
    let dir_text = dir.to_str().ok_or("the fixture path is not UTF-8")?;
    run(go_in_peer(&["run", "./cmd/proto-fixtures", dir_text]))?;
    let output = go_in_peer(&["list", "-m", "-f", "{{.Dir}}", "k8s.io/api"])
        .output()
        .map_err(|error| format!("could not start go: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "go list k8s.io/api failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let module = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let source = std::path::Path::new(&module).join("testdata/HEAD");
    let target = dir.join("api");
    let _ = fs::remove_dir_all(&target);
    fs::create_dir_all(&target).map_err(|error| error.to_string())?;
    let mut copied = 0;
    for entry in fs::read_dir(&source).map_err(|error| format!("{}: {error}", source.display()))? {
        let path = entry.map_err(|error| error.to_string())?.path();
        if path
            .extension()
            .is_some_and(|ext| ext == "json" || ext == "pb")
        {
            let name = path.file_name().ok_or("a fixture without a name")?;
            fs::copy(&path, target.join(name)).map_err(|error| error.to_string())?;
            copied += 1;
        }
    }
    eprintln!("xtask: copied {copied} fixtures from {}", source.display());
    Ok(())
}
