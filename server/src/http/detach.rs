//! Changes run to completion when their client hangs up.
//!
//! hyper drops a request's handler when its client closes the connection (or resets the
//! HTTP/2 stream). For a read that is right; for a change it would stop the change wherever it
//! is: after its render but before its commit (nothing happens, though the client may have
//! seen nothing either way), or between the store's commit and the publication of the new
//! snapshot (the change is stored but not served until a later commit notices). A change is
//! therefore run in a task of its own, which the request only waits for: once the server has
//! read a change in full (`limits::front`, before routing), it carries it through.
//!
//! Bounded: at most [`MAX_DETACHED`] changes run so at once; past that a change runs in its
//! request as before, so hanging up cannot pile up work beyond that bound.

use crate::error::ApiError;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

/// How many changes may run in tasks of their own at once (beyond it they run in their
/// request). Changes wait for one writer lock, so more than this in flight means a backlog of
/// seconds already.
pub const MAX_DETACHED: usize = 4096;

static DETACHED: Semaphore = Semaphore::const_new(MAX_DETACHED);

/// Runs `req` through `next`: in a task of its own unless its method is `GET` or `HEAD`
/// (`observe` calls it for every routed request; it also works as a `from_fn` layer).
pub async fn changes(req: Request, next: Next) -> Response {
    if req.method() == Method::GET || req.method() == Method::HEAD {
        return next.run(req).await;
    }
    let Ok(permit) = DETACHED.try_acquire() else {
        tracing::debug!("too many changes in flight to detach this one");
        return next.run(req).await;
    };
    let task = tokio::spawn(async move {
        let _permit = permit;
        next.run(req).await
    });
    match task.await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::error!(error = %e, "a request's handler failed");
            ApiError::internal("the request's handler failed; the server's log says why")
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::until;
    use axum::body::Body;
    use axum::routing::post;
    use axum::Router;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_change_goes_on_after_its_request_is_dropped_and_a_read_does_not() {
        let (release, wait) = tokio::sync::watch::channel(false);
        // Handlers started, handlers finished.
        let (started, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let handler = {
            let (started, finished) = (started.clone(), finished.clone());
            move || {
                let (mut wait, started, finished) =
                    (wait.clone(), started.clone(), finished.clone());
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = wait.wait_for(|go| *go).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                    "done"
                }
            }
        };
        let app = Router::new()
            .route("/x", post(handler.clone()).get(handler))
            .route_layer(axum::middleware::from_fn(changes));
        let request = |method: &str| {
            Request::builder()
                .method(method)
                .uri("/x")
                .body(Body::empty())
                .unwrap()
        };
        let count = |c: &Arc<AtomicUsize>, n: usize| {
            let c = c.clone();
            move || c.load(Ordering::SeqCst) == n
        };

        // A read whose client hangs up while its handler waits stops there.
        let read = tokio::spawn(app.clone().oneshot(request("GET")));
        until("the read's handler runs", count(&started, 1)).await;
        read.abort();
        assert!(read.await.unwrap_err().is_cancelled());
        release.send_replace(true);
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        assert_eq!(finished.load(Ordering::SeqCst), 0, "a dropped read ran on");

        // A change whose client hangs up while its handler waits runs to its end.
        release.send_replace(false);
        let change = tokio::spawn(app.oneshot(request("POST")));
        until("the change's handler runs", count(&started, 2)).await;
        change.abort();
        assert!(change.await.unwrap_err().is_cancelled());
        release.send_replace(true);
        until("the change's handler ends", count(&finished, 1)).await;
    }
}
