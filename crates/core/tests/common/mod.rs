//! Helpers shared by sprig-core's integration tests: seeded randomness that prints its seed and
//! replays from `SPRIG_TEST_SEED`, generators of key sets with long shared prefixes (so tries get
//! deep), and small facts about the reference model that several tests check against.
//!
//! Every test file includes this module but uses only part of it.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig_core::{Hasher, KeyPath, Lookup, ReferenceModel, ValueHash};

/// The environment variable that fixes the seed of every randomized test.
pub const SEED_VAR: &str = "SPRIG_TEST_SEED";

/// The seed of a randomized test: `SPRIG_TEST_SEED` if set (decimal or `0x` hex), else a fresh
/// one. Printed so that a failure can be replayed (`cargo test` shows it with the failure).
pub fn seed(test: &str) -> u64 {
    let seed = match std::env::var(SEED_VAR) {
        Ok(text) => parse_seed(&text)
            .unwrap_or_else(|| panic!("{SEED_VAR}={text:?} is not a decimal or 0x-hex u64")),
        Err(_) => fresh_seed(),
    };
    println!("{test}: seed {seed} (replay with {SEED_VAR}={seed})");
    seed
}

fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A ChaCha RNG seeded by [`seed`].
pub fn rng(test: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed(test))
}

/// The hashers NOMT also implements, which the differential tests compare.
pub const NOMT_HASHERS: [Hasher; 2] = [Hasher::Blake3, Hasher::Sha256];

/// A uniformly random key path.
pub fn random_key(rng: &mut impl Rng) -> KeyPath {
    rng.gen()
}

/// A key that shares at least the first `shared` bits with `base` (the rest random).
pub fn key_near(rng: &mut impl Rng, base: &KeyPath, shared: usize) -> KeyPath {
    let mut key: KeyPath = rng.gen();
    copy_prefix(&mut key, base, shared);
    key
}

/// Overwrite the first `bits` bits of `key` with those of `from`.
pub fn copy_prefix(key: &mut KeyPath, from: &KeyPath, bits: usize) {
    let bits = bits.min(256);
    let whole = bits / 8;
    key[..whole].copy_from_slice(&from[..whole]);
    let rest = bits % 8;
    if rest > 0 {
        let mask = 0xffu8 << (8 - rest);
        key[whole] = (from[whole] & mask) | (key[whole] & !mask);
    }
}

/// `key` with bit `bit` (0 = most significant of byte 0) flipped.
pub fn flip_bit(key: &KeyPath, bit: usize) -> KeyPath {
    let mut k = *key;
    k[bit / 8] ^= 0x80 >> (bit % 8);
    k
}

/// How the keys of a generated set are spread over the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Uniform keys: a trie about log2(n) deep.
    Uniform,
    /// Keys near a few random bases, each sharing a uniformly random number of leading bits
    /// with its base: many deep, lopsided paths.
    Clustered,
    /// Keys that share all but their last few bits: leaves down to depth 256.
    Tail,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 3] = [Shape::Uniform, Shape::Clustered, Shape::Tail];
}

/// Up to `n` distinct keys of the given shape, sorted (repeats are dropped, so a `Tail` set may
/// have fewer).
pub fn gen_keys(rng: &mut impl Rng, n: usize, shape: Shape) -> Vec<KeyPath> {
    let mut keys: Vec<KeyPath> = match shape {
        Shape::Uniform => (0..n).map(|_| random_key(rng)).collect(),
        Shape::Clustered => {
            let bases: Vec<KeyPath> = (0..rng.gen_range(1..=4)).map(|_| rng.gen()).collect();
            (0..n)
                .map(|_| {
                    let base = &bases[rng.gen_range(0..bases.len())];
                    let shared = rng.gen_range(0..=256);
                    key_near(rng, base, shared)
                })
                .collect()
        }
        Shape::Tail => {
            let base: KeyPath = rng.gen();
            // Enough free bits for n keys, plus a few, so most keys stay distinct.
            let free = (usize::BITS - n.leading_zeros()) as usize + rng.gen_range(1..=6);
            (0..n).map(|_| key_near(rng, &base, 256 - free)).collect()
        }
    };
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A random value: usually short, sometimes empty, now and then a few hundred bytes.
pub fn gen_value(rng: &mut impl Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..100) {
        0..=9 => 0,
        10..=89 => rng.gen_range(1..=40),
        _ => rng.gen_range(41..=400),
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A model holding up to `n` keys of the given shape with random values.
pub fn gen_model(rng: &mut impl Rng, hasher: Hasher, n: usize, shape: Shape) -> ReferenceModel {
    let mut model = ReferenceModel::new(hasher);
    for key in gen_keys(rng, n, shape) {
        let value = gen_value(rng);
        model.insert(key, value);
    }
    model
}

/// Keys to ask about: present keys, keys sharing long prefixes with present keys (absent, most
/// ending at another key's leaf or deep in an empty subtree), and uniform keys.
pub fn query_keys(rng: &mut impl Rng, model: &ReferenceModel, n: usize) -> Vec<KeyPath> {
    let present: Vec<KeyPath> = model.iter().map(|(k, _)| *k).collect();
    (0..n)
        .map(|_| match (rng.gen_range(0..3), present.is_empty()) {
            (0, false) => present[rng.gen_range(0..present.len())],
            (1, false) => {
                let base = present[rng.gen_range(0..present.len())];
                let shared = rng.gen_range(0..=255);
                // Differ at bit `shared` so the key is absent.
                let near = key_near(rng, &base, shared);
                if near == base {
                    flip_bit(&base, 255)
                } else {
                    near
                }
            }
            _ => random_key(rng),
        })
        .collect()
}

/// What the model says about `key`, in the verifier's terms.
pub fn truth(model: &ReferenceModel, key: &KeyPath) -> Lookup {
    match model.get(key) {
        Some(v) => Lookup::Present(model.hasher().hash_value(v)),
        None => Lookup::Absent,
    }
}

/// Random changes to `keys`: a new value or a deletion for each.
pub fn gen_changes(rng: &mut impl Rng, keys: &[KeyPath]) -> Vec<(KeyPath, Option<Vec<u8>>)> {
    keys.iter()
        .map(|k| {
            if rng.gen_bool(0.3) {
                (*k, None)
            } else {
                (*k, Some(gen_value(rng)))
            }
        })
        .collect()
}

/// The changes as a witness applies them: each new value replaced by its hash.
pub fn hashed_changes(
    hasher: Hasher,
    changes: &[(KeyPath, Option<Vec<u8>>)],
) -> Vec<(KeyPath, Option<ValueHash>)> {
    changes
        .iter()
        .map(|(k, v)| (*k, v.as_ref().map(|v| hasher.hash_value(v))))
        .collect()
}
