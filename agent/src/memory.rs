//! Keeping the daemon small while it idles.

/// Gives memory freed after a large parse or apply back to the system (glibc's `malloc_trim`).
/// Without it, the heap's high-water mark (a journal or config of thousands of files parsed
/// once) stays resident for the daemon's whole life.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes a size and no pointers, touches only the allocator's own free
    // lists (under its own locks, so it is thread-safe), and cannot invalidate any live
    // allocation; its return value only says whether memory was released.
    unsafe {
        libc::malloc_trim(0);
    }
}
