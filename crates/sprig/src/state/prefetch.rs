//! CPU cache prefetch hints: ask the CPU to bring memory it is about to read into its cache,
//! so that walks over many independent nodes or pages overlap their cache misses instead of
//! taking them one after another. A hint reads nothing and cannot fault.

/// Prefetch every 64-byte line of the `len` bytes from `first`.
pub(crate) fn prefetch_span(first: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Every 64 bytes from the first, and the last: each line the span touches.
        for at in (0..len).step_by(64).chain([len.saturating_sub(1)]) {
            // SAFETY: a prefetch is a hint that reads no memory and cannot fault, whatever
            // the address; SSE, which it needs, is part of every x86-64 CPU.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(at).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (first, len);
}
