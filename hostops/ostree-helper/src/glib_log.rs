//! libostree prints notes with `g_print`/`g_printerr` ("note: Deploying commit ... which
//! contains content in /var/log that will be ignored"): they go to the log (standard error,
//! which the client forwards to its own log), never to standard output, which carries the one
//! protocol response.

use ::ostree as lo;
use lo::glib;
use tracing::info;

/// Routes GLib's printed output to the log; called once, before any libostree call.
pub(crate) fn route_glib_output() {
    glib::set_print_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
    glib::set_printerr_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
}
