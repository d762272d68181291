//! Helpers for the crate's unit tests.

/// Lets the other tasks run (on the test's runtime) until `done` holds; panics naming `what`
/// if it never does.
pub(crate) async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never: {what}");
}
