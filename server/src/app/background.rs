//! Work that outlives the request that started it: a change whose client hung up
//! (`http/detach.rs`) and the commit of a group of status reports (`App::group_commit`) run in
//! tasks of their own. They are tracked here, so that a server that stops waits for them
//! (bounded) before it closes its store or ends its etcd session, and the changes run so are
//! bounded in number per server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// How many changes may run in tasks of their own at once, per server (beyond it they run in
/// their request). Changes wait for one writer lock, so more than this in flight means a
/// backlog of seconds already.
pub const MAX_DETACHED: usize = 4096;

/// The tasks a server started for work that outlives requests.
#[derive(Debug)]
pub struct Background {
    tracker: TaskTracker,
    permits: Arc<Semaphore>,
}

impl Default for Background {
    fn default() -> Self {
        Background {
            tracker: TaskTracker::new(),
            permits: Arc::new(Semaphore::new(MAX_DETACHED)),
        }
    }
}

impl Background {
    /// Runs `work` in a tracked task.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(work)
    }

    /// Runs `work` in a tracked task if fewer than [`MAX_DETACHED`] run so now (or the server
    /// is stopping); otherwise gives it back, to be run by the caller.
    pub fn try_spawn_bounded<F>(&self, work: F) -> Result<JoinHandle<F::Output>, F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.tracker.is_closed() {
            return Err(work);
        }
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => Ok(self.tracker.spawn(async move {
                let _permit = permit;
                work.await
            })),
            Err(_) => Err(work),
        }
    }

    /// Takes no more bounded work and waits at most `limit` for the tasks that run; whether
    /// they all ended.
    pub async fn drain(&self, limit: Duration) -> bool {
        self.tracker.close();
        let ended = tokio::time::timeout(limit, self.tracker.wait())
            .await
            .is_ok();
        if !ended {
            tracing::warn!(
                tasks = self.tracker.len(),
                "stopping with changes still under way after {limit:?}"
            );
        }
        ended
    }
}
