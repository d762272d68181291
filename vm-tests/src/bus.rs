//! Async helpers for a host's system bus (zbus 6, tokio), usable in tests too.
//!
//! ```no_run
//! # async fn f(host: &hearth_vm_tests::SystemdHost) -> anyhow::Result<()> {
//! let conn = hearth_vm_tests::bus::connect(&host.bus_address()).await?;
//! assert_eq!(hearth_vm_tests::bus::system_state(&conn).await?, "running");
//! # Ok(()) }
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use zbus::Connection;
use zbus::{OwnedObjectPath, OwnedVariant};

use crate::exit_slot::ExitSlot;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const SYSTEMD_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// Connects to a bus address such as `unix:path=/tmp/.../system_bus_socket` (EXTERNAL auth:
/// as root, the caller is root on the container's bus too).
pub async fn connect(address: &str) -> zbus::Result<Connection> {
    zbus::connection::Builder::address(address).build().await
}

/// The systemd Manager's `SystemState`: `initializing`, `starting`, `running`, `degraded`,
/// `maintenance`, `stopping`, ...
pub async fn system_state(conn: &Connection) -> zbus::Result<String> {
    let reply = conn
        .call_method(
            Some(SYSTEMD),
            SYSTEMD_PATH,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(MANAGER, "SystemState"),
        )
        .await?;
    let value: OwnedVariant = reply.body().deserialize()?;
    String::try_from(value)
}

/// One row of the Manager's `ListUnits*` replies.
type UnitRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    OwnedObjectPath,
    u32,
    String,
    OwnedObjectPath,
);

/// Names of the units in the `failed` state.
pub async fn failed_units(conn: &Connection) -> zbus::Result<Vec<String>> {
    let reply = conn
        .call_method(
            Some(SYSTEMD),
            SYSTEMD_PATH,
            Some(MANAGER),
            "ListUnitsFiltered",
            &(vec!["failed"],),
        )
        .await?;
    let rows: Vec<UnitRow> = reply.body().deserialize()?;
    Ok(rows.into_iter().map(|row| row.0).collect())
}

/// Polls the bus at `address` until the Manager's `SystemState` is `running` or `degraded`;
/// returns that state and the failed units. Gives up when nspawn exits or at `deadline`.
pub(crate) async fn wait_running(
    address: &str,
    socket: &Path,
    exit: &ExitSlot,
    deadline: Instant,
) -> Result<(String, Vec<String>)> {
    let mut conn: Option<Connection> = None;
    let mut last_state: Option<String> = None;
    let mut last_error = String::from("the bus socket did not appear");
    loop {
        if let Some(status) = exit.get() {
            bail!(
                "systemd-nspawn exited ({status}) before the system was up \
                 (last SystemState: {last_state:?})"
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "timed out waiting for SystemState running: last SystemState {last_state:?}, \
                 last bus error: {last_error}"
            );
        }
        if conn.is_none() && socket.exists() {
            match tokio::time::timeout(Duration::from_secs(2), connect(address)).await {
                Ok(Ok(c)) => conn = Some(c),
                Ok(Err(e)) => last_error = format!("connecting: {e}"),
                Err(_) => last_error = "connecting timed out".into(),
            }
        }
        if let Some(c) = &conn {
            match tokio::time::timeout(Duration::from_secs(2), system_state(c)).await {
                Ok(Ok(state)) => {
                    match state.as_str() {
                        "running" => return Ok((state, Vec::new())),
                        "degraded" => {
                            let failed = failed_units(c).await.unwrap_or_default();
                            return Ok((state, failed));
                        }
                        "maintenance" => {
                            bail!("the host booted into maintenance (emergency) mode")
                        }
                        _ => {}
                    }
                    last_state = Some(state);
                }
                Ok(Err(e)) => {
                    last_error = format!("reading SystemState: {e}");
                    conn = None;
                }
                Err(_) => {
                    last_error = "reading SystemState timed out".into();
                    conn = None;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
