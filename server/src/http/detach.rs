//! Changes run to completion when their client hangs up.
//!
//! hyper drops a request's handler when its client closes the connection (or resets the
//! HTTP/2 stream). For a read that is right; for a change it would stop the change wherever it
//! is: after its render but before its commit (nothing happens, though the client may have
//! seen nothing either way), or between the store's commit and the publication of the new
//! snapshot (the change is stored but not served until a later commit notices). A change is
//! therefore run in a task of its own, which the request only waits for: once the server has
//! read a change in full (`limits::front`, before routing), it carries it through, and what
//! `observe` records of it (metrics, the log line naming an admin's certificate) is recorded
//! in that task too.
//!
//! Bounded: at most [`MAX_DETACHED`] changes run so at once per server (the tasks are the
//! server's [`Background`], which a stopping server waits for); past that a change runs in its
//! request as before, so hanging up cannot pile up work beyond that bound.

use crate::app::Background;
#[cfg(doc)]
use crate::app::MAX_DETACHED;
use crate::error::ApiError;
use crate::http::limits::Held;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Runs `req` through `next`, then `finish` on the response: in a task of `background` unless
/// the method is `GET` or `HEAD` (the task goes on when the request is dropped).
pub async fn changes(
    background: &Background,
    req: Request,
    next: Next,
    finish: impl FnOnce(&Response) + Send + 'static,
) -> Response {
    let read = req.method() == Method::GET || req.method() == Method::HEAD;
    // What the request's body holds of its budget, held until the change is done, also in a
    // task of its own when the client has gone.
    let mut req = req;
    let held = req.extensions_mut().remove::<Held>();
    let run = async move {
        let resp = next.run(req).await;
        drop(held);
        finish(&resp);
        resp
    };
    if read {
        return run.await;
    }
    match background.try_spawn_bounded(run) {
        Ok(task) => match task.await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::error!(error = %e, "a request's handler failed");
                ApiError::internal("the request's handler failed; the server's log says why")
                    .into_response()
            }
        },
        Err(run) => {
            tracing::debug!("too many changes in flight to detach this one");
            run.await
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
        // (The runtime of this test has one thread: `until` and the yields let the other
        // tasks run.)
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
        // What `observe` records of a request, counted.
        let background = Arc::new(Background::default());
        let recorded = Arc::new(AtomicUsize::new(0));
        let layer = {
            let (background, recorded) = (background.clone(), recorded.clone());
            axum::middleware::from_fn(move |req: Request, next: Next| {
                let (background, recorded) = (background.clone(), recorded.clone());
                async move {
                    let finish = move |_: &Response| {
                        recorded.fetch_add(1, Ordering::SeqCst);
                    };
                    changes(&background, req, next, finish).await
                }
            })
        };
        let app = Router::new()
            .route("/x", post(handler.clone()).get(handler))
            .route_layer(layer);
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
        assert_eq!(recorded.load(Ordering::SeqCst), 0);

        // A change whose client hangs up while its handler waits runs to its end, and is
        // recorded; a server that stops waits for it.
        release.send_replace(false);
        let change = tokio::spawn(app.oneshot(request("POST")));
        until("the change's handler runs", count(&started, 2)).await;
        change.abort();
        assert!(change.await.unwrap_err().is_cancelled());
        let stopping = tokio::spawn({
            let background = background.clone();
            async move { background.drain(std::time::Duration::from_secs(60)).await }
        });
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        assert!(!stopping.is_finished(), "the stop waits for the change");
        release.send_replace(true);
        until("the change's handler ends", count(&finished, 1)).await;
        assert!(stopping.await.unwrap(), "the change ended within the limit");
        assert_eq!(
            recorded.load(Ordering::SeqCst),
            1,
            "the change was recorded"
        );
    }
}
