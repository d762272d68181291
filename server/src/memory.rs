//! Giving the heap back after a burst.
//!
//! An apply to a large pool makes every agent's long-poll answer and both its reports at once:
//! tens of thousands of short-lived buffers spread over the allocator's per-thread arenas.
//! glibc keeps those pages once they are free (it returns only the top of a heap on its own),
//! so the server's RSS stayed some 18 KiB per agent above its idle figure after each apply
//! (measured: 607 MiB at 10,000 agents after an apply, 473 MiB after `malloc_trim`, 430 MiB
//! idle before it; docs/performance.md). The periodic tick trims.

/// Returns free heap pages to the system (glibc's `malloc_trim`); how long it took.
pub fn trim_heap() -> std::time::Duration {
    let started = std::time::Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim(0)` has no pointer arguments and frees nothing that is allocated: it
    // releases whole free pages of the allocator's own arenas, each under that arena's lock,
    // so other threads allocating meanwhile only wait for the lock. Its result says whether
    // anything was released.
    let _released = unsafe { libc::malloc_trim(0) };
    started.elapsed()
}
