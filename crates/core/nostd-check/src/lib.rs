//! Proof that `sprig-core` builds without `std` (see Cargo.toml): a `#![no_std]` static
//! library whose only dependency is `sprig-core` with default features off. It brings the
//! panic handler and the global allocator `std` would otherwise provide, so a `std` anywhere
//! in the dependency graph fails the build with a duplicate lang item.
//!
//! It also uses what a light client uses — build a trie with the reference model, prove a key,
//! encode, decode, verify — from an exported function, so that the verifier is compiled here,
//! not only type-checked. Nothing runs it.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};
use sprig_core::{Hasher, PathProof, ReferenceModel};

/// Prove one of a few keys of a small trie, encode the proof, decode it and verify it against
/// the root, with `alloc` and `core` only. Returns whether every step succeeded.
#[no_mangle]
pub extern "C" fn sprig_core_nostd_check(seed: u8) -> bool {
    for hasher in Hasher::ALL {
        let mut model = ReferenceModel::new(hasher);
        let keys: Vec<_> = (0..8u8).map(|i| hasher.hash_value(&[seed, i])).collect();
        for (i, key) in keys.iter().enumerate() {
            model.insert(*key, Vec::from([seed; 3].map(|b| b ^ i as u8)));
        }
        let Some(key) = keys.first() else {
            return false;
        };
        let bytes = model.path_proof(key).encode(hasher);
        let verified = PathProof::decode(&bytes, hasher)
            .and_then(|proof| proof.verify_value(hasher, &model.root(), key, model.get(key)));
        if verified.is_err() {
            return false;
        }
    }
    true
}

/// An allocator that has no memory: every allocation fails (this library is built, never run).
struct NoMemory;

// SAFETY: `alloc` never returns memory, so no block is ever handed out or freed wrongly;
// returning null is how a `GlobalAlloc` reports an allocation failure.
unsafe impl GlobalAlloc for NoMemory {
    unsafe fn alloc(&self, _layout: Layout) -> *mut u8 {
        core::ptr::null_mut()
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOCATOR: NoMemory = NoMemory;

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
