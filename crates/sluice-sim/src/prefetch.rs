//! Cache prefetch hints: a large fabric's run waits on memory more than it computes, so the engine
//! starts loading what the next events will touch while the current one runs.

/// Hints the CPU to bring the cache lines of `len` bytes at `p` closer; a no-op where there is
/// no such hint. `len` is a constant at every call, so the loop unrolls.
#[inline(always)]
pub fn prefetch_bytes(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        unsafe {
            for line in 0..len.div_ceil(64) {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line * 64) as *const i8);
            }
            // The span's last line, when `p` is not line-aligned (none past it for an empty span).
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(len.saturating_sub(1)) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Hints the CPU to bring the whole of `*r` closer.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    prefetch_bytes(r as *const T as *const u8, std::mem::size_of::<T>());
}
