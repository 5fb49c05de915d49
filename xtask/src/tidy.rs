//! Repository-wide rules, checked as ordinary tests so `cargo test --workspace` enforces them.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use crate::project_root;

/// Which of our crates each crate may depend on (normal and build dependencies), per the
/// dependency direction of docs/architecture.md. A crate missing here fails the check until it
/// is placed.
const LAYERS: &[(&str, &[&str])] = &[
    ("kinformer-wait", &[]),
    ("kinformer-protobuf", &[]),
    ("kinformer-store", &["kinformer-wait"]),
    ("kinformer-fifo", &["kinformer-wait", "kinformer-store"]),
    (
        "kinformer-reflector",
        &["kinformer-wait", "kinformer-protobuf", "kinformer-store"],
    ),
    (
        "kinformer-processor",
        &["kinformer-wait", "kinformer-store"],
    ),
    (
        "kinformer-informer",
        &[
            "kinformer-wait",
            "kinformer-protobuf",
            "kinformer-store",
            "kinformer-fifo",
            "kinformer-reflector",
            "kinformer-processor",
        ],
    ),
    (
        "kinformer-factory",
        &[
            "kinformer-wait",
            "kinformer-protobuf",
            "kinformer-store",
            "kinformer-fifo",
            "kinformer-reflector",
            "kinformer-processor",
            "kinformer-informer",
        ],
    ),
    ("kinformer-workqueue", &["kinformer-wait"]),
    (
        "kinformer-leaderelection",
        &[
            "kinformer-wait",
            "kinformer-store",
            "kinformer-processor",
            "kinformer-workqueue",
        ],
    ),
    (
        "kinformer-testing",
        &["kinformer-wait", "kinformer-protobuf", "kinformer-store"],
    ),
];

/// The ground floor: crates that depend on no other of ours. Any crate's tests and benches may
/// use them (the store's benches decode protobuf) without the crate itself depending on them.
const GROUND_FLOOR: &[&str] = &["kinformer-wait", "kinformer-protobuf"];

/// Crates that may depend on any layer: the umbrella and the workspace-level tests and tools
/// (the benchmark peers among them: they are run, never depended on; and the control plane,
/// which pins the Kubernetes minor it runs for xtask and the e2e suite).
const UNRESTRICTED: &[&str] = &[
    "kinformer",
    "kinformer-tests",
    "xtask",
    "kinformer-controlplane",
    "kinformer-bench-peers",
];

struct Manifest {
    path: PathBuf,
    name: String,
    /// Section name (e.g. `dependencies`) to the dependency names it lists.
    sections: BTreeMap<String, Vec<String>>,
    text: String,
}

fn manifests() -> Vec<Manifest> {
    let root = project_root();
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("crates/ exists")
        .map(|entry| entry.expect("readable crates/ entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.push(root.join("tests"));
    dirs.push(root.join("xtask"));
    dirs.push(root.join("xtask/controlplane"));
    dirs.push(root.join("xtask/peers/rust"));
    dirs.sort();
    dirs.iter()
        .map(|dir| parse_manifest(&dir.join("Cargo.toml")))
        .collect()
}

/// A deliberately small reader for the manifest shapes this repository uses: `[section]`
/// headers and `name = ...` / `name.workspace = true` entries.
fn parse_manifest(path: &Path) -> Manifest {
    let text = fs::read_to_string(path).expect("readable manifest");
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    let mut name = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = value.trim().trim_matches('"').to_owned();
        }
        let dep = key.split('.').next().unwrap_or(key).trim().to_owned();
        sections.entry(section.clone()).or_default().push(dep);
    }
    Manifest {
        path: path.to_owned(),
        name,
        sections,
        text,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let file_name = entry.file_name();
        if path.is_dir() {
            if file_name != "target" && file_name != ".git" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let root = project_root();
    let mut files = Vec::new();
    for dir in ["crates", "tests", "xtask"] {
        rust_files(&root.join(dir), &mut files);
    }
    files
}

#[test]
fn every_lib_rs_opens_with_crate_docs() {
    let root = project_root();
    let mut missing = Vec::new();
    for manifest in manifests() {
        let lib = manifest.path.with_file_name("src").join("lib.rs");
        let Ok(text) = fs::read_to_string(&lib) else {
            continue;
        };
        let first = text.lines().find(|line| !line.trim().is_empty());
        let documented = first.is_some_and(|line| line.starts_with("//!"));
        let example = text.contains("//! ```") || manifest.name == "kinformer-tests";
        if !documented || !example {
            missing.push(
                lib.strip_prefix(&root)
                    .unwrap_or(&lib)
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(
        missing.is_empty(),
        "these lib.rs files must open with `//!` crate docs that include an example: {missing:?}"
    );
}

#[test]
fn no_test_is_ignored_and_nothing_is_left_unimplemented() {
    // Spelled in pieces so this file does not trip its own check.
    let banned = [
        ["#[", "ignore"].concat(),
        ["todo", "!("].concat(),
        ["unimplemented", "!("].concat(),
    ];
    let root = project_root();
    let mut offenders = Vec::new();
    for file in all_rust_files() {
        let text = fs::read_to_string(&file).expect("readable source");
        for (number, line) in text.lines().enumerate() {
            if banned.iter().any(|pattern| line.contains(pattern.as_str())) {
                let shown = file.strip_prefix(&root).unwrap_or(&file).display();
                offenders.push(format!("{shown}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "ignored tests or unfinished code:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_crate_depends_on_a_layer_above_it() {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut violations = Vec::new();
    for manifest in manifests() {
        if UNRESTRICTED.contains(&manifest.name.as_str()) {
            continue;
        }
        let Some(allowed) = layers.get(manifest.name.as_str()) else {
            violations.push(format!(
                "{} is not placed in tidy.rs's LAYERS; add it per docs/architecture.md",
                manifest.name
            ));
            continue;
        };
        for (section, deps) in &manifest.sections {
            let is_dev = section.ends_with("dev-dependencies");
            if !section.ends_with("dependencies") {
                continue;
            }
            for dep in deps.iter().filter(|dep| dep.starts_with("kinformer")) {
                // Tests may use the fake API server and the ground floor.
                let ok = allowed.contains(&dep.as_str())
                    || (is_dev
                        && manifest.name != *dep
                        && (dep == "kinformer-testing" || GROUND_FLOOR.contains(&dep.as_str())));
                if !ok {
                    violations.push(format!("{} [{section}] -> {dep}", manifest.name));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "dependencies against docs/architecture.md's layering:\n{}",
        violations.join("\n")
    );
}

/// k8s-openapi's rule for libraries: the application picks the Kubernetes minor, so no library
/// turns on a `v1_*` feature where its users would inherit it (its own tests and benches may).
#[test]
fn no_library_picks_a_kubernetes_minor() {
    let mut offenders = Vec::new();
    let root = fs::read_to_string(project_root().join("Cargo.toml")).expect("root manifest");
    offenders.extend(
        root.lines()
            .filter(|line| line.trim_start().starts_with("k8s-openapi") && line.contains("v1_"))
            .map(|line| format!("Cargo.toml [workspace.dependencies]: {}", line.trim())),
    );
    for manifest in manifests() {
        if UNRESTRICTED.contains(&manifest.name.as_str()) {
            continue;
        }
        let mut section = "";
        for line in manifest.text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
                continue;
            }
            let normal = section == "[dependencies]" || section == "[build-dependencies]";
            let picks = (normal && line.starts_with("k8s-openapi") && line.contains("features"))
                || (section == "[features]" && line.contains("k8s-openapi/"));
            if picks {
                offenders.push(format!("{} {section}: {line}", manifest.name));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "libraries must leave the k8s-openapi version feature to the application:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn every_crate_inherits_workspace_lints_and_dependency_versions() {
    let mut problems = Vec::new();
    for manifest in manifests() {
        if !manifest.text.contains("[lints]\nworkspace = true") {
            problems.push(format!(
                "{}: missing `[lints] workspace = true`",
                manifest.name
            ));
        }
        let mut section = "";
        for line in manifest.text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
                continue;
            }
            let is_dep_section = section.ends_with("dependencies]");
            if is_dep_section && !line.is_empty() && !line.starts_with('#') {
                // A crate's dev-dependency on itself (to turn a feature on for its own tests)
                // has no version to take: cargo drops it when the crate is packaged.
                let on_itself = line.starts_with(&format!("{} = {{ path = \".\"", manifest.name));
                let pinned_here = !line.contains("workspace = true")
                    && !line.contains(".workspace")
                    && line.contains('=')
                    && !on_itself;
                if pinned_here {
                    problems.push(format!(
                        "{}: `{line}` must take its version from [workspace.dependencies]",
                        manifest.name
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Test code does not wait on the wall clock without saying why: every `sleep` in a test
/// carries its reason, in a comment on the line or on the line just above (pacing a producer,
/// a real-time threshold of the code under test, a deliberately slow handler, a paused clock).
/// Waiting for a condition goes through `eventually` / `wait_until`; "nothing else happened" is
/// shown with a barrier event, not a sleep.
#[test]
fn every_sleep_in_a_test_says_why() {
    let root = project_root();
    let mut offenders = Vec::new();
    for file in all_rust_files() {
        let relative = file.strip_prefix(&root).unwrap_or(&file);
        let in_tests = relative
            .components()
            .any(|part| part.as_os_str() == "tests");
        if !in_tests {
            continue;
        }
        let text = fs::read_to_string(&file).expect("readable source");
        let lines: Vec<&str> = text.lines().collect();
        for (number, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if !(code.contains("sleep(") || code.contains("sleep_until(")) {
                continue;
            }
            let commented_here = line.contains("// ");
            let commented_above = lines[..number]
                .iter()
                .rev()
                .find(|above| !above.trim().is_empty())
                .is_some_and(|above| {
                    let above = above.trim_start();
                    above.starts_with("// ") && !above.starts_with("///")
                });
            if !commented_here && !commented_above {
                offenders.push(format!(
                    "{}:{}: {}",
                    relative.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "sleeps in tests without a reason (say why on the line or just above, or wait for a \
         condition instead):\n{}",
        offenders.join("\n")
    );
}

/// The most lines a source file may have: past it, a module holds more than one idea and
/// should be split along them.
const MODULE_LINES: usize = 800;

/// Files longer than [`MODULE_LINES`] that wait for a split, with the length they may not
/// exceed meanwhile. The list only shrinks: split a file and remove its line.
const AWAITING_A_SPLIT: &[(&str, usize)] = &[
    // (path from the workspace root, the lines it may have until it is split)
];

#[test]
fn no_module_grows_past_its_limit() {
    let root = project_root();
    let mut offenders = Vec::new();
    let mut listed_but_short = Vec::new();
    for file in all_rust_files() {
        let relative = file.strip_prefix(&root).unwrap_or(&file);
        let name = relative.to_string_lossy().replace('\\', "/");
        // Generated tables are as long as the API they describe.
        if name.contains("/generated/") {
            continue;
        }
        let lines = fs::read_to_string(&file)
            .expect("readable source")
            .lines()
            .count();
        let allowed = AWAITING_A_SPLIT
            .iter()
            .find(|(listed, _)| *listed == name)
            .map(|(_, limit)| *limit);
        match allowed {
            Some(limit) if lines <= MODULE_LINES => {
                listed_but_short.push(format!("{name} ({lines} lines; limit {limit})"));
            }
            Some(limit) if lines > limit => {
                offenders.push(format!(
                    "{name}: {lines} lines, more than its {limit} while it waits for a split"
                ));
            }
            None if lines > MODULE_LINES => {
                offenders.push(format!("{name}: {lines} lines, more than {MODULE_LINES}"));
            }
            _ => {}
        }
    }
    assert!(
        offenders.is_empty(),
        "modules too long; split them along their ideas:\n{}",
        offenders.join("\n")
    );
    assert!(
        listed_but_short.is_empty(),
        "these files are short enough now; remove them from AWAITING_A_SPLIT:\n{}",
        listed_but_short.join("\n")
    );
}

/// What makes a test read the variables `.ci/run` sets for its JSON and compact-cache passes.
const READS_THE_CI_VARIABLES: &[&str] = &[
    "from_env()",
    "cache_from_env",
    "KINFORMER_WIRE_FORMAT",
    "KINFORMER_CACHE",
];

/// The modules a test file declares with `mod name;`, as the files or directories they are in.
fn declared_modules(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            line.strip_prefix("mod ")?.strip_suffix(';')
        })
        .flat_map(|name| [dir.join(format!("{name}.rs")), dir.join(name)])
        .filter(|path| path.exists())
        .collect()
}

fn reads_the_ci_variables(text: &str) -> bool {
    READS_THE_CI_VARIABLES
        .iter()
        .any(|needle| text.contains(needle))
}

/// The test target `file` is the root of, if any: `tests/NAME.rs` or `tests/NAME/main.rs` in a
/// workspace package (a crate under `crates/` or the workspace's `tests/` package), as Cargo
/// discovers them.
fn test_target(root: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root).ok()?;
    let parts: Vec<&str> = relative.iter().filter_map(|part| part.to_str()).collect();
    match parts.as_slice() {
        ["crates", _, "tests", file] | ["tests", "tests", file] => {
            Some(file.strip_suffix(".rs")?.to_owned())
        }
        ["crates", _, "tests", name, "main.rs"] | ["tests", "tests", name, "main.rs"] => {
            Some((*name).to_owned())
        }
        _ => None,
    }
}

#[test]
fn the_ci_passes_in_json_and_compact_caches_run_every_test_that_reads_them() {
    let root = project_root();
    let mut targets = Vec::new();
    for file in all_rust_files() {
        let Some(target) = test_target(&root, &file) else {
            continue;
        };
        // A target's sources: every file in its directory (`NAME/main.rs`), or the file and the
        // modules it declares (`NAME.rs`).
        let mut files = Vec::new();
        if file.ends_with("main.rs") {
            rust_files(file.parent().expect("tests/NAME/"), &mut files);
        } else {
            let text = fs::read_to_string(&file).expect("readable source");
            for module in declared_modules(&file, &text) {
                if module.is_dir() {
                    rust_files(&module, &mut files);
                } else {
                    files.push(module);
                }
            }
            files.push(file);
        }
        let sources = files.iter().filter_map(|f| fs::read_to_string(f).ok());
        if sources
            .into_iter()
            .any(|source| reads_the_ci_variables(&source))
        {
            targets.push(target);
        }
    }
    targets.sort();
    let listed = fs::read_to_string(root.join(".ci").join("env-suites")).expect(".ci/env-suites");
    let mut listed: Vec<String> = listed
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    listed.sort();
    assert_eq!(
        listed, targets,
        ".ci/env-suites must list exactly the test targets that read the CI variables"
    );
}
