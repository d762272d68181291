//! The stand-in's `OS` object: mutating methods that open transactions, and the boot
//! configuration and deployment properties.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use zbus::{interface, OwnedVariant, Variant};

use super::glib::glib_transaction_server;
use super::json::dict_json;
use super::state::{failed, record, Call, Deployment, State};
use super::transaction::{Transaction, Work};

pub(super) struct OsIface {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) name: String,
}

impl OsIface {
    /// Records the call and opens a transaction for it; returns its address.
    async fn open_transaction(
        &self,
        method: &str,
        args: Json,
        work: Work,
    ) -> zbus::fdo::Result<String> {
        let (path, address) = {
            let mut s = self.state.lock().unwrap();
            if let Some(n) = s.busy.get_mut(method).filter(|n| **n > 0) {
                *n -= 1;
                s.calls.push(Call {
                    interface: "OS".into(),
                    method: method.into(),
                    args,
                    transaction: None,
                });
                return Err(failed(
                    "Transaction in progress: upgrade\n You can cancel the current transaction \
                     with `rpm-ostree cancel`",
                ));
            }
            s.txn_counter += 1;
            let path = s
                .txn_dir
                .join(format!("transaction-{}.sock", s.txn_counter));
            let address = format!("unix:path={}", path.display());
            s.calls.push(Call {
                interface: "OS".into(),
                method: method.into(),
                args,
                transaction: Some(address.clone()),
            });
            (path, address)
        };
        let txn = Transaction {
            state: self.state.clone(),
            method: method.to_string(),
            work,
            started: Arc::new(Mutex::new(false)),
        };
        if self.state.lock().unwrap().glib_transactions {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let addr = address.clone();
            std::thread::spawn(move || glib_transaction_server(&addr, txn, tx));
            return match rx.await {
                Ok(Ok(())) => Ok(address),
                Ok(Err(e)) => Err(failed(format!("GDBusServer at {address}: {e}"))),
                Err(_) => Err(failed("the GLib transaction thread died")),
            };
        }
        let listener = tokio::net::UnixListener::bind(&path)
            .map_err(|e| failed(format!("binding {}: {e}", path.display())))?;
        tokio::spawn(async move {
            let mut conns = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                let Ok(stream) = stream.into_std() else {
                    continue;
                };
                let built = zbus::connection::Builder::unix_stream(stream)
                    .server(zbus::Guid::generate())
                    .p2p()
                    .serve_at("/", txn.clone())
                    .build()
                    .await;
                match built {
                    Ok(c) => conns.push(c),
                    Err(e) => eprintln!("stand-in: transaction connection failed: {e}"),
                }
            }
        });
        Ok(address)
    }
}

#[interface(name = "org.projectatomic.rpmostree1.OS")]
impl OsIface {
    async fn update_deployment(
        &self,
        modifiers: HashMap<String, OwnedVariant>,
        options: HashMap<String, OwnedVariant>,
    ) -> zbus::fdo::Result<String> {
        let (m, o) = (dict_json(&modifiers), dict_json(&options));
        self.open_transaction(
            "UpdateDeployment",
            json!({ "modifiers": m, "options": o }),
            Work::Update(m.clone(), o.clone()),
        )
        .await
    }

    async fn kernel_args(
        &self,
        existing_kernel_arg_string: String,
        kernel_args_added: Vec<String>,
        kernel_args_replaced: Vec<String>,
        kernel_args_removed: Vec<String>,
        options: HashMap<String, OwnedVariant>,
    ) -> zbus::fdo::Result<String> {
        let o = dict_json(&options);
        let args = json!({
            "existing_kernel_arg_string": existing_kernel_arg_string,
            "kernel_args_added": kernel_args_added,
            "kernel_args_replaced": kernel_args_replaced,
            "kernel_args_removed": kernel_args_removed,
            "options": o,
        });
        self.open_transaction(
            "KernelArgs",
            args,
            Work::Kargs {
                existing: existing_kernel_arg_string,
                added: kernel_args_added,
                replaced: kernel_args_replaced,
                deleted: kernel_args_removed,
                options: o,
            },
        )
        .await
    }

    async fn cleanup(&self, elements: Vec<String>) -> zbus::fdo::Result<String> {
        for e in &elements {
            if !["base", "pending-deploy", "rollback-deploy", "repomd"].contains(&e.as_str()) {
                record(
                    &self.state,
                    "OS",
                    "Cleanup",
                    json!({ "elements": elements }),
                );
                return Err(failed(format!("Invalid cleanup type: {e}")));
            }
        }
        self.open_transaction(
            "Cleanup",
            json!({ "elements": elements }),
            Work::Cleanup(elements.clone()),
        )
        .await
    }

    async fn rollback(&self, options: HashMap<String, OwnedVariant>) -> zbus::fdo::Result<String> {
        self.open_transaction(
            "Rollback",
            json!({ "options": dict_json(&options) }),
            Work::Rollback,
        )
        .await
    }

    async fn finalize_deployment(
        &self,
        options: HashMap<String, OwnedVariant>,
    ) -> zbus::fdo::Result<String> {
        self.open_transaction(
            "FinalizeDeployment",
            json!({ "options": dict_json(&options) }),
            Work::Finalize,
        )
        .await
    }

    async fn get_deployment_boot_config(
        &self,
        deployid: String,
        is_pending: bool,
    ) -> zbus::fdo::Result<HashMap<String, OwnedVariant>> {
        record(
            &self.state,
            "OS",
            "GetDeploymentBootConfig",
            json!({ "deployid": deployid, "is_pending": is_pending }),
        );
        let s = self.state.lock().unwrap();
        let d = if deployid.is_empty() {
            if is_pending {
                s.origin_merge()
            } else {
                s.deployments[s.booted_index()].clone()
            }
        } else {
            if !deployid.bytes().all(|b| b.is_ascii_digit()) {
                return Err(failed(format!(
                    "Invalid deployment index {deployid}, must be a number and >= 0"
                )));
            }
            let i: usize = deployid.parse().unwrap();
            match s.deployments.get(i) {
                Some(d) => d.clone(),
                None => {
                    return Err(failed(format!(
                        "Out of range deployment index {i}, expected < {}",
                        s.deployments.len()
                    )))
                }
            }
        };
        let mut out: HashMap<String, OwnedVariant> = HashMap::new();
        let mut put = |k: &str, v: Variant<'_>| {
            out.insert(k.to_string(), v.try_to_owned().unwrap());
        };
        put("staged", Variant::from(d.staged));
        put("options", Variant::from(d.options()));
        if !d.staged {
            put("title", Variant::from(format!("Stand-in OS {}", d.osname)));
            put(
                "linux",
                Variant::from(format!(
                    "/ostree/{}-{}/vmlinuz-5.14.0-standin",
                    d.osname, d.boot_csum
                )),
            );
            put(
                "initrd",
                Variant::from(format!(
                    "/ostree/{}-{}/initramfs-5.14.0-standin.img",
                    d.osname, d.boot_csum
                )),
            );
            put(
                "version",
                Variant::from(d.version.clone().unwrap_or_default()),
            );
        }
        Ok(out)
    }

    #[zbus(property)]
    async fn name(&self) -> String {
        self.name.clone()
    }

    #[zbus(property)]
    async fn booted_deployment(&self) -> HashMap<String, OwnedVariant> {
        let s = self.state.lock().unwrap();
        s.deployments[s.booted_index()].to_dict()
    }

    #[zbus(property)]
    async fn default_deployment(&self) -> HashMap<String, OwnedVariant> {
        self.state.lock().unwrap().deployments[0].to_dict()
    }

    #[zbus(property)]
    async fn rollback_deployment(&self) -> HashMap<String, OwnedVariant> {
        let s = self.state.lock().unwrap();
        let b = s.booted_index();
        let os = s.osname();
        s.deployments[b + 1..]
            .iter()
            .find(|d| d.osname == os)
            .map(Deployment::to_dict)
            .unwrap_or_default()
    }
}
