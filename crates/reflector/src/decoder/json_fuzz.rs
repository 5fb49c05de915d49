//! A seeded differential fuzz run of the JSON watch path: lines in the API server's shape,
//! mutated (bits flipped, bytes set to boundary values, truncated, bytes inserted and deleted,
//! a stretch repeated), each decoded by `JsonDecoder` (its one-pass splitter and, with the
//! `simd-json` feature, simd-json) and by plain serde_json. Neither may panic, and they must
//! accept and refuse the same lines, with equal events.

use std::{fmt::Debug, fs, path::PathBuf};

use crate::{Decoder, ExpectedType, Framing, JsonDecoder, WatchEvent};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Node, Pod, Service},
};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::value::RawValue;

#[path = "../../../protobuf/tests/protobuf/mutation.rs"]
mod mutation;

use mutation::{Rng, mutate, run_size};

/// A watch line as serde_json reads it, with nothing else in between.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct TypeFields {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// What serde_json makes of `line`: an added, modified or deleted object of the expected kind
/// (`apiVersion` and `kind` as client-go checks them: absent, or equal), or `None`.
fn by_serde_json<T: DeserializeOwned>(line: &[u8], expected: &ExpectedType) -> Option<(String, T)> {
    let line: Line<'_> = serde_json::from_slice(line).ok()?;
    if !matches!(line.event_type.as_str(), "ADDED" | "MODIFIED" | "DELETED") {
        return None;
    }
    let types: TypeFields = serde_json::from_str(line.object.get()).ok()?;
    if types.kind.as_ref().is_some_and(|kind| {
        *kind != expected.kind
            || types
                .api_version
                .as_ref()
                .is_some_and(|version| *version != expected.api_version)
    }) {
        return None;
    }
    let object = serde_json::from_str(line.object.get()).ok()?;
    Some((line.event_type, object))
}

fn by_kinformer<T>(decoder: &JsonDecoder<T>, line: &[u8]) -> Option<(String, T)>
where
    T: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (event_type, object) = match decoder.decode_event(line, Framing::Lines).ok()? {
        WatchEvent::Added(object) => ("ADDED", object.into_parts().0),
        WatchEvent::Modified(object) => ("MODIFIED", object.into_parts().0),
        WatchEvent::Deleted(object) => ("DELETED", object),
        _ => return None,
    };
    Some((event_type.to_owned(), (*object).clone()))
}

/// What the two made of a run's lines: how many both accepted, and each divergence.
#[derive(Default)]
struct Tally {
    inputs: usize,
    accepted: usize,
    divergences: Vec<String>,
}

fn run<T>(
    name: &str,
    api_version: &str,
    kind: &str,
    rng: &mut Rng,
    inputs: usize,
    tally: &mut Tally,
) where
    T: DeserializeOwned + Clone + PartialEq + Debug + Send + Sync + 'static,
{
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../protobuf/tests/fixtures/{name}.json"));
    let text =
        fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let object: serde_json::Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let expected = ExpectedType::new(api_version, kind);
    let decoder = JsonDecoder::<T>::new(Some(expected.clone()));
    for input in 0..inputs {
        let event_type = ["ADDED", "MODIFIED", "DELETED"][input % 3];
        let mut line =
            serde_json::to_vec(&serde_json::json!({ "type": event_type, "object": object }))
                .expect("encodes");
        mutate(rng, &mut line);
        let ours = by_kinformer(&decoder, &line);
        let theirs = by_serde_json::<T>(&line, &expected);
        tally.inputs += 1;
        tally.accepted += usize::from(ours.is_some() && ours == theirs);
        if ours != theirs && tally.divergences.len() < 10 {
            let said = |result: &Option<(String, T)>| match result {
                Some((event_type, _)) => format!("accepted as {event_type}"),
                None => "refused".to_owned(),
            };
            tally.divergences.push(format!(
                "{name}: kinformer {}, serde_json {}: {}",
                said(&ours),
                said(&theirs),
                String::from_utf8_lossy(&line)
            ));
        }
    }
}

/// The bounded run: a thousand lines per fixture. A long run sets the count and the seed:
/// `KINFORMER_FUZZ_INPUTS=1000000 KINFORMER_FUZZ_SEED=7 cargo test --release -p
/// kinformer-reflector --lib json_fuzz`.
#[test]
fn mutated_watch_lines_decode_as_serde_json_decodes_them() {
    let (per_kind, mut rng) = run_size();
    let mut tally = Tally::default();
    run::<Pod>("pod", "v1", "Pod", &mut rng, per_kind, &mut tally);
    run::<Pod>("pod-minimal", "v1", "Pod", &mut rng, per_kind, &mut tally);
    run::<Deployment>(
        "deployment",
        "apps/v1",
        "Deployment",
        &mut rng,
        per_kind,
        &mut tally,
    );
    run::<Node>("node", "v1", "Node", &mut rng, per_kind, &mut tally);
    run::<Service>("service", "v1", "Service", &mut rng, per_kind, &mut tally);
    run::<ConfigMap>(
        "configmap",
        "v1",
        "ConfigMap",
        &mut rng,
        per_kind,
        &mut tally,
    );
    assert!(
        tally.accepted * 20 > tally.inputs,
        "many mutations should leave a decodable line: {} of {}",
        tally.accepted,
        tally.inputs
    );
    assert!(
        tally.divergences.is_empty(),
        "of {} lines ({} accepted), these diverged:\n{}",
        tally.inputs,
        tally.accepted,
        tally.divergences.join("\n")
    );
}
