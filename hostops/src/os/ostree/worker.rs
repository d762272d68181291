//! One thread per libostree operation ([`on_worker`]), one operation at a time per process,
//! and libostree's printed notes sent to the log (see the module doc of `os::ostree`).

use std::sync::Once;

use ::ostree as lo;
use lo::glib;
use tracing::info;

use crate::os::error::OsError;

/// Held by the worker thread for the duration of each operation.
static LIBOSTREE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on a new thread and awaits its result.
pub(super) async fn on_worker<T, F>(f: F) -> Result<T, OsError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, OsError> + Send + 'static,
{
    route_glib_output();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("hearth-ostree".into())
        .spawn(move || {
            // One libostree operation at a time in this process (see the module docs).
            let _serial = LIBOSTREE.lock().unwrap_or_else(|e| e.into_inner());
            let _ = tx.send(f());
        })
        .map_err(|e| OsError::Worker(format!("spawning a thread: {e}")))?;
    rx.await
        .map_err(|_| OsError::Worker("the thread panicked".into()))?
}

/// libostree prints notes with `g_print`/`g_printerr` ("note: Deploying commit ... which
/// contains content in /var/log that will be ignored"): send them to the log instead of the
/// agent's standard output.
fn route_glib_output() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        glib::set_print_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
        glib::set_printerr_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
    });
}
