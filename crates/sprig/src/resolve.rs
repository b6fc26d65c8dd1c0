//! Resolvers: how a table combines an upserted value with the value already stored.
//!
//! A table is created with the *name* of its resolver, which is stored in the catalog; the
//! function itself is code, so every handle that writes the table must know it: the built-ins
//! below always, others registered with [`crate::Options::resolver`] before opening. Opening a
//! database for writing whose table names a resolver the handle does not know is
//! [`crate::Error::ResolverMissing`].
//!
//! `upsert(key, v)` stores `resolve(old, v)` when the key holds `old`, else `v`. A batch may
//! upsert the same key several times; Sprig folds those upserts together before it reads the
//! stored value, so a resolver **must be associative**:
//! `resolve(resolve(a, b), c) == resolve(a, resolve(b, c))` for every `a`, `b`, `c` it
//! accepts. (It need not be commutative: the stored value is always the left argument.)
//! A resolver may refuse malformed input (e.g. an 8-byte counter of another length) with a
//! sentence; the batch then fails with [`crate::Error::InvalidArgument`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A resolve function: `(stored, upserted) → combined`, or a sentence saying why the inputs
/// are not acceptable. Must be associative (see the module documentation).
pub type ResolveFn = dyn Fn(&[u8], &[u8]) -> Result<Vec<u8>, String> + Send + Sync;

/// The built-in resolvers, by name.
pub const BUILTIN_RESOLVERS: &[&str] = &["replace", "add-u64", "add-u128", "max", "min", "concat"];

fn le_u64(v: &[u8]) -> Result<u64, String> {
    v.try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| format!("add-u64 needs 8-byte values, not {} bytes", v.len()))
}

fn le_u128(v: &[u8]) -> Result<u128, String> {
    v.try_into()
        .map(u128::from_le_bytes)
        .map_err(|_| format!("add-u128 needs 16-byte values, not {} bytes", v.len()))
}

/// The built-in resolver `name`:
/// - `replace`: the upserted value (an upsert is a put);
/// - `add-u64`, `add-u128`: little-endian unsigned sums, saturating at the type's maximum
///   (saturating addition is associative; values of another length are refused);
/// - `max`, `min`: the greater or smaller value in byte-wise lexicographic order (use
///   big-endian encodings for numbers);
/// - `concat`: the stored bytes followed by the upserted ones.
pub fn builtin(name: &str) -> Option<Arc<ResolveFn>> {
    let f: Arc<ResolveFn> = match name {
        "replace" => Arc::new(|_, new| Ok(new.to_vec())),
        "add-u64" => Arc::new(|old, new| {
            Ok(le_u64(old)?
                .saturating_add(le_u64(new)?)
                .to_le_bytes()
                .to_vec())
        }),
        "add-u128" => Arc::new(|old, new| {
            Ok(le_u128(old)?
                .saturating_add(le_u128(new)?)
                .to_le_bytes()
                .to_vec())
        }),
        "max" => Arc::new(|old, new| Ok(old.max(new).to_vec())),
        "min" => Arc::new(|old, new| Ok(old.min(new).to_vec())),
        "concat" => Arc::new(|old, new| {
            let mut v = Vec::with_capacity(old.len() + new.len());
            v.extend_from_slice(old);
            v.extend_from_slice(new);
            Ok(v)
        }),
        _ => return None,
    };
    Some(f)
}

/// Resolvers registered with a handle, by name (see [`crate::Options::resolver`]).
#[derive(Clone, Default)]
pub struct Resolvers {
    by_name: BTreeMap<String, Arc<ResolveFn>>,
}

impl Resolvers {
    /// Register `f` under `name` (replacing an earlier registration of the name).
    pub fn insert(&mut self, name: impl Into<String>, f: Arc<ResolveFn>) {
        self.by_name.insert(name.into(), f);
    }

    /// The resolver `name`: registered, or built in.
    pub fn get(&self, name: &str) -> Option<Arc<ResolveFn>> {
        self.by_name.get(name).cloned().or_else(|| builtin(name))
    }

    /// The names registered (built-ins not included).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

impl fmt::Debug for Resolvers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl PartialEq for Resolvers {
    /// Two registries are equal when they register the same names (functions cannot be
    /// compared).
    fn eq(&self, other: &Resolvers) -> bool {
        self.by_name.keys().eq(other.by_name.keys())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn associative(name: &str, a: &[u8], b: &[u8], c: &[u8]) -> bool {
        let f = builtin(name).unwrap();
        f(&f(a, b).unwrap(), c).unwrap() == f(a, &f(b, c).unwrap()).unwrap()
    }

    proptest! {
        /// Every built-in is associative on the inputs it accepts.
        #[test]
        fn sums_are_associative(a in any::<u64>(), b in any::<u64>(), c in any::<u64>(),
                                x in any::<u128>(), y in any::<u128>(), z in any::<u128>()) {
            prop_assert!(associative("add-u64", &a.to_le_bytes(), &b.to_le_bytes(), &c.to_le_bytes()));
            prop_assert!(associative("add-u128", &x.to_le_bytes(), &y.to_le_bytes(), &z.to_le_bytes()));
        }

        #[test]
        fn byte_resolvers_are_associative(
            a in proptest::collection::vec(any::<u8>(), 0..6),
            b in proptest::collection::vec(any::<u8>(), 0..6),
            c in proptest::collection::vec(any::<u8>(), 0..6),
        ) {
            for name in ["replace", "max", "min", "concat"] {
                prop_assert!(associative(name, &a, &b, &c), "{}", name);
            }
        }
    }

    #[test]
    fn builtins_compute_what_they_say_and_refuse_bad_lengths() {
        let add = builtin("add-u64").unwrap();
        assert_eq!(
            add(&5u64.to_le_bytes(), &7u64.to_le_bytes()).unwrap(),
            12u64.to_le_bytes()
        );
        assert_eq!(
            add(&u64::MAX.to_le_bytes(), &7u64.to_le_bytes()).unwrap(),
            u64::MAX.to_le_bytes()
        );
        assert!(add(&[1, 2], &7u64.to_le_bytes()).is_err());
        assert_eq!(builtin("concat").unwrap()(b"ab", b"cd").unwrap(), b"abcd");
        assert_eq!(builtin("max").unwrap()(b"ab", b"b").unwrap(), b"b");
        assert_eq!(builtin("min").unwrap()(b"ab", b"b").unwrap(), b"ab");
        assert_eq!(builtin("replace").unwrap()(b"ab", b"b").unwrap(), b"b");
        assert!(builtin("nope").is_none());
        let mut r = Resolvers::default();
        assert!(r.get("mine").is_none());
        r.insert("mine", Arc::new(|a: &[u8], _: &[u8]| Ok(a.to_vec())));
        assert!(r.get("mine").is_some());
        assert!(r.get("add-u128").is_some());
    }
}
