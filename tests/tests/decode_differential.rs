//! kinformer's protobuf decoders against client-go v0.37.2's, on the same mutated inputs.
//!
//! Go-encoded fixtures of several kinds are mutated as kinformer-protobuf's own fuzz test
//! mutates them (the same module, compiled into this binary) and decoded three ways: by the
//! generated decoder of the kind, by the serde path, and by client-go's protobuf decoder in the
//! `decode-peer` Go program (`xtask/peers/client-go`), which writes what it decoded as Go's
//! JSON encoder does. Where Go accepts an input kinformer must accept it and hold the same
//! object, compared as JSON; where Go refuses it kinformer must refuse it.
//!
//! The JSON comparison leaves out what the two encoders write differently for the same object
//! and no decoder decides: nulls, zero values (Go writes them for every field not marked
//! `omitempty`, which k8s-openapi leaves out when absent; Go tells a zero from an absent value
//! only for pointer fields, which this comparison therefore cannot check; the zero of a
//! `Quantity` that is no pointer, `resourceFieldRef.divisor`, is `"0"`), empty lists and
//! objects, and the type of the outermost object, which client-go's decoder strips.
//!
//! These tests fail, never skip, when Go is missing or the peer does not build.

#[path = "../../crates/protobuf/tests/protobuf/mutation.rs"]
mod mutation;

use std::{fmt::Debug, fs, path::Path};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Node, Pod, Service},
};
use kinformer::protobuf::{DecodeOptions, Decoder, Envelope, encode_envelope, encode_object};
use kinformer_tests::GoPeer;
use mutation::{Rng, mutate, run_size};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Inputs sent to the peer in one exchange.
const BATCH: usize = 250;

/// `value` without what the two JSON encoders write differently for one object.
fn normalized(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(text) if text.is_empty() => None,
        Value::Bool(false) => None,
        Value::Number(number) if number.as_f64() == Some(0.0) => None,
        Value::Array(items) => {
            let items: Vec<Value> = items
                .into_iter()
                .map(|item| normalized(item).unwrap_or(Value::Null))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(fields) => {
            let fields: serde_json::Map<String, Value> = fields
                .into_iter()
                // Go writes an absent `divisor`, a `Quantity` that is no pointer, as its zero.
                .filter(|(key, value)| !(key == "divisor" && value == "0"))
                .filter_map(|(key, value)| Some((key, normalized(value)?)))
                .collect();
            (!fields.is_empty()).then_some(Value::Object(fields))
        }
        other => Some(other),
    }
}

fn outermost(value: Value) -> Option<Value> {
    match value {
        Value::Object(mut fields) => {
            fields.remove("apiVersion");
            fields.remove("kind");
            normalized(Value::Object(fields))
        }
        other => normalized(other),
    }
}

/// What one decoder made of one input: the object as normalized JSON, or why it refused.
type Outcome = Result<Option<Value>, String>;

fn ours<T: DeserializeOwned + Serialize + PartialEq + Debug + 'static>(
    decoder: &Decoder<T>,
    raw: &[u8],
    envelope: &Envelope<'_>,
) -> Outcome {
    let message = envelope.message().map_err(|error| error.to_string())?;
    let object = decoder
        .decode(raw, message, DecodeOptions::default())
        .map_err(|error| error.to_string())?;
    let json = serde_json::to_value(&object).map_err(|error| format!("to JSON: {error}"))?;
    Ok(outermost(json))
}

fn go(answer: &str) -> Outcome {
    let answer: Value =
        serde_json::from_str(answer).unwrap_or_else(|error| panic!("{answer:?}: {error}"));
    match (answer.get("object"), answer.get("error")) {
        (Some(object), _) => Ok(outermost(object.clone())),
        (None, Some(error)) => Err(error.as_str().unwrap_or_default().to_owned()),
        _ => panic!("the peer answered neither an object nor an error: {answer}"),
    }
}

/// Where `ours` and `go` first differ, as a path and the two values.
fn first_difference(path: &str, ours: &Value, go: &Value) -> Option<String> {
    match (ours, go) {
        (Value::Object(ours), Value::Object(go)) => {
            let keys: std::collections::BTreeSet<&String> = ours.keys().chain(go.keys()).collect();
            keys.into_iter().find_map(|key| {
                let path = format!("{path}.{key}");
                match (ours.get(key), go.get(key)) {
                    (Some(one), Some(other)) => first_difference(&path, one, other),
                    (one, other) => Some(format!("{path}: {one:?} / {other:?}")),
                }
            })
        }
        (Value::Array(ours), Value::Array(go)) if ours.len() == go.len() => ours
            .iter()
            .zip(go)
            .enumerate()
            .find_map(|(at, (one, other))| first_difference(&format!("{path}[{at}]"), one, other)),
        (ours, go) => (ours != go).then(|| format!("{path}: {ours} / {go}")),
    }
}

/// Whether kinformer and Go disagree: one accepts what the other refuses, or both accept and
/// hold different objects.
fn diverge(ours: &Outcome, go: &Outcome) -> bool {
    match (ours, go) {
        (Ok(ours), Ok(go)) => ours != go,
        (Err(_), Err(_)) => false,
        _ => true,
    }
}

/// The body of kinformer-protobuf's fixture `name`: a Go-encoded object in its envelope.
fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../crates/protobuf/tests/fixtures/{name}.pb"));
    fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// What a metadata informer receives for the Pod fixture: its metadata as a
/// `meta.k8s.io/v1` `PartialObjectMetadata`, whose message is the Pod's first field alone.
fn partial_object_metadata() -> Vec<u8> {
    let body = fixture("pod");
    let pod = Envelope::parse(&body).expect("the fixture has the k8s envelope");
    assert_eq!(
        pod.raw[0], 0x0a,
        "the Pod's message starts with its metadata"
    );
    let (mut len, mut at) = (0usize, 1);
    while pod.raw[at] >= 0x80 {
        len |= usize::from(pod.raw[at] & 0x7f) << (7 * (at - 1));
        at += 1;
    }
    len |= usize::from(pod.raw[at]) << (7 * (at - 1));
    encode_envelope(
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &pod.raw[..at + 1 + len],
    )
}

/// A metadata informer's object, as kube's `PartialObjectMeta` holds it.
#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
struct PartialObjectMetadata {
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// Decodes `inputs` mutations of the fixture `name` (its `body`) through kinformer's two
/// paths and Go's, returning how many Go accepted and each divergence, described. `scheme` is
/// `"meta"` for a body Go's metadata client decodes.
fn differ<T: DeserializeOwned + Serialize + PartialEq + Debug + 'static>(
    peer: &mut GoPeer,
    (name, body, scheme): (&str, &[u8], &str),
    rng: &mut Rng,
    inputs: usize,
) -> (usize, Vec<String>) {
    let fixture = Envelope::parse(body).expect("the fixture has the k8s envelope");
    let (generated, serde) = (Decoder::<T>::new(), Decoder::<T>::serde());
    let (mut accepted, mut divergences) = (0, Vec::new());
    let mut left = inputs;
    while left > 0 {
        let batch: Vec<Vec<u8>> = (0..BATCH.min(left))
            .map(|_| {
                let mut raw = fixture.raw.to_vec();
                mutate(rng, &mut raw);
                raw
            })
            .collect();
        left -= batch.len();
        let mut lines: Vec<String> = batch
            .iter()
            .map(|raw| {
                let body = encode_envelope(fixture.api_version, fixture.kind, raw);
                let hex: String = body.iter().map(|byte| format!("{byte:02x}")).collect();
                format!(r#"{{"op":"decode","body":"{hex}","scheme":"{scheme}"}}"#)
            })
            .collect();
        lines.push(r#"{"op":"end"}"#.to_owned());
        let answers = peer
            .exchange(&lines)
            .unwrap_or_else(|error| panic!("the decode peer: {error}"));
        for (raw, answer) in batch.iter().zip(&answers) {
            let go = go(answer);
            let generated = ours(&generated, raw, &fixture);
            let serde = ours(&serde, raw, &fixture);
            accepted += usize::from(go.is_ok());
            // The two paths agree with each other (kinformer-protobuf's fuzz test); either
            // one's disagreement with Go is a divergence.
            if !diverge(&generated, &go) && !diverge(&serde, &go) {
                continue;
            }
            let hex: String = raw.iter().map(|byte| format!("{byte:02x}")).collect();
            let said = |outcome: &Outcome| match outcome {
                Ok(value) => format!(
                    "accepted {}",
                    serde_json::to_string(value).unwrap_or_default()
                ),
                Err(error) => format!("refused ({error})"),
            };
            let first = match (&generated, &go) {
                (Ok(Some(ours)), Ok(Some(go))) => {
                    first_difference("", ours, go).unwrap_or_default()
                }
                _ => String::new(),
            };
            divergences.push(format!(
                "{name} {hex}\n  first difference (ours / Go): {first}\n  go: {}\n  generated: {}\n  serde: {}",
                said(&go),
                said(&generated),
                said(&serde)
            ));
        }
    }
    assert!(accepted > 0, "{name}: Go accepted none of the inputs");
    (accepted, divergences)
}

/// A thousand inputs per fixture, a metadata informer's `PartialObjectMetadata` among them;
/// `KINFORMER_FUZZ_INPUTS` and `KINFORMER_FUZZ_SEED` make it a
/// long run, as for kinformer-protobuf's fuzz test. Any divergence fails the test.
#[test]
fn mutated_objects_decode_as_client_go_decodes_them() {
    let mut peer = GoPeer::start("decode-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
        .unwrap_or_else(|error| panic!("the client-go peer is required for this test: {error}"));
    let (per_kind, mut rng) = run_size();
    let mut all = Vec::new();
    let mut accepted = 0;
    let named = |name: &'static str| (name, fixture(name));
    let [pod, minimal, deployment, node, service, configmap] = [
        "pod",
        "pod-minimal",
        "deployment",
        "node",
        "service",
        "configmap",
    ]
    .map(named);
    let metadata = partial_object_metadata();
    for (found_accepted, divergences) in [
        differ::<Pod>(&mut peer, (pod.0, &pod.1, ""), &mut rng, per_kind),
        differ::<Pod>(&mut peer, (minimal.0, &minimal.1, ""), &mut rng, per_kind),
        differ::<Deployment>(
            &mut peer,
            (deployment.0, &deployment.1, ""),
            &mut rng,
            per_kind,
        ),
        differ::<Node>(&mut peer, (node.0, &node.1, ""), &mut rng, per_kind),
        differ::<Service>(&mut peer, (service.0, &service.1, ""), &mut rng, per_kind),
        differ::<ConfigMap>(
            &mut peer,
            (configmap.0, &configmap.1, ""),
            &mut rng,
            per_kind,
        ),
        differ::<PartialObjectMetadata>(
            &mut peer,
            ("partial-object-metadata", &metadata, "meta"),
            &mut rng,
            per_kind,
        ),
    ] {
        accepted += found_accepted;
        all.extend(divergences);
    }
    assert!(accepted > 0, "Go accepted none of the inputs");
    report(&format!(
        "{} inputs, {accepted} accepted by Go, {} divergences",
        per_kind * 7,
        all.len()
    ));
    assert!(
        all.is_empty(),
        "{} inputs decoded otherwise than Go decodes them; the first:\n{}",
        all.len(),
        all[..all.len().min(8)].join("\n")
    );
}

/// A quantity's text: mostly in its grammar (a sign, digits and points, a suffix or an
/// exponent), sometimes with a byte outside it, sometimes long enough to leave Go's `int64`
/// fast path. Exponents stay small: Go's `inf.Dec` takes minutes over one of a few billion.
fn quantity_text(rng: &mut Rng) -> String {
    const SIGNS: &[&str] = &["", "", "", "+", "-"];
    const NUMBERS: &[&str] = &[
        "",
        "0",
        "00",
        "1",
        "5",
        "8",
        "9",
        "10",
        "24",
        "128",
        "1000",
        "999999999",
        "9223372036854775807",
        "12345678901234567890",
        ".",
        ".",
        "..",
    ];
    const SUFFIXES: &[&str] = &[
        "", "", "e", "E", "i", "n", "u", "m", "k", "K", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti",
        "Pi", "Ei", "e3", "e-3", "E+9", "e-12", "e21", "e-", "ki", "-",
    ];
    const ENDS: &[&str] = &["", "", "", "", "1", ".", " ", "x", "\u{e9}", "i"];
    let mut text = SIGNS[rng.below(SIGNS.len())].to_owned();
    for _ in 0..1 + rng.below(3) {
        text.push_str(NUMBERS[rng.below(NUMBERS.len())]);
    }
    text.push_str(SUFFIXES[rng.below(SUFFIXES.len())]);
    text.push_str(ENDS[rng.below(ENDS.len())]);
    text
}

/// Quantity texts read as apimachinery's `ParseQuantity` reads them and written back as its
/// `Quantity.String` writes them: each text is a Pod's CPU limit, decoded by kinformer's two
/// paths and by client-go. `KINFORMER_FUZZ_INPUTS` sets how many texts (times six).
#[test]
fn quantities_decode_as_client_go_decodes_them() {
    let mut peer = GoPeer::start("decode-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
        .unwrap_or_else(|error| panic!("the client-go peer is required for this test: {error}"));
    let (per_kind, mut rng) = run_size();
    let texts: Vec<String> = (0..per_kind * 6).map(|_| quantity_text(&mut rng)).collect();
    let (generated, serde) = (Decoder::<Pod>::new(), Decoder::<Pod>::serde());
    let (mut accepted, mut diverged) = (0, Vec::new());
    for batch in texts.chunks(BATCH) {
        let bodies: Vec<Vec<u8>> = batch
            .iter()
            .map(|text| {
                let pod = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "q"},
                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": text}}}]},
                });
                encode_object(&pod).expect("a Pod with any CPU text encodes")
            })
            .collect();
        let mut lines: Vec<String> = bodies
            .iter()
            .map(|body| {
                let hex: String = body.iter().map(|byte| format!("{byte:02x}")).collect();
                format!(r#"{{"op":"decode","body":"{hex}"}}"#)
            })
            .collect();
        lines.push(r#"{"op":"end"}"#.to_owned());
        let answers = peer
            .exchange(&lines)
            .unwrap_or_else(|error| panic!("the decode peer: {error}"));
        for ((text, body), answer) in batch.iter().zip(&bodies).zip(&answers) {
            let envelope = Envelope::parse(body).expect("an envelope we wrote");
            let go = go(answer);
            accepted += usize::from(go.is_ok());
            for (path, ours) in [
                ("generated", ours(&generated, envelope.raw, &envelope)),
                ("serde", ours(&serde, envelope.raw, &envelope)),
            ] {
                if diverge(&ours, &go) {
                    diverged.push(format!("{text:?} ({path}): ours {ours:?}, Go {go:?}"));
                }
            }
        }
    }
    report(&format!(
        "{} quantity texts, {accepted} accepted by Go, {} divergences",
        texts.len(),
        diverged.len()
    ));
    assert!(
        accepted > 0 && accepted < texts.len(),
        "the texts must include good and bad ones"
    );
    assert!(
        diverged.is_empty(),
        "{} quantity texts read otherwise than Go reads them; the first:\n{}",
        diverged.len(),
        diverged[..diverged.len().min(8)].join("\n")
    );
}

#[allow(
    clippy::print_stderr,
    reason = "the run's counts go where libtest shows them with --nocapture"
)]
fn report(summary: &str) {
    eprintln!("{summary}");
}
