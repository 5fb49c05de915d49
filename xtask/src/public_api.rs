//! `cargo xtask public-api`: every library's public API, one item a line, in
//! `docs/public-api/<crate>.txt`, so that a change to the surface shows in review; `--check`
//! rebuilds the listings and fails on any difference (CI runs it). Beside it, `docs-rs`
//! documents each library alone as docs.rs would, with warnings denied.
//!
//! The listings come from rustdoc's JSON output (unstable, so the build sets
//! `RUSTC_BOOTSTRAP=1`), with each library documented alone and the features its
//! `[package.metadata.docs.rs]` names, as docs.rs builds it. What a line holds:
//!
//! - every public module, struct, enum, union, trait, function, constant, static, type alias
//!   and macro, under the path a user writes (the shortest, when re-exports give several);
//! - a struct's public fields, an enum's variants, a trait's items, a type's inherent methods
//!   and the traits it implements (auto traits and blanket impls left out: they follow from
//!   the rest);
//! - functions with their parameters and return type, generics without their bounds (a
//!   bound's change shows at the item, not in full);
//! - a re-export of another crate's item as `pub use path = source`.
//!
//! rust-analyzer's codegen tests and the cargo-public-api project show the pattern: a generated
//! file checked by regenerating it. cargo-public-api itself is not used: it pins the rustdoc
//! JSON format to its own release and so to one nightly, where this reads whatever format the
//! workspace's toolchain writes through `serde_json::Value`.

use std::{
    collections::{BTreeSet, HashSet, VecDeque},
    fs,
    path::PathBuf,
};

use serde_json::Value;

use crate::{cargo, project_root, run};

/// Writes every library's listing, or with `check` compares them with the committed ones.
pub(crate) fn public_api(check: bool) -> Result<(), String> {
    let dir = project_root().join("docs/public-api");
    let mut differ = Vec::new();
    let mut total = 0;
    for (package, features) in libraries()? {
        let listing = listing_of(&package, &features)?;
        let lines = listing.lines().filter(|line| !line.starts_with('#'));
        let impls = lines
            .clone()
            .filter(|line| line.starts_with("impl "))
            .count();
        let items = lines.count() - impls;
        total += items;
        println!("{package}: {items} public items, {impls} trait impls");
        let path = dir.join(format!("{package}.txt"));
        if check {
            let committed = fs::read_to_string(&path).unwrap_or_default();
            if committed != listing {
                differ.push(describe_difference(&package, &committed, &listing));
            }
        } else {
            fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
            fs::write(&path, &listing).map_err(|error| format!("{}: {error}", path.display()))?;
        }
    }
    println!("all libraries: {total} public items (trait impls aside)");
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the public API differs from docs/public-api (run `cargo xtask public-api` and \
             commit the listings if the change is meant):\n{}",
            differ.join("\n")
        ))
    }
}

/// Documents every library alone, as docs.rs builds it (the features its
/// `[package.metadata.docs.rs]` names, nothing else picking a Kubernetes minor), with warnings
/// denied.
pub(crate) fn docs_rs() -> Result<(), String> {
    for (package, features) in libraries()? {
        let mut doc = cargo();
        doc.args(["doc", "--no-deps", "--locked", "-p", &package])
            .env("RUSTDOCFLAGS", "-D warnings");
        if !features.is_empty() {
            doc.args(["--features", &features.join(",")]);
        }
        run(doc)?;
    }
    Ok(())
}

/// What changed in one crate's listing: the lines removed and added.
fn describe_difference(package: &str, committed: &str, listing: &str) -> String {
    let old: BTreeSet<&str> = committed.lines().collect();
    let new: BTreeSet<&str> = listing.lines().collect();
    let mut out = format!("{package}:");
    for line in old.difference(&new) {
        out.push_str(&format!("\n  - {line}"));
    }
    for line in new.difference(&old) {
        out.push_str(&format!("\n  + {line}"));
    }
    out
}

/// The libraries under `crates/`, each with the features docs.rs builds it with.
fn libraries() -> Result<Vec<(String, Vec<String>)>, String> {
    let output = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1", "--locked"])
        .output()
        .map_err(|error| format!("cargo metadata: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("cargo metadata's output: {error}"))?;
    let crates = project_root().join("crates");
    let mut libraries = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        if manifest.parent().and_then(|dir| dir.parent()) != Some(crates.as_path()) {
            continue;
        }
        let features = package["metadata"]["docs"]["rs"]["features"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|feature| feature.as_str().map(str::to_owned))
            .collect();
        libraries.push((
            package["name"].as_str().unwrap_or_default().to_owned(),
            features,
        ));
    }
    libraries.sort();
    Ok(libraries)
}

/// The listing of `package`, from rustdoc's JSON of it.
fn listing_of(package: &str, features: &[String]) -> Result<String, String> {
    // A target directory of its own: RUSTC_BOOTSTRAP is part of every build's fingerprint, so
    // in the workspace's it would rebuild everything there, twice per run.
    let target = project_root().join("target/public-api");
    let mut doc = cargo();
    doc.args(["doc", "--no-deps", "--locked", "-p", package])
        .arg("--target-dir")
        .arg(&target)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json");
    if !features.is_empty() {
        doc.args(["--features", &features.join(",")]);
    }
    run(doc)?;
    let crate_name = package.replace('-', "_");
    let path = target.join(format!("doc/{crate_name}.json"));
    let text = fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    let lines = Listing::new(&json).lines(&crate_name);
    let mut out = format!(
        "# The public API of {package}, written by `cargo xtask public-api`: do not edit.\n"
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// rustdoc's index of one crate, walked from its root.
struct Listing<'a> {
    index: &'a serde_json::Map<String, Value>,
    root: String,
}

impl<'a> Listing<'a> {
    fn new(json: &'a Value) -> Self {
        static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        Self {
            index: json["index"]
                .as_object()
                .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new)),
            root: id_of(&json["root"]),
        }
    }

    fn item(&self, id: &str) -> Option<&'a Value> {
        self.index.get(id)
    }

    /// Every line, sorted. Items are reached breadth first, so each is listed once, under the
    /// shortest path that reaches it.
    fn lines(&self, crate_name: &str) -> BTreeSet<String> {
        let mut lines = BTreeSet::new();
        let mut listed = HashSet::new();
        let mut queue = VecDeque::from([(self.root.clone(), crate_name.to_owned())]);
        while let Some((id, path)) = queue.pop_front() {
            let Some(item) = self.item(&id) else { continue };
            let Some((kind, inner)) = inner_of(item) else {
                continue;
            };
            if kind != "use" && !listed.insert(id.clone()) {
                continue;
            }
            match kind {
                "module" => {
                    if id != self.root {
                        lines.insert(format!("pub mod {path}"));
                    }
                    self.enqueue_children(inner, &path, &mut queue);
                }
                "use" => {
                    let target = id_of(&inner["id"]);
                    let glob = inner["is_glob"].as_bool().unwrap_or(false);
                    let name = inner["name"].as_str().unwrap_or_default();
                    match self.item(&target).and_then(inner_of) {
                        // A glob's module's items join this one.
                        Some((_, module)) if glob => {
                            self.enqueue_children(module, &path, &mut queue);
                        }
                        Some(_) => queue.push_back((target, format!("{path}::{name}"))),
                        None => {
                            let source = inner["source"].as_str().unwrap_or_default();
                            let star = if glob { "::*" } else { "" };
                            lines.insert(format!("pub use {path}::{name}{star} = {source}"));
                        }
                    }
                }
                _ => self.item_lines(kind, inner, item, &path, &mut lines),
            }
        }
        lines
    }

    /// Queues the public items of `module` under `path`; a re-export keeps the module's path,
    /// and is named by what it brings in.
    fn enqueue_children(&self, module: &Value, path: &str, queue: &mut VecDeque<(String, String)>) {
        for child in module["items"].as_array().into_iter().flatten() {
            let child = id_of(child);
            let Some(item) = self.item(&child).filter(|item| is_public(item)) else {
                continue;
            };
            let child_path = match item["name"].as_str() {
                Some(name) if inner_of(item).map(|(kind, _)| kind) != Some("use") => {
                    format!("{path}::{name}")
                }
                _ => path.to_owned(),
            };
            queue.push_back((child, child_path));
        }
    }

    fn item_lines(
        &self,
        kind: &str,
        inner: &Value,
        item: &Value,
        path: &str,
        lines: &mut BTreeSet<String>,
    ) {
        let generics = generic_names(&inner["generics"]);
        match kind {
            "struct" | "union" => {
                lines.insert(format!("pub {kind} {path}{generics}"));
                let fields = &inner["kind"];
                for field in fields["plain"]["fields"]
                    .as_array()
                    .into_iter()
                    .chain(fields["tuple"].as_array())
                    .chain(inner["fields"].as_array())
                    .flatten()
                {
                    if let Some(field) = self.item(&id_of(field))
                        && is_public(field)
                    {
                        let name = field["name"].as_str().unwrap_or_default();
                        let ty = render(&field["inner"]["struct_field"]);
                        lines.insert(format!("pub field {path}.{name}: {ty}"));
                    }
                }
                self.impl_lines(inner, path, lines);
            }
            "enum" => {
                lines.insert(format!("pub enum {path}{generics}"));
                for variant in inner["variants"].as_array().into_iter().flatten() {
                    if let Some(variant) = self.item(&id_of(variant)) {
                        let name = variant["name"].as_str().unwrap_or_default();
                        let shape = self.variant_shape(&variant["inner"]["variant"]["kind"]);
                        lines.insert(format!("pub variant {path}::{name}{shape}"));
                    }
                }
                self.impl_lines(inner, path, lines);
            }
            "trait" => {
                lines.insert(format!("pub trait {path}{generics}"));
                for member in inner["items"].as_array().into_iter().flatten() {
                    if let Some(member) = self.item(&id_of(member)) {
                        self.member_line(member, path, lines);
                    }
                }
            }
            "function" => {
                lines.insert(format!("pub {}", function(path, inner)));
            }
            "constant" => {
                let ty = render(&inner["type"]);
                lines.insert(format!("pub const {path}: {ty}"));
            }
            "static" => {
                let ty = render(&inner["type"]);
                lines.insert(format!("pub static {path}: {ty}"));
            }
            "type_alias" => {
                let ty = render(&inner["type"]);
                lines.insert(format!("pub type {path}{generics} = {ty}"));
            }
            "macro" | "proc_macro" => {
                lines.insert(format!("pub macro {path}!"));
            }
            other => {
                let name = item["name"].as_str().unwrap_or_default();
                lines.insert(format!("pub {other} {path} ({name})"));
            }
        }
    }

    /// `(T, U)` for a tuple variant, `{ a: T }` for a struct variant, nothing for a unit one.
    fn variant_shape(&self, kind: &Value) -> String {
        let field = |id: &Value| {
            self.item(&id_of(id)).map(|field| {
                (
                    field["name"].as_str().unwrap_or(""),
                    &field["inner"]["struct_field"],
                )
            })
        };
        if let Some(fields) = kind["tuple"].as_array() {
            let types: Vec<String> = fields
                .iter()
                .map(|id| field(id).map_or_else(|| "_".to_owned(), |(_, ty)| render(ty)))
                .collect();
            return format!("({})", types.join(", "));
        }
        if let Some(fields) = kind["struct"]["fields"].as_array() {
            let named: Vec<String> = fields
                .iter()
                .filter_map(field)
                .map(|(name, ty)| format!("{name}: {}", render(ty)))
                .collect();
            return format!(" {{ {} }}", named.join(", "));
        }
        String::new()
    }

    /// A type's inherent methods and the traits it implements.
    fn impl_lines(&self, inner: &Value, path: &str, lines: &mut BTreeSet<String>) {
        for id in inner["impls"].as_array().into_iter().flatten() {
            let Some(block) = self.item(&id_of(id)) else {
                continue;
            };
            let block = &block["inner"]["impl"];
            if block["is_synthetic"].as_bool() == Some(true) || !block["blanket_impl"].is_null() {
                continue;
            }
            // The compiler's marker for a derived `PartialEq`, not a trait a user names.
            if block["trait"]["path"].as_str() == Some("StructuralPartialEq") {
                continue;
            }
            if let Some(name) = block["trait"]["path"].as_str() {
                let args = args(&block["trait"]["args"]);
                let negative = if block["is_negative"].as_bool() == Some(true) {
                    "!"
                } else {
                    ""
                };
                lines.insert(format!("impl {negative}{name}{args} for {path}"));
                continue;
            }
            for member in block["items"].as_array().into_iter().flatten() {
                if let Some(member) = self.item(&id_of(member))
                    && is_public(member)
                {
                    self.member_line(member, path, lines);
                }
            }
        }
    }

    /// A method, associated constant or associated type of `path`.
    fn member_line(&self, member: &Value, path: &str, lines: &mut BTreeSet<String>) {
        let name = member["name"].as_str().unwrap_or_default();
        let Some((kind, inner)) = inner_of(member) else {
            return;
        };
        match kind {
            "function" => {
                lines.insert(format!(
                    "pub {}",
                    function(&format!("{path}::{name}"), inner)
                ));
            }
            "assoc_const" => {
                lines.insert(format!(
                    "pub const {path}::{name}: {}",
                    render(&inner["type"])
                ));
            }
            "assoc_type" => {
                lines.insert(format!("pub type {path}::{name}"));
            }
            _ => {}
        }
    }
}

/// `fn path<T>(a: A, b: B) -> R`, with `async`, `const` and `unsafe` as declared.
fn function(path: &str, inner: &Value) -> String {
    let header = &inner["header"];
    let mut out = String::new();
    for (flag, word) in [
        ("is_const", "const "),
        ("is_async", "async "),
        ("is_unsafe", "unsafe "),
    ] {
        if header[flag].as_bool() == Some(true) {
            out.push_str(word);
        }
    }
    let params: Vec<String> = inner["sig"]["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|input| {
            let name = input[0].as_str().unwrap_or("_");
            let ty = &input[1];
            if name == "self" {
                match ty {
                    Value::Object(map) if map.contains_key("borrowed_ref") => {
                        let reference = &ty["borrowed_ref"];
                        if reference["is_mutable"].as_bool() == Some(true) {
                            "&mut self".to_owned()
                        } else {
                            "&self".to_owned()
                        }
                    }
                    _ if ty["generic"].as_str() == Some("Self") => "self".to_owned(),
                    other => format!("self: {}", render(other)),
                }
            } else {
                format!("{name}: {}", render(ty))
            }
        })
        .collect();
    out.push_str(&format!(
        "fn {path}{}({})",
        generic_names(&inner["generics"]),
        params.join(", ")
    ));
    let output = &inner["sig"]["output"];
    if !output.is_null() {
        out.push_str(&format!(" -> {}", render(output)));
    }
    out
}

/// `<T, U>` from a generics block: the parameters a caller names or infers, lifetimes and
/// `impl Trait` parameters left out.
fn generic_names(generics: &Value) -> String {
    let names: Vec<&str> = generics["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|param| {
            param["kind"]["type"].is_object()
                && param["kind"]["type"]["is_synthetic"].as_bool() != Some(true)
                || param["kind"]["const"].is_object()
        })
        .filter_map(|param| param["name"].as_str())
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!("<{}>", names.join(", "))
    }
}

/// A type as Rust spells it, near enough to read a change in it.
fn render(ty: &Value) -> String {
    let Some((kind, inner)) = ty.as_object().and_then(|map| map.iter().next()) else {
        return "_".to_owned();
    };
    match kind.as_str() {
        "resolved_path" => {
            let path = inner["path"].as_str().unwrap_or("_");
            format!("{path}{}", args(&inner["args"]))
        }
        "generic" | "primitive" => inner.as_str().unwrap_or("_").to_owned(),
        "borrowed_ref" => {
            let lifetime = inner["lifetime"]
                .as_str()
                .map(|lifetime| format!("{lifetime} "))
                .unwrap_or_default();
            let mutable = if inner["is_mutable"].as_bool() == Some(true) {
                "mut "
            } else {
                ""
            };
            format!("&{lifetime}{mutable}{}", render(&inner["type"]))
        }
        "raw_pointer" => {
            let mutable = if inner["is_mutable"].as_bool() == Some(true) {
                "mut"
            } else {
                "const"
            };
            format!("*{mutable} {}", render(&inner["type"]))
        }
        "tuple" => {
            let parts: Vec<String> = inner.as_array().into_iter().flatten().map(render).collect();
            format!("({})", parts.join(", "))
        }
        "slice" => format!("[{}]", render(inner)),
        "array" => format!(
            "[{}; {}]",
            render(&inner["type"]),
            inner["len"].as_str().unwrap_or("_")
        ),
        "impl_trait" => format!("impl {}", bounds(inner)),
        "dyn_trait" => {
            let traits: Vec<String> = inner["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|bound| {
                    let path = bound["trait"]["path"].as_str().unwrap_or("_");
                    format!("{path}{}", args(&bound["trait"]["args"]))
                })
                .collect();
            format!("dyn {}", traits.join(" + "))
        }
        "qualified_path" => {
            let (self_type, name) = (render(&inner["self_type"]), inner["name"].as_str());
            match inner["trait"]["path"]
                .as_str()
                .filter(|path| !path.is_empty())
            {
                Some(path) => format!("<{self_type} as {path}>::{}", name.unwrap_or("_")),
                None => format!("{self_type}::{}", name.unwrap_or("_")),
            }
        }
        "function_pointer" => {
            let params: Vec<String> = inner["sig"]["inputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|input| render(&input[1]))
                .collect();
            let output = &inner["sig"]["output"];
            let output = if output.is_null() {
                String::new()
            } else {
                format!(" -> {}", render(output))
            };
            format!("fn({}){output}", params.join(", "))
        }
        "infer" => "_".to_owned(),
        _ => "_".to_owned(),
    }
}

/// `<A, B>` or `(A) -> B` of a path's generic arguments.
fn args(args: &Value) -> String {
    if let Some(angle) = args["angle_bracketed"].as_object() {
        let mut parts: Vec<String> = angle
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|arg| {
                if let Some(ty) = arg.get("type") {
                    Some(render(ty))
                } else if let Some(lifetime) = arg.get("lifetime") {
                    lifetime.as_str().map(str::to_owned)
                } else {
                    arg.get("const").map(|_| "_".to_owned())
                }
            })
            .collect();
        for constraint in angle
            .get("constraints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = constraint["name"].as_str().unwrap_or("_");
            let binding = &constraint["binding"];
            if let Some(ty) = binding.get("equality").and_then(|term| term.get("type")) {
                parts.push(format!("{name} = {}", render(ty)));
            } else if let Some(bound) = binding.get("constraint") {
                parts.push(format!("{name}: {}", bounds(bound)));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("<{}>", parts.join(", "))
        }
    } else if let Some(parenthesized) = args["parenthesized"].as_object() {
        let inputs: Vec<String> = parenthesized
            .get("inputs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(render)
            .collect();
        let output = parenthesized
            .get("output")
            .filter(|output| !output.is_null())
            .map(|output| format!(" -> {}", render(output)))
            .unwrap_or_default();
        format!("({}){output}", inputs.join(", "))
    } else {
        String::new()
    }
}

/// `A + B` of a list of bounds.
fn bounds(list: &Value) -> String {
    let parts: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|bound| {
            if let Some(trait_bound) = bound.get("trait_bound") {
                let path = trait_bound["trait"]["path"].as_str().unwrap_or("_");
                Some(format!("{path}{}", args(&trait_bound["trait"]["args"])))
            } else {
                bound
                    .get("outlives")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
        })
        .collect();
    parts.join(" + ")
}

fn is_public(item: &Value) -> bool {
    item["visibility"].as_str() == Some("public")
}

/// An item's kind and the description under it.
fn inner_of(item: &Value) -> Option<(&str, &Value)> {
    item["inner"]
        .as_object()
        .and_then(|inner| inner.iter().next())
        .map(|(kind, value)| (kind.as_str(), value))
}

/// An id as the index's keys spell it.
fn id_of(id: &Value) -> String {
    match id {
        Value::Number(number) => number.to_string(),
        Value::String(text) => text.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_function_reads_with_its_parameters_and_result() {
        let inner = json!({
            "sig": {
                "inputs": [
                    ["self", { "borrowed_ref": { "lifetime": null, "is_mutable": false, "type": { "generic": "Self" } } }],
                    ["timeout", { "resolved_path": { "path": "Duration", "id": 1, "args": null } }],
                ],
                "output": { "resolved_path": { "path": "Option", "id": 2, "args": { "angle_bracketed": { "args": [{ "type": { "primitive": "u64" } }], "constraints": [] } } } },
            },
            "generics": { "params": [], "where_predicates": [] },
            "header": { "is_const": false, "is_unsafe": false, "is_async": true, "abi": "Rust" },
        });
        assert_eq!(
            function("wait", &inner),
            "async fn wait(&self, timeout: Duration) -> Option<u64>"
        );
    }

    #[test]
    fn items_are_listed_once_under_their_shortest_path_and_foreign_reexports_by_source() {
        let index = json!({
            "root": 0,
            "index": {
                "0": { "name": "demo", "visibility": "public", "inner": { "module": { "items": [1, 2, 4] } } },
                "1": { "name": null, "visibility": "public", "inner": { "use": { "source": "inner::Thing", "name": "Thing", "id": 3, "is_glob": false } } },
                "2": { "name": "inner", "visibility": "public", "inner": { "module": { "items": [3] } } },
                "3": { "name": "Thing", "visibility": "public", "inner": { "struct": { "kind": { "plain": { "fields": [] } }, "generics": { "params": [] }, "impls": [] } } },
                "4": { "name": null, "visibility": "public", "inner": { "use": { "source": "other::Elsewhere", "name": "Elsewhere", "id": 99, "is_glob": false } } },
            },
        });
        let lines: Vec<String> = Listing::new(&index).lines("demo").into_iter().collect();
        assert_eq!(
            lines,
            [
                "pub mod demo::inner",
                "pub struct demo::Thing",
                "pub use demo::Elsewhere = other::Elsewhere",
            ]
        );
    }
}
