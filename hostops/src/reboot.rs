//! Reboot through logind, never past a block inhibitor.
//!
//! [`reboot`] talks to `org.freedesktop.login1` (`/org/freedesktop/login1`, interface
//! `org.freedesktop.login1.Manager`) on the host's system bus:
//!
//! 1. `ListInhibitors`: if any inhibitor in mode `block` covers `shutdown` (its `what` is a
//!    `:`-separated list), hearth does not reboot and returns [`RebootOutcome::Inhibited`] with
//!    who holds it and why; the agent reports that as the reason and tries again later.
//!    `delay` inhibitors do not stop a reboot (logind lets them finish first).
//!    This check is hearth's own: logind ignores inhibitors taken by the caller's own uid, so a
//!    root caller would reboot straight through an inhibitor another root process holds;
//! 2. `RebootWithFlags(0)` (systemd 248+), or `Reboot(false)` (not interactive) when logind does
//!    not know that method.
//!
//! A reply lost because the bus went down with the system counts as a requested reboot; a D-Bus
//! error reply (access denied, ...) is an error. An inhibitor taken between the two calls is not
//! seen: the window is one bus round trip.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

const LOGIN1: &str = "org.freedesktop.login1";
const LOGIN1_PATH: &str = "/org/freedesktop/login1";
const MANAGER: &str = "org.freedesktop.login1.Manager";
/// How long one bus call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// One inhibitor lock, as `ListInhibitors` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inhibitor {
    /// What is inhibited: `shutdown`, `sleep`, `idle`, ..., `:`-separated.
    pub what: String,
    /// Who holds it (a program name).
    pub who: String,
    /// Why.
    pub why: String,
    /// `block` or `delay`.
    pub mode: String,
    /// The holder's uid.
    pub uid: u32,
    /// The holder's pid.
    pub pid: u32,
}

impl Inhibitor {
    /// Whether it blocks a reboot: mode `block` and `shutdown` among `what`.
    pub fn blocks_shutdown(&self) -> bool {
        self.mode == "block" && self.what.split(':').any(|w| w == "shutdown")
    }
}

impl fmt::Display for Inhibitor {
    /// `hearth-test: testing (mode block, what shutdown, pid 42, uid 0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (mode {}, what {}, pid {}, uid {})",
            self.who, self.why, self.mode, self.what, self.pid, self.uid
        )
    }
}

/// What [`reboot`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum RebootOutcome {
    /// logind accepted the reboot (or the bus went down while it answered).
    Requested {
        /// `RebootWithFlags` or `Reboot`.
        method: String,
    },
    /// Not rebooted: block inhibitors on `shutdown` are held.
    Inhibited {
        /// Each as `who: why (mode …, what …, pid …, uid …)`.
        by: Vec<String>,
    },
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum RebootError {
    /// Connecting to the bus failed.
    #[error("cannot connect to the system bus at {address}: {source}")]
    Connect {
        /// The address.
        address: String,
        /// The error.
        source: zbus::Error,
    },
    /// A call to logind failed.
    #[error("logind {method} failed: {source}")]
    Call {
        /// The method.
        method: &'static str,
        /// The error.
        source: zbus::Error,
    },
    /// A call to logind did not answer in time.
    #[error("logind {method} did not answer within {timeout:?}")]
    Timeout {
        /// The method.
        method: &'static str,
        /// The limit.
        timeout: Duration,
    },
}

async fn call<B>(
    conn: &zbus::Connection,
    method: &'static str,
    body: &B,
) -> Result<zbus::Result<zbus::Message>, RebootError>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(Some(LOGIN1), LOGIN1_PATH, Some(MANAGER), method, body),
    )
    .await
    .map_err(|_| RebootError::Timeout {
        method,
        timeout: CALL_TIMEOUT,
    })
}

/// The inhibitors logind knows.
pub async fn list_inhibitors(conn: &zbus::Connection) -> Result<Vec<Inhibitor>, RebootError> {
    let method = "ListInhibitors";
    let reply = call(conn, method, &())
        .await?
        .map_err(|source| RebootError::Call { method, source })?;
    let rows: Vec<(String, String, String, String, u32, u32)> = reply
        .body()
        .deserialize()
        .map_err(|source| RebootError::Call { method, source })?;
    Ok(rows
        .into_iter()
        .map(|(what, who, why, mode, uid, pid)| Inhibitor {
            what,
            who,
            why,
            mode,
            uid,
            pid,
        })
        .collect())
}

/// Whether an error means "the reply was lost" (the bus went down with the system) rather than
/// "logind refused".
pub fn is_lost_reply(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::InputOutput(_) | zbus::Error::Connection(..) => true,
        zbus::Error::FDO(f) => matches!(
            **f,
            zbus::fdo::Error::NoReply(_) | zbus::fdo::Error::Disconnected(_)
        ),
        _ => false,
    }
}

fn is_unknown_method(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::FDO(f) => matches!(**f, zbus::fdo::Error::UnknownMethod(_)),
        zbus::Error::MethodError(name, _, _) => {
            name.as_str() == "org.freedesktop.DBus.Error.UnknownMethod"
        }
        _ => false,
    }
}

/// [`reboot`] on an open connection.
pub async fn reboot_on(conn: &zbus::Connection) -> Result<RebootOutcome, RebootError> {
    let blocking: Vec<String> = list_inhibitors(conn)
        .await?
        .into_iter()
        .filter(Inhibitor::blocks_shutdown)
        .map(|i| i.to_string())
        .collect();
    if !blocking.is_empty() {
        tracing::info!("not rebooting: held off by {}", blocking.join("; "));
        return Ok(RebootOutcome::Inhibited { by: blocking });
    }
    tracing::info!("rebooting through logind");
    let method = "RebootWithFlags";
    let err = match call(conn, method, &(0u64,)).await {
        Ok(Ok(_)) => {
            return Ok(RebootOutcome::Requested {
                method: method.into(),
            })
        }
        Err(RebootError::Timeout { .. }) => {
            // The system went down before answering.
            return Ok(RebootOutcome::Requested {
                method: method.into(),
            });
        }
        Err(e) => return Err(e),
        Ok(Err(e)) => e,
    };
    if is_lost_reply(&err) {
        return Ok(RebootOutcome::Requested {
            method: method.into(),
        });
    }
    if !is_unknown_method(&err) {
        return Err(RebootError::Call {
            method,
            source: err,
        });
    }
    let method = "Reboot";
    match call(conn, method, &(false,)).await {
        Ok(Ok(_)) | Err(RebootError::Timeout { .. }) => Ok(RebootOutcome::Requested {
            method: method.into(),
        }),
        Ok(Err(e)) if is_lost_reply(&e) => Ok(RebootOutcome::Requested {
            method: method.into(),
        }),
        Ok(Err(source)) => Err(RebootError::Call { method, source }),
        Err(e) => Err(e),
    }
}

/// Reboots the host whose system bus is at `bus_address` (`unix:path=/run/dbus/system_bus_socket`
/// in production), unless a block inhibitor on `shutdown` is held. See the module documentation.
pub async fn reboot(bus_address: &str) -> Result<RebootOutcome, RebootError> {
    let conn = connect(bus_address).await?;
    reboot_on(&conn).await
}

/// Connects to a bus address.
pub async fn connect(bus_address: &str) -> Result<zbus::Connection, RebootError> {
    let builder = zbus::connection::Builder::address(bus_address);
    tokio::time::timeout(CALL_TIMEOUT, builder.build())
        .await
        .map_err(|_| RebootError::Timeout {
            method: "connect",
            timeout: CALL_TIMEOUT,
        })?
        .map_err(|source| RebootError::Connect {
            address: bus_address.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inh(what: &str, mode: &str) -> Inhibitor {
        Inhibitor {
            what: what.into(),
            who: "w".into(),
            why: "y".into(),
            mode: mode.into(),
            uid: 0,
            pid: 1,
        }
    }

    #[test]
    fn only_block_inhibitors_on_shutdown_count() {
        assert!(inh("shutdown", "block").blocks_shutdown());
        assert!(inh("sleep:shutdown:idle", "block").blocks_shutdown());
        assert!(!inh("shutdown", "delay").blocks_shutdown());
        assert!(!inh("sleep", "block").blocks_shutdown());
        assert!(!inh("handle-power-key", "block").blocks_shutdown());
        assert_eq!(
            inh("shutdown", "block").to_string(),
            "w: y (mode block, what shutdown, pid 1, uid 0)"
        );
    }
}
