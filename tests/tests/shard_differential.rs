//! kinformer-store's `Shard` against kube-apiserver v0.37.2's own shard selector code, on the
//! same inputs: `k8s.io/apiserver/pkg/sharding.Parse` (what the registry runs on a request's
//! `shardSelector` with the `ShardedListAndWatch` gate on) and the parsed selector's `String`
//! and `Matches`, in the `shard-peer` Go program (`xtask/peers/client-go`).
//!
//! Selectors are generated near the grammar (every field, quote and literal form CEL has,
//! bounds of every length and case, comments, parentheses, wrong operators and argument
//! counts) and mutated byte by byte. For each, both must accept or both refuse; when both
//! accept, `Shard`'s `Display` must be Go's `String` (what a list echoes) and, for random UIDs
//! and namespaces, `contains` must be Go's `Matches`.
//!
//! These tests fail, never skip, when Go is missing or the peer does not build.

use std::{
    path::Path,
    sync::{Mutex, MutexGuard, OnceLock},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_store::{Shard, ShardKey};
use kinformer_tests::GoPeer;
use serde_json::{Value, json};

fn go_peer() -> MutexGuard<'static, GoPeer> {
    static PEER: OnceLock<Mutex<GoPeer>> = OnceLock::new();
    GoPeer::shared(&PEER, "shard-peer", Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// xorshift64*: the same inputs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.below(choices.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// `value` as a bound, mostly in the canonical form, else in one of the forms a user (or a
/// mistake) writes; `None` is 2^64.
fn bound(rng: &mut Rng, value: Option<u64>) -> String {
    let canonical = value.map_or_else(|| "10000000000000000".to_owned(), |v| format!("{v:016x}"));
    let hex = if rng.chance(80) {
        canonical
    } else {
        let value = value.unwrap_or(u64::MAX);
        match rng.below(6) {
            0 => format!("{:x}", value >> rng.below(64)),
            1 => format!("{value:016X}"),
            2 => format!("{value:017x}"),
            3 => String::new(),
            4 => format!("{value:016x}g"),
            _ => "10000000000000000".to_owned(),
        }
    };
    let text = match rng.below(30) {
        0 => hex,
        1 => format!("0X{hex}"),
        _ => format!("0x{hex}"),
    };
    // Escapes that decode to the same text, in CEL's forms.
    let text = match rng.below(20) {
        0 => text.replacen('0', r"\x30", 1),
        1 => text.replacen('0', r"\060", 1),
        2 => text.replacen('x', r"\u0078", 1),
        3 => text.replacen('x', r"\U00000078", 1),
        _ => text,
    };
    match rng.below(24) {
        0 => format!("\"{text}\""),
        1 => format!("r'{text}'"),
        2 => format!("'''{text}'''"),
        3 => format!("b'{text}'"),
        4 => format!("R\"{text}\""),
        5 => format!("\"\"\"{text}\"\"\""),
        6 => text,
        7 => format!("'{text}"),
        _ => format!("'{text}'"),
    }
}

fn space(rng: &mut Rng) -> &'static str {
    rng.pick(&["", "", " ", "  ", "\n", "\t", " // note\n", "\r\n"])
}

fn call(rng: &mut Rng, field: &str) -> String {
    let name = if rng.chance(95) {
        "shardRange"
    } else {
        rng.pick(&["shardrange", "ShardRange", "hex", "shardRange.x"])
    };
    let (mut low, mut high) = (rng.next(), rng.next());
    if low > high && rng.chance(90) {
        std::mem::swap(&mut low, &mut high);
    }
    let high = (!rng.chance(15)).then_some(high);
    let mut arguments = vec![field.to_owned(), bound(rng, Some(low)), bound(rng, high)];
    match rng.below(30) {
        0 => {
            arguments.pop();
        }
        1 => arguments.push(bound(rng, None)),
        2 => arguments.swap(0, 1),
        _ => {}
    }
    let mut text = format!("{name}{}(", space(rng));
    for (i, argument) in arguments.iter().enumerate() {
        if i > 0 {
            text.push_str(rng.pick(&[",", ", ", " , ", ",\n"]));
        }
        text.push_str(space(rng));
        text.push_str(argument);
    }
    text.push_str(space(rng));
    if rng.chance(97) {
        text.push(')');
    }
    text
}

/// A selector near the grammar.
fn selector(rng: &mut Rng) -> String {
    let field = if rng.chance(85) {
        rng.pick(&["object.metadata.uid", "object.metadata.namespace"])
            .to_owned()
    } else {
        rng.pick(&[
            "object.metadata.name",
            "metadata.uid",
            "object . metadata . uid",
            "object.metadata.uid.x",
            "'object.metadata.uid'",
            "object.metadata.labels",
            "uid",
        ])
        .to_owned()
    };
    let terms = 1 + rng.below(3);
    let mut text = space(rng).to_owned();
    for i in 0..terms {
        if i > 0 {
            text.push_str(space(rng));
            text.push_str(if rng.chance(90) {
                "||"
            } else {
                rng.pick(&["&&", "|", "or", "|||"])
            });
            text.push_str(space(rng));
        }
        // Mostly one field for every range; sometimes another, which must be refused.
        let field = if rng.chance(95) {
            field.clone()
        } else {
            "object.metadata.namespace".to_owned()
        };
        let term = call(rng, &field);
        if rng.chance(10) {
            text.push_str(&format!("({term})"));
        } else {
            text.push_str(&term);
        }
    }
    if rng.chance(5) {
        text = format!("({text})");
    }
    text.push_str(space(rng));
    text
}

/// `text` with one byte changed, inserted or removed.
fn mutated(rng: &mut Rng, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let at = rng.below(bytes.len() + 1);
    let byte = *b"'\"()|&,.x0fFgr \\/\n".get(rng.below(18)).unwrap_or(&b' ');
    match rng.below(3) {
        0 if at < bytes.len() => bytes[at] = byte,
        1 if at < bytes.len() => {
            bytes.remove(at);
        }
        _ => bytes.insert(at, byte),
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn uid(rng: &mut Rng) -> String {
    let value = u128::from(rng.next()) << 64 | u128::from(rng.next());
    let text = format!("{value:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &text[..8],
        &text[8..12],
        &text[12..16],
        &text[16..20],
        &text[20..]
    )
}

fn meta(uid: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        uid: Some(uid.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

fn exchange(lines: &[Value]) -> Vec<Value> {
    let mut script: Vec<String> = lines.iter().map(Value::to_string).collect();
    script.push(json!({ "op": "end" }).to_string());
    let mut answers: Vec<Value> = go_peer()
        .exchange(&script)
        .expect("the peer answers")
        .iter()
        .map(|line| serde_json::from_str(line).expect("the peer writes JSON"))
        .collect();
    answers.pop();
    answers
}

#[test]
fn selectors_parse_print_and_match_as_kube_apiserver_does() {
    let mut rng = Rng(0x5eed_5a4d_0001);
    let mut selectors = Vec::new();
    while selectors.len() < 12_000 {
        let text = selector(&mut rng);
        selectors.push(if rng.chance(30) {
            mutated(&mut rng, &text)
        } else {
            text
        });
    }
    // Every valid form a shard of N prints, too.
    for count in 1..=12 {
        for index in 0..count {
            let shard = Shard::of(index, count).expect("a shard");
            selectors.push(shard.to_string());
            selectors.push(shard.keyed_by(ShardKey::Namespace).to_string());
        }
    }

    let parsed = exchange(
        &selectors
            .iter()
            .map(|selector| json!({ "op": "parse", "selector": selector }))
            .collect::<Vec<_>>(),
    );
    let mut accepted = Vec::new();
    let mut both_refused = 0;
    for (selector, go) in selectors.iter().zip(&parsed) {
        let ours = selector.parse::<Shard>();
        match (&ours, go.get("selector").and_then(Value::as_str)) {
            (Ok(shard), Some(printed)) => {
                assert_eq!(shard.to_string(), printed, "{selector:?} prints as Go's");
                accepted.push((selector, shard.clone()));
            }
            (Err(_), None) => both_refused += 1,
            (Ok(shard), None) => panic!("{selector:?}: accepted as {shard}, Go refuses: {go}"),
            (Err(error), Some(_)) => panic!("{selector:?}: refused ({error}), Go accepts: {go}"),
        }
    }
    assert!(accepted.len() > 1_200, "{} accepted", accepted.len());
    assert!(both_refused > 5_000, "{both_refused} refused");

    let mut probes = Vec::new();
    let mut lines = Vec::new();
    for (selector, shard) in &accepted {
        for _ in 0..4 {
            let (uid, namespace) = (
                uid(&mut rng),
                rng.pick(&["", "default", "kube-system", "team-a", "x"])
                    .to_owned(),
            );
            lines.push(
                json!({ "op": "match", "selector": selector, "uid": uid, "namespace": namespace }),
            );
            probes.push((shard, meta(&uid, &namespace)));
        }
    }
    let matched = exchange(&lines);
    let mut inside = 0;
    for ((shard, meta), go) in probes.iter().zip(&matched) {
        let go = go
            .get("matches")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| panic!("Go matched {shard}: {go}"));
        assert_eq!(
            shard.contains_fields(meta.uid.as_deref(), meta.namespace.as_deref()),
            go,
            "{shard} and {meta:?}"
        );
        inside += usize::from(go);
    }
    assert!(
        inside > 0 && inside < probes.len(),
        "{inside} of {} inside",
        probes.len()
    );
}
