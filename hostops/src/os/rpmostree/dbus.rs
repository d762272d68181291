//! rpm-ostree's D-Bus API as hearth calls it: names, connecting, properties and their
//! dictionaries, errors, and running a transaction on its peer-to-peer connection to `Finished`.

use std::collections::HashMap;
use std::time::Duration;

use futures_core::Stream;
use tracing::{debug, info, warn};
use zbus::{Connection, DBusError as _, MessageStream};
use zbus::{OwnedVariant as OwnedValue, Variant as Value};

use crate::os::error::OsError;

/// rpm-ostree's well-known bus name.
pub const BUS_NAME: &str = "org.projectatomic.rpmostree1";
/// The Sysroot object.
pub const SYSROOT_PATH: &str = "/org/projectatomic/rpmostree1/Sysroot";
/// The Sysroot interface.
pub const SYSROOT_IFACE: &str = "org.projectatomic.rpmostree1.Sysroot";
/// The OS interface.
pub const OS_IFACE: &str = "org.projectatomic.rpmostree1.OS";
/// The Transaction interface (on `/` of the transaction's peer-to-peer connection).
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";
/// The client id hearth registers with.
pub const CLIENT_ID: &str = "hearth";

/// How long one D-Bus method call may take (transactions are awaited separately).
const METHOD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one transaction may take (pulling an OS image and layering packages).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(3600);

pub(super) fn bus_error(
    method: impl Into<String>,
    transaction: Option<&str>,
    e: zbus::Error,
) -> OsError {
    let message = match &e {
        zbus::Error::MethodError(name, detail, _) => match detail {
            Some(d) => format!("{d} ({name})"),
            None => name.to_string(),
        },
        zbus::Error::FDO(f) => match f.description() {
            Some(d) => format!("{d} ({})", f.name()),
            None => f.name().to_string(),
        },
        other => other.to_string(),
    };
    let hint = if message.contains("ServiceUnknown") || message.contains("NameHasNoOwner") {
        format!(
            "; {BUS_NAME} is not on this bus (is rpm-ostree installed, and is this the host's \
             system bus?)"
        )
    } else {
        String::new()
    };
    OsError::RpmOstree {
        method: method.into(),
        transaction: transaction.map(str::to_string),
        message: format!("{message}{hint}"),
    }
}

pub(super) async fn connect_bus(address: &str) -> Result<Connection, OsError> {
    zbus::connection::Builder::address(address)
        .method_timeout(METHOD_TIMEOUT)
        .build()
        .await
        .map_err(|e| bus_error(format!("connecting to the bus at {address}"), None, e))
}

pub(super) async fn get_property<T>(
    conn: &Connection,
    path: &str,
    iface: &str,
    name: &str,
) -> Result<T, OsError>
where
    T: TryFrom<OwnedValue>,
    T::Error: Into<zbus::Error>,
{
    let op = || format!("reading {}.{name} of {path}", short(iface));
    let reply = conn
        .call_method(
            Some(BUS_NAME),
            path,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(iface, name),
        )
        .await
        .map_err(|e| bus_error(op(), None, e))?;
    let value: OwnedValue = reply
        .body()
        .deserialize()
        .map_err(|e| bus_error(op(), None, e))?;
    T::try_from(value).map_err(|e| bus_error(op(), None, e.into()))
}

/// `org.projectatomic.rpmostree1.OS` → `OS`.
fn short(iface: &str) -> &str {
    iface.rsplit('.').next().unwrap_or(iface)
}

pub(super) type Dict = HashMap<String, OwnedValue>;

pub(super) fn dict_str(d: &Dict, key: &str) -> Option<String> {
    match d.get(key).map(|v| &**v) {
        Some(Value::Str(s)) => Some(s.to_string()),
        Some(Value::ObjectPath(p)) => Some(p.to_string()),
        _ => None,
    }
}

pub(super) fn dict_bool(d: &Dict, key: &str) -> bool {
    matches!(d.get(key).map(|v| &**v), Some(Value::Bool(true)))
}

pub(super) fn dict_i32(d: &Dict, key: &str) -> Option<i32> {
    match d.get(key).map(|v| &**v) {
        Some(Value::I32(i)) => Some(*i),
        Some(Value::U32(u)) => i32::try_from(*u).ok(),
        _ => None,
    }
}

pub(super) fn dict_strv(d: &Dict, key: &str) -> Vec<String> {
    match d.get(key).map(|v| &**v) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| match v {
                Value::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Connects to a transaction's peer-to-peer address, starts it and waits for `Finished`.
pub(super) async fn run_transaction(method: &str, address: &str) -> Result<(), OsError> {
    let err = |message: String| OsError::RpmOstree {
        method: method.to_string(),
        transaction: Some(address.to_string()),
        message,
    };
    let conn = zbus::connection::Builder::address(address)
        .p2p()
        .method_timeout(METHOD_TIMEOUT)
        .build()
        .await
        .map_err(|e| err(format!("connecting to the transaction: {e}")))?;
    // Everything the peer sends, from before Start on (no signal can be missed).
    let mut stream = MessageStream::from(&conn);
    let reply = conn
        .call_method(None::<&str>, "/", Some(TRANSACTION_IFACE), "Start", &())
        .await
        .map_err(|e| match e {
            // The daemon went away before it answered.
            zbus::Error::InputOutput(_) => err(format!(
                "the daemon closed the transaction's connection before Finished (calling \
                 Start: {e})"
            )),
            e => bus_error(method, Some(address), e),
        })?;
    let started: bool = reply.body().deserialize().unwrap_or(true);
    if !started {
        info!(
            method,
            transaction = address,
            "attached to a transaction another client started"
        );
    }
    let wait = async {
        let mut log: Vec<String> = Vec::new();
        while let Some(msg) = next(&mut stream).await {
            let msg = msg.map_err(|e| {
                err(format!(
                    "the daemon closed the transaction's connection before Finished ({e})"
                ))
            })?;
            if msg.message_type() != zbus::message::Type::Signal {
                continue;
            }
            let header = msg.header();
            if header.interface().map(|i| i.as_str()) != Some(TRANSACTION_IFACE) {
                continue;
            }
            let member = header.member().map(|m| m.to_string()).unwrap_or_default();
            let body = msg.body();
            match member.as_str() {
                "Finished" => {
                    let (success, message): (bool, String) = body
                        .deserialize()
                        .map_err(|e| err(format!("reading Finished: {e}")))?;
                    return if success {
                        info!(
                            method,
                            transaction = address,
                            "rpm-ostree transaction finished"
                        );
                        Ok(())
                    } else {
                        let mut m = message;
                        if m.is_empty() {
                            m = "the transaction failed without a message".into();
                        }
                        if let Some(last) = log.last().filter(|l| !l.contains(m.as_str())) {
                            m = format!("{m} (last message: {last})");
                        }
                        Err(err(m))
                    };
                }
                "Message" | "TaskBegin" | "TaskEnd" => {
                    if let Ok(text) = body.deserialize::<String>() {
                        info!(target: "rpm-ostree", method, "{}", text.trim_end());
                        if member == "Message" {
                            log.push(text.trim_end().to_string());
                        }
                    }
                }
                "PercentProgress" => {
                    if let Ok((text, pct)) = body.deserialize::<(String, u32)>() {
                        debug!(target: "rpm-ostree", method, "{text} {pct}%");
                    }
                }
                other => debug!(target: "rpm-ostree", method, "transaction signal {other}"),
            }
        }
        Err(err(
            "the daemon closed the transaction's connection before Finished".into(),
        ))
    };
    match tokio::time::timeout(TRANSACTION_TIMEOUT, wait).await {
        Ok(r) => r,
        Err(_) => {
            warn!(
                method,
                transaction = address,
                "rpm-ostree transaction timed out"
            );
            Err(err(format!(
                "no Finished signal within {} s",
                TRANSACTION_TIMEOUT.as_secs()
            )))
        }
    }
}

/// The next item of a stream (without pulling in futures-util).
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}
