//! The stand-in's transactions served by zbus: `Start`, the signals, and the work they do
//! (`UpdateDeployment`, `KernelArgs`, `Cleanup`, `Rollback`, `FinalizeDeployment`).

use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use zbus::object_server::SignalEmitter;
use zbus::{interface, Connection};

use super::json::strv;
use super::names::TRANSACTION_IFACE;
use super::state::{record, sha, State};

/// What a transaction does when started.
#[derive(Debug, Clone)]
pub(super) enum Work {
    Update(Json, Json),
    Kargs {
        existing: String,
        added: Vec<String>,
        replaced: Vec<String>,
        deleted: Vec<String>,
        options: Json,
    },
    Cleanup(Vec<String>),
    Rollback,
    Finalize,
}

#[derive(Clone)]
pub(super) struct Transaction {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) method: String,
    pub(super) work: Work,
    pub(super) started: Arc<Mutex<bool>>,
}

#[interface(name = "org.projectatomic.rpmostree1.Transaction")]
impl Transaction {
    async fn start(&self, #[zbus(connection)] conn: &Connection) -> bool {
        record(
            &self.state,
            "Transaction",
            "Start",
            json!({ "for": self.method }),
        );
        {
            let mut started = self.started.lock().unwrap();
            if *started {
                return false;
            }
            *started = true;
        }
        let conn = conn.clone();
        let this = self.clone();
        tokio::spawn(async move {
            let emit = |member: &'static str, text: String| {
                let conn = conn.clone();
                async move {
                    if let Err(e) = conn
                        .emit_signal(None::<&str>, "/", TRANSACTION_IFACE, member, &(text,))
                        .await
                    {
                        eprintln!("stand-in: emitting {member}: {e}");
                    }
                }
            };
            emit("TaskBegin", format!("Running {}", this.method)).await;
            let _ = conn
                .emit_signal(
                    None::<&str>,
                    "/",
                    TRANSACTION_IFACE,
                    "PercentProgress",
                    &(this.method.clone(), 50u32),
                )
                .await;
            let crash = {
                let mut s = this.state.lock().unwrap();
                let found = s.crash.iter().position(|m| *m == this.method);
                found.map(|i| s.crash.remove(i)).is_some()
            };
            if crash {
                // The daemon dies mid-transaction: the peer-to-peer connection closes.
                let _ = conn.close().await;
                return;
            }
            let result = this.execute();
            let (success, message, lines) = match result {
                Ok(lines) => (true, String::new(), lines),
                Err(msg) => (false, msg.clone(), vec![format!("error: {msg}")]),
            };
            for line in lines {
                emit("Message", line).await;
            }
            emit("TaskEnd", "done".to_string()).await;
            let _ = conn
                .emit_signal(None::<&str>, "/", TRANSACTION_IFACE, "ProgressEnd", &())
                .await;
            if let Err(e) = conn
                .emit_signal(
                    None::<&str>,
                    "/",
                    TRANSACTION_IFACE,
                    "Finished",
                    &(success, message.as_str()),
                )
                .await
            {
                eprintln!("stand-in: emitting Finished: {e}");
            }
        });
        true
    }

    async fn cancel(&self) {
        record(
            &self.state,
            "Transaction",
            "Cancel",
            json!({ "for": self.method }),
        );
    }

    #[zbus(property)]
    async fn title(&self) -> String {
        self.method.clone()
    }

    #[zbus(property)]
    async fn initiating_client_description(&self) -> String {
        "hearth (stand-in)".into()
    }

    #[zbus(signal)]
    async fn finished(
        emitter: &SignalEmitter<'_>,
        success: bool,
        error_message: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn message(emitter: &SignalEmitter<'_>, text: &str) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn percent_progress(
        emitter: &SignalEmitter<'_>,
        text: &str,
        percentage: u32,
    ) -> zbus::Result<()>;
}

impl Transaction {
    /// Does the work; the lines for `Message` signals, or the failure message.
    pub(super) fn execute(&self) -> Result<Vec<String>, String> {
        let mut s = self.state.lock().unwrap();
        if let Some(msg) = s.fail.remove(&self.method) {
            return Err(msg);
        }
        match &self.work {
            Work::Update(m, o) => update(&mut s, m, o),
            Work::Kargs {
                existing,
                added,
                replaced,
                deleted,
                options,
            } => kargs(&mut s, existing, added, replaced, deleted, options),
            Work::Cleanup(elements) => {
                let os = s.osname();
                let b = s.booted_index();
                let mut lines = Vec::new();
                let mut keep = Vec::new();
                for (i, d) in s.deployments.iter().enumerate() {
                    let pending = i < b && d.osname == os;
                    let rollback = i > b && d.osname == os && !d.pinned;
                    if (pending && elements.iter().any(|e| e == "pending-deploy"))
                        || (rollback && elements.iter().any(|e| e == "rollback-deploy"))
                    {
                        lines.push(format!("Deployment {} removed", d.id()));
                    } else {
                        keep.push(d.clone());
                    }
                }
                s.deployments = keep;
                if lines.is_empty() {
                    lines.push("No changes.".into());
                }
                Ok(lines)
            }
            Work::Rollback => {
                let b = s.booted_index();
                let os = s.osname();
                let target = if b > 0 {
                    b
                } else {
                    match s.deployments[b + 1..].iter().position(|d| d.osname == os) {
                        Some(j) => b + 1 + j,
                        None => return Err("No rollback deployment found".into()),
                    }
                };
                let d = s.deployments.remove(target);
                let id = d.id();
                s.deployments.insert(0, d);
                Ok(vec![format!("Moving '{id}' to be first deployment")])
            }
            Work::Finalize => Ok(vec!["Finalizing".into()]),
        }
    }
}

fn update(s: &mut State, m: &Json, o: &Json) -> Result<Vec<String>, String> {
    const KNOWN: [&str; 6] = [
        "set-refspec",
        "set-revision",
        "install-packages",
        "uninstall-packages",
        "override-remove-packages",
        "override-reset-packages",
    ];
    if let Some(obj) = m.as_object() {
        for k in obj.keys() {
            if !KNOWN.contains(&k.as_str()) {
                return Err(format!("stand-in: modifier {k} is not implemented"));
            }
        }
    }
    let idempotent = o
        .get("idempotent-layering")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let base = s.origin_merge();
    let mut new = base.clone();
    let mut changed = false;
    let mut lines = Vec::new();
    if let Some(refspec) = m.get("set-refspec").and_then(|v| v.as_str()) {
        if refspec != base.origin {
            lines.push(format!("Rebasing to {refspec}"));
            new.origin = refspec.to_string();
            new.base_checksum = sha(&["commit", refspec]);
            new.version = refspec.rsplit([':', '/', '@']).next().map(str::to_string);
            changed = true;
        }
    }
    if let Some(rev) = m.get("set-revision").and_then(|v| v.as_str()) {
        if rev != base.base_checksum {
            new.base_checksum = rev.to_string();
            changed = true;
        }
    }
    for pkg in strv(m, "uninstall-packages") {
        match new.requested_packages.iter().position(|p| *p == pkg) {
            Some(i) => {
                new.requested_packages.remove(i);
                changed = true;
            }
            None if idempotent => {}
            None => {
                return Err(format!(
                    "Package/capability '{pkg}' is not currently requested"
                ))
            }
        }
    }
    for pkg in strv(m, "override-reset-packages") {
        match new.requested_base_removals.iter().position(|p| *p == pkg) {
            Some(i) => {
                new.requested_base_removals.remove(i);
                changed = true;
            }
            None => return Err(format!("No overrides for package '{pkg}'")),
        }
    }
    for pkg in strv(m, "override-remove-packages") {
        if new.requested_base_removals.contains(&pkg) {
            return Err(format!("Override already exists for package '{pkg}'"));
        }
        new.requested_base_removals.push(pkg);
        changed = true;
    }
    for pkg in strv(m, "install-packages") {
        if new.requested_packages.contains(&pkg) {
            if idempotent {
                continue;
            }
            return Err(format!("Package '{pkg}' is already requested"));
        }
        new.requested_packages.push(pkg);
        changed = true;
    }
    if !changed {
        return Ok(vec!["No changes.".into()]);
    }
    new.checksum = if new.requested_packages.is_empty() && new.requested_base_removals.is_empty() {
        new.base_checksum.clone()
    } else {
        let mut parts = vec![new.base_checksum.clone()];
        parts.extend(new.requested_packages.iter().map(|p| format!("+{p}")));
        parts.extend(new.requested_base_removals.iter().map(|p| format!("-{p}")));
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        sha(&refs)
    };
    new.boot_csum = String::new();
    let staged = s.stage(new);
    lines.push(format!("Staging deployment...done ({})", staged.id()));
    Ok(lines)
}

fn kargs(
    s: &mut State,
    existing: &str,
    added: &[String],
    replaced: &[String],
    deleted: &[String],
    options: &Json,
) -> Result<Vec<String>, String> {
    let base = s.origin_merge();
    let (list, changed) = match options.get("final-kernel-args").and_then(|v| v.as_str()) {
        Some(f) => (
            f.split_whitespace().map(str::to_string).collect::<Vec<_>>(),
            existing != f,
        ),
        None => {
            if !replaced.is_empty() {
                return Err("stand-in: kernel_args_replaced is not implemented".into());
            }
            let mut list: Vec<String> = existing.split_whitespace().map(str::to_string).collect();
            for d in deleted {
                match list.iter().position(|a| a == d) {
                    Some(i) => {
                        list.remove(i);
                    }
                    None => return Err(format!("No karg '{d}' found")),
                }
            }
            list.extend(added.iter().cloned());
            let changed = !deleted.is_empty() || !added.is_empty();
            (list, changed)
        }
    };
    if !changed {
        return Ok(vec!["No changes.".into()]);
    }
    let mut new = base;
    new.kargs = list;
    let staged = s.stage(new);
    Ok(vec![format!(
        "Kernel arguments updated; staging deployment...done ({})",
        staged.id()
    )])
}
