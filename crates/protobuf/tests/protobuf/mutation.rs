//! Mutations of valid messages, the same on every run of a seed: what the decoding fuzz tests
//! (here, and against Go in kinformer-tests' `decode_differential`) feed the decoders, and how
//! large a run is.

/// splitmix64: a seeded sequence, the same on every run.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// One to four mutations of `bytes`: bits flipped, bytes set to boundary values, a truncation,
/// bytes inserted or deleted, a stretch copied elsewhere (fields that appear twice, or out of
/// their run).
pub(crate) fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len());
        match rng.below(7) {
            0 if !bytes.is_empty() => bytes[at] ^= 1 << rng.below(8),
            1 if !bytes.is_empty() => {
                bytes[at] = [0x00, 0x01, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            2 => bytes.truncate(at),
            3 => bytes.insert(at, rng.next() as u8),
            4 if !bytes.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(bytes.len());
                bytes.drain(at..end);
            }
            // A stretch copied elsewhere: fields that appear twice, or out of their run.
            _ => {
                let len = rng.below(24).min(bytes.len() - at);
                let stretch = bytes[at..at + len].to_vec();
                let to = rng.below(bytes.len());
                bytes.splice(to..to, stretch);
            }
        }
    }
}

/// How many inputs per fixture a run makes and the seed of its mutations:
/// `KINFORMER_FUZZ_INPUTS` (a thousand unless set) and `KINFORMER_FUZZ_SEED`.
pub(crate) fn run_size() -> (usize, Rng) {
    let from_env = |name: &str, default: u64| {
        std::env::var(name).map_or(default, |value| {
            value
                .parse()
                .unwrap_or_else(|_| panic!("{name}={value:?} is not a number"))
        })
    };
    let inputs = usize::try_from(from_env("KINFORMER_FUZZ_INPUTS", 1_000)).unwrap_or(usize::MAX);
    (
        inputs,
        Rng(from_env("KINFORMER_FUZZ_SEED", 0x6b69_6e66_6f72_6d65)),
    )
}
