//! A seeded differential fuzz run: Go-encoded fixtures mutated (bits flipped, bytes set to
//! boundary values, truncated, bytes inserted and deleted, a stretch repeated), each decoded
//! by the generated decoder of its kind and by the serde path. Neither may panic, and where
//! either accepts an input both must, with equal values.

use std::{fmt::Debug, fs, path::PathBuf};

use k8s_openapi::api::{
    apps::v1::{Deployment, StatefulSet},
    batch::v1::CronJob,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Event, Node, Pod, Secret, Service},
    rbac::v1::Role,
};
use kinformer_protobuf::{DecodeOptions, Decoder, Envelope, Message};
use serde::de::DeserializeOwned;

use crate::mutation::{Rng, mutate, run_size};

/// What each path made of one input, compared.
#[derive(Default)]
struct Tally {
    inputs: usize,
    accepted: usize,
    divergences: Vec<String>,
}

fn run<T: DeserializeOwned + PartialEq + Debug + 'static>(
    name: &str,
    rng: &mut Rng,
    inputs: usize,
    tally: &mut Tally,
) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.pb"));
    let body = fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let envelope = Envelope::parse(&body).expect("the fixture has the k8s envelope");
    let message: &'static Message = envelope.message().expect("a table for the kind");
    let (generated, serde) = (Decoder::<T>::new(), Decoder::<T>::serde());
    assert!(generated.is_generated(), "{name}: a generated decoder");
    for _ in 0..inputs {
        let mut bytes = envelope.raw.to_vec();
        mutate(rng, &mut bytes);
        for options in [
            DecodeOptions::default(),
            DecodeOptions::default().drop_managed_fields(),
        ] {
            tally.inputs += 1;
            let fast = generated.decode(&bytes, message, options);
            let slow = serde.decode(&bytes, message, options);
            let diverged = match (&fast, &slow) {
                (Ok(fast), Ok(slow)) => {
                    tally.accepted += 1;
                    fast != slow
                }
                (Err(_), Err(_)) => false,
                _ => true,
            };
            if diverged && tally.divergences.len() < 10 {
                let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
                let said = |result: &Result<T, _>| match result {
                    Ok(_) => "accepted".to_owned(),
                    Err(error) => format!("{error}"),
                };
                let first_difference = match (&fast, &slow) {
                    (Ok(fast), Ok(slow)) => {
                        let (fast, slow) = (format!("{fast:#?}"), format!("{slow:#?}"));
                        fast.lines()
                            .zip(slow.lines())
                            .find(|(fast, slow)| fast != slow)
                            .map(|(fast, slow)| format!(" ({} / {})", fast.trim(), slow.trim()))
                            .unwrap_or_default()
                    }
                    _ => String::new(),
                };
                tally.divergences.push(format!(
                    "{name} ({options:?}): generated {}, serde {}{first_difference}: {hex}",
                    said(&fast),
                    said(&slow)
                ));
            }
        }
    }
}

/// The bounded run: a thousand inputs per fixture, twice each (with and without managedFields),
/// a second or two. A long run sets the count and the seed:
/// `KINFORMER_FUZZ_INPUTS=1000000 KINFORMER_FUZZ_SEED=7 cargo test --release -p
/// kinformer-protobuf --test protobuf fuzz`.
#[test]
fn mutated_objects_decode_alike_through_both_paths() {
    let (per_kind, mut rng) = run_size();
    let mut tally = Tally::default();
    run::<Pod>("pod", &mut rng, per_kind, &mut tally);
    run::<Pod>("pod-minimal", &mut rng, per_kind, &mut tally);
    run::<Deployment>("deployment", &mut rng, per_kind, &mut tally);
    run::<StatefulSet>("statefulset", &mut rng, per_kind, &mut tally);
    run::<Node>("node", &mut rng, per_kind, &mut tally);
    run::<Service>("service", &mut rng, per_kind, &mut tally);
    run::<ConfigMap>("configmap", &mut rng, per_kind, &mut tally);
    run::<Secret>("secret", &mut rng, per_kind, &mut tally);
    run::<Event>("event", &mut rng, per_kind, &mut tally);
    run::<CronJob>("cronjob", &mut rng, per_kind, &mut tally);
    run::<Lease>("lease", &mut rng, per_kind, &mut tally);
    run::<Role>("role", &mut rng, per_kind, &mut tally);
    assert!(
        tally.accepted * 20 > tally.inputs,
        "most mutations should leave a decodable object: {} of {}",
        tally.accepted,
        tally.inputs
    );
    assert!(
        tally.divergences.is_empty(),
        "of {} inputs ({} accepted), these diverged:\n{}",
        tally.inputs,
        tally.accepted,
        tally.divergences.join("\n")
    );
}
