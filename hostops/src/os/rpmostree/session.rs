//! One registered client connection to rpm-ostree's daemon ([`Session`]): method calls,
//! transactions (waiting while another client's runs), the deployments and their boot
//! configurations read into [`OsStatus`], and rollback.

use std::collections::HashMap;
use std::time::Duration;

use tracing::{debug, info};
use zbus::{Connection, OwnedObjectPath, OwnedVariant as OwnedValue, Variant as Value};

use super::dbus::{
    bus_error, connect_bus, dict_bool, dict_i32, dict_str, dict_strv, get_property,
    run_transaction, Dict, BUS_NAME, CLIENT_ID, OS_IFACE, SYSROOT_IFACE, SYSROOT_PATH,
};
use super::image::container_image;
use super::packages::kernel_type_of;
use crate::os::error::OsError;
use crate::os::status::{DeploymentId, DeploymentInfo, OsStatus, RollbackOutcome};

/// One connection to the daemon, registered as a client.
pub(super) struct Session {
    conn: Connection,
    os_path: OwnedObjectPath,
    busy_wait: Duration,
}

impl Session {
    pub(super) async fn open(bus: &str, busy_wait: Duration) -> Result<Session, OsError> {
        let conn = connect_bus(bus).await?;
        let mut options: HashMap<&str, Value<'_>> = HashMap::new();
        options.insert("id", Value::from(CLIENT_ID));
        conn.call_method(
            Some(BUS_NAME),
            SYSROOT_PATH,
            Some(SYSROOT_IFACE),
            "RegisterClient",
            &(options,),
        )
        .await
        .map_err(|e| bus_error("Sysroot.RegisterClient", None, e))?;
        let os_path: OwnedObjectPath =
            get_property(&conn, SYSROOT_PATH, SYSROOT_IFACE, "Booted").await?;
        if os_path.as_str() == "/" {
            return Err(OsError::RpmOstree {
                method: "reading Sysroot.Booted".into(),
                transaction: None,
                message: "the daemon reports no booted OS (is this host booted from an ostree \
                          deployment?)"
                    .into(),
            });
        }
        Ok(Session {
            conn,
            os_path,
            busy_wait,
        })
    }

    pub(super) async fn close(self) {
        let options: HashMap<&str, Value<'_>> = HashMap::new();
        if let Err(e) = self
            .conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some(SYSROOT_IFACE),
                "UnregisterClient",
                &(options,),
            )
            .await
        {
            debug!("rpm-ostree UnregisterClient: {e}");
        }
    }

    pub(super) async fn call_os<B, R>(&self, method: &str, body: &B) -> Result<R, OsError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: serde::de::DeserializeOwned + zbus::zvariant::Type,
    {
        let reply = self
            .conn
            .call_method(
                Some(BUS_NAME),
                self.os_path.as_str(),
                Some(OS_IFACE),
                method,
                body,
            )
            .await
            .map_err(|e| bus_error(method, None, e))?;
        reply
            .body()
            .deserialize::<R>()
            .map_err(|e| bus_error(format!("{method}: reading the reply"), None, e))
    }

    /// Calls a method that starts a transaction, and runs the transaction to its end.
    pub(super) async fn transaction<B>(&self, method: &str, body: &B) -> Result<(), OsError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        // The daemon runs one transaction at a time and refuses others ("Transaction in
        // progress: <title>"): wait for it, as the libostree backend waits for the sysroot lock.
        let start = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(500);
        let address: String = loop {
            match self.call_os(method, body).await {
                Ok(a) => break a,
                Err(OsError::RpmOstree {
                    method: m,
                    transaction,
                    message,
                }) if message.contains("Transaction in progress") => {
                    let waited = start.elapsed();
                    if waited >= self.busy_wait {
                        return Err(OsError::RpmOstree {
                            method: m,
                            transaction,
                            message: format!(
                                "{message} (waited {} s for it to end)",
                                waited.as_secs()
                            ),
                        });
                    }
                    info!(
                        method,
                        "rpm-ostree is busy, waiting: {}",
                        message.lines().next().unwrap_or("")
                    );
                    tokio::time::sleep(pause.min(self.busy_wait.saturating_sub(waited))).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        };
        info!(method, transaction = %address, "rpm-ostree transaction started");
        run_transaction(method, &address).await?;
        // Sync with the daemon so that the properties show the transaction's result.
        self.conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some(SYSROOT_IFACE),
                "Reload",
                &(),
            )
            .await
            .map_err(|e| bus_error(format!("Sysroot.Reload after {method}"), None, e))?;
        Ok(())
    }

    async fn deployments(&self) -> Result<Vec<Dict>, OsError> {
        let op = "reading Sysroot.Deployments";
        let reply = self
            .conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(SYSROOT_IFACE, "Deployments"),
            )
            .await
            .map_err(|e| bus_error(op, None, e))?;
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| bus_error(op, None, e))?;
        let Value::Array(list) = &*value else {
            return Err(OsError::RpmOstree {
                method: op.into(),
                transaction: None,
                message: format!("expected aa{{sv}}, got {}", value.value_signature()),
            });
        };
        let mut out = Vec::new();
        for item in list.iter() {
            let Value::Dict(d) = item else {
                return Err(OsError::RpmOstree {
                    method: op.into(),
                    transaction: None,
                    message: format!("expected a{{sv}} entries, got {}", item.value_signature()),
                });
            };
            let mut map = Dict::new();
            for (k, v) in d.iter() {
                let Value::Str(k) = k else { continue };
                // a{sv}: the value is a variant.
                let inner = match v {
                    Value::Variant(inner) => &**inner,
                    other => other,
                };
                if let Ok(owned) = inner.try_to_owned() {
                    map.insert(k.to_string(), owned);
                }
            }
            out.push(map);
        }
        Ok(out)
    }

    /// The kernel arguments of the deployment at `index` (without `ostree=`), and the boot
    /// checksum from its `linux` path when the daemon gives one (not for staged deployments).
    async fn boot_config(&self, index: usize) -> Result<(Vec<String>, String), OsError> {
        let config: Dict = self
            .call_os("GetDeploymentBootConfig", &(index.to_string(), false))
            .await?;
        let options = dict_str(&config, "options").unwrap_or_default();
        let kernel_args = hearth_config::plan::split_kernel_arguments(&[options])
            .into_iter()
            .filter(|a| !a.starts_with("ostree="))
            .collect();
        // `/ostree/<osname>-<bootcsum>/vmlinuz-...`
        let boot_checksum = dict_str(&config, "linux")
            .and_then(|l| {
                l.trim_start_matches('/')
                    .strip_prefix("ostree/")
                    .and_then(|r| r.split('/').next())
                    .and_then(|dir| dir.rsplit('-').next())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        Ok((kernel_args, boot_checksum))
    }

    pub(super) async fn status(&self) -> Result<OsStatus, OsError> {
        Ok(self.status_and_dicts().await?.0)
    }

    /// The status, and the `Deployments` dicts it was read from (same order).
    pub(super) async fn status_and_dicts(&self) -> Result<(OsStatus, Vec<Dict>), OsError> {
        let dicts = self.deployments().await?;
        let sysroot: String = get_property(&self.conn, SYSROOT_PATH, SYSROOT_IFACE, "Path")
            .await
            .unwrap_or_else(|_| "/".into());
        let mut infos = Vec::new();
        for (index, d) in dicts.iter().enumerate() {
            infos.push(self.info(index, d).await?);
        }
        let Some(booted_pos) = infos.iter().position(|d| d.booted) else {
            return Err(OsError::NotBooted {
                sysroot,
                reason: format!(
                    "none of the {} deployments rpm-ostree lists has booted=true",
                    infos.len()
                ),
            });
        };
        let osname = infos[booted_pos].id.osname.clone();
        let pending = infos[..booted_pos]
            .iter()
            .find(|d| d.id.osname == osname)
            .cloned();
        let rollback = infos[booted_pos + 1..]
            .iter()
            .find(|d| d.id.osname == osname)
            .cloned();
        let status = OsStatus {
            backend: "rpm-ostree".into(),
            sysroot,
            native: true,
            booted: infos[booted_pos].clone(),
            pending,
            rollback,
            deployments: infos,
        };
        Ok((status, dicts))
    }

    async fn info(&self, index: usize, d: &Dict) -> Result<DeploymentInfo, OsError> {
        let osname = dict_str(d, "osname").unwrap_or_default();
        let checksum = dict_str(d, "checksum").unwrap_or_default();
        let serial = dict_i32(d, "serial").unwrap_or(0);
        let container = dict_str(d, "container-image-reference");
        let origin = dict_str(d, "origin");
        let refspec = container.clone().or(origin);
        let image = match (&container, &refspec) {
            (Some(c), _) => container_image(c).unwrap_or_else(|| c.to_string()),
            (None, Some(r)) => r.clone(),
            (None, None) => checksum.clone(),
        };
        let mut packages = dict_strv(d, "requested-packages");
        packages.extend(dict_strv(d, "packages"));
        let kernel_type = kernel_type_of(&packages);
        let (kernel_args, boot_checksum) = self.boot_config(index).await?;
        Ok(DeploymentInfo {
            id: DeploymentId {
                osname,
                checksum,
                serial,
            },
            index: index as i32,
            boot_checksum,
            refspec,
            version: dict_str(d, "version"),
            image,
            image_digest: dict_str(d, "container-image-reference-digest"),
            kernel_type,
            kernel_args,
            booted: dict_bool(d, "booted"),
            staged: dict_bool(d, "staged"),
            pinned: dict_bool(d, "pinned"),
        })
    }

    pub(super) async fn cleanup_pending(&self) -> Result<(), OsError> {
        self.transaction("Cleanup", &(vec!["pending-deploy"],))
            .await
    }

    pub(super) async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let status = self.status().await?;
        if let Some(pending) = &status.pending {
            self.cleanup_pending().await?;
            info!(dropped = %pending.id, "pending deployment dropped");
            return Ok(RollbackOutcome::CancelledPending {
                dropped: pending.id.clone(),
            });
        }
        let Some(previous) = &status.rollback else {
            return Err(OsError::NoRollback(format!(
                "the booted deployment {} is the only deployment of stateroot {}",
                status.booted.describe(),
                status.booted.id.osname
            )));
        };
        let options: HashMap<&str, Value<'_>> = HashMap::new();
        self.transaction("Rollback", &(options,)).await?;
        let after = self.status().await?;
        match after.deployments.first() {
            Some(first) if first.id == previous.id => {}
            other => {
                return Err(OsError::RpmOstree {
                    method: "Rollback".into(),
                    transaction: None,
                    message: format!(
                        "the transaction succeeded but the default deployment is {}, not {}",
                        other.map(|d| d.describe()).unwrap_or_else(|| "none".into()),
                        previous.describe()
                    ),
                })
            }
        }
        info!(from = %status.booted.id, to = %previous.id, "rolled back");
        Ok(RollbackOutcome::RolledBack {
            from: status.booted.id,
            to: previous.id.clone(),
        })
    }
}
