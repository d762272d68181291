//! The stand-in service ([`Standin`]): started on a bus, driven by the tests (failures,
//! reboots, the record), and its `Sysroot` object.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use zbus::{interface, Connection, OwnedObjectPath, OwnedVariant, Variant};

use super::json::dict_json;
use super::names::{BUS_NAME, SYSROOT_PATH};
use super::os_iface::OsIface;
use super::state::{failed, record, Call, Deployment, State};

/// The stand-in service, on a bus.
pub struct Standin {
    state: Arc<Mutex<State>>,
    conn: Connection,
    _dir: tempfile::TempDir,
}

fn os_path(osname: &str) -> String {
    let escaped: String = osname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("/org/projectatomic/rpmostree1/{escaped}")
}

impl Standin {
    /// Starts the service on the bus at `address`, with `deployments` (exactly one booted).
    pub async fn start(address: &str, deployments: Vec<Deployment>) -> Standin {
        assert_eq!(
            deployments.iter().filter(|d| d.booted).count(),
            1,
            "exactly one booted deployment"
        );
        let dir = tempfile::tempdir().unwrap();
        let state = Arc::new(Mutex::new(State {
            deployments,
            calls: Vec::new(),
            fail: HashMap::new(),
            crash: Vec::new(),
            busy: HashMap::new(),
            txn_counter: 0,
            txn_dir: dir.path().to_path_buf(),
            clients: Vec::new(),
            reboots: 0,
            glib_transactions: false,
        }));
        let osname = state.lock().unwrap().osname();
        let conn = zbus::connection::Builder::address(address)
            .serve_at(
                SYSROOT_PATH,
                SysrootIface {
                    state: state.clone(),
                },
            )
            .serve_at(
                os_path(&osname).as_str(),
                OsIface {
                    state: state.clone(),
                    name: osname.clone(),
                },
            )
            .name(BUS_NAME)
            .build()
            .await
            .expect(
                "the stand-in connects to the private bus and owns org.projectatomic.rpmostree1",
            );
        Standin {
            state,
            conn,
            _dir: dir,
        }
    }

    /// Every method call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.state.lock().unwrap().calls.clear();
    }

    /// The next `times` calls of `method` are refused as the daemon refuses a method while
    /// another client's transaction runs ("Transaction in progress: ...").
    pub fn busy_next(&self, method: &str, times: u32) {
        self.state.lock().unwrap().busy.insert(method.into(), times);
    }

    /// The next transaction of `method` (zbus-served) "crashes": after `PercentProgress` the
    /// peer-to-peer connection closes without `Finished`, and nothing changes.
    pub fn crash_next(&self, method: &str) {
        self.state.lock().unwrap().crash.push(method.into());
    }

    /// The next transaction of `method` fails with `message` (Finished(false, message)).
    pub fn fail_next(&self, method: &str, message: &str) {
        self.state
            .lock()
            .unwrap()
            .fail
            .insert(method.into(), message.into());
    }

    /// From now on, transactions are served by GLib's `GDBusServer` (the implementation
    /// rpm-ostreed uses for `/run/rpm-ostree/transaction.sock`) on a GLib main loop, instead of
    /// zbus: the client side then talks to the same D-Bus server code as on a real host.
    pub fn use_glib_transactions(&self) {
        self.state.lock().unwrap().glib_transactions = true;
    }

    /// The deployments, in boot order.
    pub fn deployments(&self) -> Vec<Deployment> {
        self.state.lock().unwrap().deployments.clone()
    }

    /// Clients registered now.
    pub fn clients(&self) -> Vec<String> {
        self.state.lock().unwrap().clients.clone()
    }

    /// A simulated reboot: a staged deployment is finalized and boots (ostree keeps it, the
    /// previously booted one and pinned ones); without one, the default deployment boots.
    pub fn reboot(&self) {
        let mut s = self.state.lock().unwrap();
        s.reboots += 1;
        let old = s.booted_index();
        if let Some(i) = s.deployments.iter().position(|d| d.staged) {
            let mut new = s.deployments[i].clone();
            new.staged = false;
            new.booted = true;
            let mut prev = s.deployments[old].clone();
            prev.booted = false;
            let os = new.osname.clone();
            let mut list = vec![new, prev];
            list.extend(
                s.deployments
                    .iter()
                    .enumerate()
                    .filter(|(j, d)| *j != i && *j != old && (d.pinned || d.osname != os))
                    .map(|(_, d)| d.clone()),
            );
            s.deployments = list;
        } else {
            for d in s.deployments.iter_mut() {
                d.booted = false;
            }
            s.deployments[0].booted = true;
        }
    }

    /// Releases the bus name (the daemon "exits").
    pub async fn stop(self) {
        let _ = self.conn.release_name(BUS_NAME).await;
    }

    /// Serves until the bus connection closes (the bus went away), at most `limit`.
    pub async fn serve_until_the_bus_closes(self, limit: std::time::Duration) {
        let mut stream = zbus::MessageStream::from(&self.conn);
        let wait = async {
            while let Some(m) = std::future::poll_fn(|cx| {
                futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx)
            })
            .await
            {
                if m.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}

struct SysrootIface {
    state: Arc<Mutex<State>>,
}

#[interface(name = "org.projectatomic.rpmostree1.Sysroot")]
impl SysrootIface {
    async fn register_client(&self, options: HashMap<String, OwnedVariant>) {
        let args = json!({ "options": dict_json(&options) });
        record(&self.state, "Sysroot", "RegisterClient", args);
        let id = options
            .get("id")
            .and_then(|v| match &**v {
                Variant::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .unwrap_or_default();
        self.state.lock().unwrap().clients.push(id);
    }

    async fn unregister_client(&self, options: HashMap<String, OwnedVariant>) {
        record(
            &self.state,
            "Sysroot",
            "UnregisterClient",
            json!({ "options": dict_json(&options) }),
        );
        self.state.lock().unwrap().clients.pop();
    }

    async fn reload(&self) {
        record(&self.state, "Sysroot", "Reload", json!({}));
    }

    async fn reload_config(&self) {
        record(&self.state, "Sysroot", "ReloadConfig", json!({}));
    }

    #[zbus(name = "GetOS")]
    async fn get_os(&self, name: String) -> zbus::fdo::Result<OwnedObjectPath> {
        record(&self.state, "Sysroot", "GetOS", json!({ "name": name }));
        let os = self.state.lock().unwrap().osname();
        if !name.is_empty() && name != os {
            return Err(failed(format!("OS name \"{name}\" not found")));
        }
        Ok(OwnedObjectPath::try_from(os_path(&os)).unwrap())
    }

    #[zbus(property)]
    async fn booted(&self) -> OwnedObjectPath {
        OwnedObjectPath::try_from(os_path(&self.state.lock().unwrap().osname())).unwrap()
    }

    #[zbus(property)]
    async fn path(&self) -> String {
        "/".into()
    }

    #[zbus(property)]
    async fn active_transaction(&self) -> (String, String, String) {
        (String::new(), String::new(), String::new())
    }

    #[zbus(property)]
    async fn active_transaction_path(&self) -> String {
        String::new()
    }

    #[zbus(property)]
    async fn deployments(&self) -> Vec<HashMap<String, OwnedVariant>> {
        self.state
            .lock()
            .unwrap()
            .deployments
            .iter()
            .map(Deployment::to_dict)
            .collect()
    }
}
