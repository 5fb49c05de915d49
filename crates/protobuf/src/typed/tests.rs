//! The generated decoders against the serde path and JSON, on k8s.io/api's own fixtures: every
//! kind with every field filled, in JSON and in Go's protobuf (copied by
//! `cargo xtask protobuf-fixtures` into `tests/fixtures/api`).

use std::{fmt::Debug, fs, path::PathBuf};

use serde::{Serialize, de::DeserializeOwned};

use super::{Decoder, generated};
use crate::{DecodeOptions, Envelope, encode_message, to_message};

/// Decodes `protobuf` with the generated decoder and the serde path, with and without
/// managedFields, and `json`; all must agree. And what was decoded survives the round trip a
/// compact cache makes: its serde (JSON) form encoded by the tables, then decoded again.
pub(super) fn check<T>(protobuf: &[u8], json: &[u8]) -> Result<(), String>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
{
    let generated = Decoder::<T>::new();
    if !generated.is_generated() {
        return Err("no generated decoder is registered".to_owned());
    }
    let envelope = Envelope::parse(protobuf).map_err(|error| error.to_string())?;
    // k8s-openapi refuses a few of these in JSON (a required time that Go wrote as `null`).
    let from_json: Option<T> = serde_json::from_slice(json).ok();
    for options in [
        DecodeOptions::default(),
        DecodeOptions::default().drop_managed_fields(),
    ] {
        let fast = generated
            .decode_envelope(&envelope, options)
            .map_err(|error| format!("generated ({options:?}): {error}"))?;
        round_trip(&generated, &envelope, &fast)?;
        let serde = match Decoder::<T>::serde().decode_envelope(&envelope, options) {
            Ok(serde) => serde,
            // A required time Go left zero: the serde path (like k8s-openapi on JSON) refuses
            // the object; the generated decoder keeps it with Go's zero time, as client-go does.
            Err(error) if error.to_string().contains("expected a timestamp string") => continue,
            Err(error) => return Err(format!("serde ({options:?}): {error}")),
        };
        if fast != serde {
            return Err(format!(
                "generated and serde differ ({options:?}):\n{fast:#?}\n{serde:#?}"
            ));
        }
        if options == DecodeOptions::default()
            && let Some(from_json) = &from_json
            && fast != *from_json
        {
            return Err(format!(
                "generated and JSON differ:\n{fast:#?}\n{from_json:#?}"
            ));
        }
    }
    Ok(())
}

/// `value` encoded from its serde form by `envelope`'s message table and decoded again.
fn round_trip<T>(decoder: &Decoder<T>, envelope: &Envelope<'_>, value: &T) -> Result<(), String>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
{
    let message = envelope.message().map_err(|error| error.to_string())?;
    let json = serde_json::to_value(value).map_err(|error| format!("to JSON: {error}"))?;
    let bytes = encode_message(&json, message).map_err(|error| format!("encode: {error}"))?;
    let direct = to_message(value, message).map_err(|error| format!("to_message: {error}"))?;
    let again_direct = decoder
        .decode(&direct, message, DecodeOptions::default())
        .map_err(|error| format!("decode of what to_message wrote: {error}"))?;
    if again_direct != *value {
        return Err(format!(
            "to_message changed the object:\n{again_direct:#?}\n{value:#?}"
        ));
    }
    let again = decoder
        .decode(&bytes, message, DecodeOptions::default())
        .map_err(|error| format!("decode of the re-encoded object: {error}"))?;
    if again != *value {
        return Err(format!(
            "the round trip changed the object:\n{again:#?}\n{value:#?}"
        ));
    }
    Ok(())
}

#[test]
fn generated_decoders_agree_with_serde_and_json_on_every_kind_k8s_io_api_fills() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/api");
    let mut names: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("the k8s.io/api fixtures")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "pb"))
        .collect();
    names.sort();
    let (mut compared, mut failures, mut uncovered) = (Vec::new(), Vec::new(), Vec::new());
    for pb in &names {
        let protobuf = fs::read(pb).expect("a fixture");
        let json = fs::read(pb.with_extension("json")).expect("its JSON");
        let head: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
        let api_version = head["apiVersion"].as_str().unwrap_or_default();
        let kind = head["kind"].as_str().unwrap_or_default();
        let name = pb.file_name().unwrap_or_default().to_string_lossy().into_owned();
        match generated::differential(api_version, kind, &protobuf, &json) {
            Some(Ok(())) => compared.push(name),
            // k8s-openapi keeps `apiVersion` and `kind` of `DeleteOptions` as fields, which its
            // protobuf form (like every message) leaves to the envelope: both protobuf paths
            // leave them out, and they alone differ from JSON.
            Some(Err(error))
                if kind == "DeleteOptions" && error.starts_with("generated and JSON differ") =>
            {
                compared.push(name);
            }
            Some(Err(error)) => failures.push(format!("{name}: {error}")),
            None => uncovered.push(name),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every kind k8s-openapi has a struct for is covered; the rest are kinds it leaves out.
    assert!(
        compared.len() >= 100,
        "only {} kinds compared; not covered: {uncovered:?}",
        compared.len()
    );
    for core in ["core.v1.Pod.pb", "apps.v1.Deployment.pb", "core.v1.ConfigMap.pb"] {
        assert!(compared.iter().any(|name| name == core), "{core} was not compared");
    }
}

#[test]
fn every_repeated_field_is_allocated_at_its_length() {
    use k8s_openapi::api::core::v1::Pod;

    /// A list's length and capacity; (0, 0) when absent.
    fn shape<T>(list: Option<&Vec<T>>) -> (usize, usize) {
        list.map_or((0, 0), |list| (list.len(), list.capacity()))
    }

    let json = include_bytes!("../../tests/fixtures/pod.json");
    let value: serde_json::Value = serde_json::from_slice(json).expect("the fixture");
    let protobuf = crate::encode_object(&value).expect("encodes");
    let envelope = Envelope::parse(&protobuf).expect("an envelope");
    let pod: Pod = Decoder::<Pod>::new()
        .decode_envelope(&envelope, DecodeOptions::default())
        .expect("decodes");
    let spec = pod.spec.as_ref().expect("a spec");
    let status = pod.status.as_ref().expect("a status");
    let container = &spec.containers[0];
    let lists = [
        ("containers", shape(Some(&spec.containers))),
        ("env", shape(container.env.as_ref())),
        ("volumes", shape(spec.volumes.as_ref())),
        ("tolerations", shape(spec.tolerations.as_ref())),
        ("volumeMounts", shape(container.volume_mounts.as_ref())),
        ("conditions", shape(status.conditions.as_ref())),
        ("containerStatuses", shape(status.container_statuses.as_ref())),
        ("managedFields", shape(pod.metadata.managed_fields.as_ref())),
    ];
    for (name, (len, capacity)) in lists {
        assert!(len > 1, "the fixture has several {name}");
        assert_eq!(capacity, len, "{name}: {len} elements in {capacity} slots");
    }
}

#[test]
fn repeated_elements_split_over_several_runs_are_all_kept_in_order() {
    use k8s_openapi::api::core::v1::PodSpec;

    use crate::wire::Writer;

    // PodSpec: volumes = 1, containers = 2; both hold their name in field 1. Go writes each
    // list in one run; another encoder may interleave them.
    let named = |field: u32, name: &str, message: &mut Writer| {
        message.message_field(field, |element| {
            element.bytes_field(1, name.as_bytes());
            Ok::<_, ()>(())
        })
    };
    let mut message = Writer::default();
    for (field, name) in [(1, "v1"), (2, "c1"), (2, "c2"), (1, "v2"), (1, "v3"), (2, "c3")] {
        named(field, name, &mut message).expect("writes");
    }
    let mut spec = PodSpec::default();
    super::rt::merge(&mut spec, &message.buf, &DecodeOptions::default()).expect("decodes");
    let containers: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(containers, ["c1", "c2", "c3"]);
    assert_eq!(volumes, ["v1", "v2", "v3"]);
}
