//! A STAND-IN for rpm-ostree's daemon (`rpm-ostreed`), for the tests of hearth's rpm-ostree
//! backend (`hostops/tests/os_rpmostree_standin.rs`). rpm-ostree cannot run on the Debian test
//! machines; this service implements the part of its documented D-Bus interface
//! (`src/daemon/org.projectatomic.rpmostree1.xml` in coreos/rpm-ostree) that hearth uses, with
//! the same names, signatures, object paths and transaction protocol, and keeps deployments in
//! memory:
//!
//! - it runs on a REAL `dbus-daemon` ([`PrivateBus`]: a private bus whose policy lets only
//!   `org.projectatomic.rpmostree1` be owned) and owns that name;
//! - `/org/projectatomic/rpmostree1/Sysroot` (`...Sysroot`): `RegisterClient`,
//!   `UnregisterClient`, `Reload`, `ReloadConfig`, `GetOS`, the properties `Booted`, `Path`,
//!   `Deployments`, `ActiveTransaction`, `ActiveTransactionPath`;
//! - `/org/projectatomic/rpmostree1/<osname>` (`...OS`): `UpdateDeployment`, `KernelArgs`,
//!   `Cleanup`, `Rollback`, `FinalizeDeployment`, `GetDeploymentBootConfig`, the properties
//!   `Name`, `BootedDeployment`, `DefaultDeployment`, `RollbackDeployment`;
//! - transactions: every mutating method binds a unix socket and returns its address; the
//!   client connects peer-to-peer, calls `Transaction.Start` on `/`, and the stand-in does the
//!   work then, emitting `Message`, `TaskBegin`, `TaskEnd`, `PercentProgress` and
//!   `Finished(success, error_message)` on that connection. The server side is zbus, or
//!   ([`Standin::use_glib_transactions`]) GLib's `GDBusServer` on a GLib main loop, as in
//!   rpm-ostreed.
//!
//! Its semantics follow the daemon's source where hearth depends on them: new deployments are
//! built on the *origin merge deployment* (the pending one if any, else the booted one) and
//! staged (replacing a staged one); `KernelArgs` with `final-kernel-args` sets exactly that list
//! and does nothing when it equals `existing_kernel_arg_string`; layering errors on packages
//! already requested / not requested unless `idempotent-layering`; `Cleanup` accepts
//! `pending-deploy`, `rollback-deploy`, `base`, `repomd`. It is stricter than the daemon in one
//! way: it refuses modifiers it does not implement, so that a typo in hearth fails a test.
//! Every method call is recorded ([`Standin::calls`]) with its arguments as JSON.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use zbus::object_server::SignalEmitter;
use zbus::{interface, Connection, OwnedObjectPath, OwnedVariant, Variant};

pub const BUS_NAME: &str = "org.projectatomic.rpmostree1";
pub const SYSROOT_PATH: &str = "/org/projectatomic/rpmostree1/Sysroot";
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";

// ---------------------------------------------------------------------------------------------
// A private, real dbus-daemon.
// ---------------------------------------------------------------------------------------------

/// How the service is activated: executable, arguments, environment.
type Activation<'a> = (&'a Path, &'a [&'a str], &'a [(&'a str, &'a str)]);

/// A real `dbus-daemon` on a socket in a temporary directory.
pub struct PrivateBus {
    child: Child,
    _stdout: std::process::ChildStdout,
    dir: tempfile::TempDir,
    /// `unix:path=...`
    pub address: String,
}

impl PrivateBus {
    /// Starts `dbus-daemon --config-file=...`; panics with what is missing when it cannot.
    pub fn start() -> PrivateBus {
        Self::start_with(None)
    }

    /// A bus on which `org.projectatomic.rpmostree1` is D-Bus-activatable, as on a real host:
    /// the first message to the name makes dbus-daemon run `exec` with `args` (and `env`).
    pub fn start_activatable(exec: &Path, args: &[&str], env: &[(&str, &str)]) -> PrivateBus {
        Self::start_with(Some((exec, args, env)))
    }

    fn start_with(activation: Option<Activation<'_>>) -> PrivateBus {
        let dir = tempfile::tempdir().expect("temporary directory for the private bus");
        let socket = dir.path().join("system_bus_socket");
        let config = dir.path().join("bus.conf");
        let services = dir.path().join("services");
        std::fs::create_dir(&services).unwrap();
        if let Some((exec, args, _)) = activation {
            std::fs::write(
                services.join(format!("{BUS_NAME}.service")),
                format!(
                    "[D-BUS Service]\nName={BUS_NAME}\nExec={} {}\n",
                    exec.display(),
                    args.join(" ")
                ),
            )
            .unwrap();
        }
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>hearth-test</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{}</servicedir>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <allow own="{BUS_NAME}"/>
    <allow send_destination="*" eavesdrop="false"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                socket.display(),
                services.display()
            ),
        )
        .unwrap();
        // Its own notes (it cannot raise its fd limit in some containers) go to a log file.
        let log = std::fs::File::create(dir.path().join("dbus-daemon.log")).unwrap();
        let mut cmd = Command::new("dbus-daemon");
        if let Some((_, _, env)) = activation {
            cmd.envs(env.iter().copied());
        }
        let mut child = cmd
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--print-address"])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start dbus-daemon ({e}): the rpm-ostree stand-in tests need a real \
                     dbus-daemon (Debian package `dbus`, installed by \
                     vm-tests/scripts/install-deps.sh)"
                )
            });
        let mut stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(&mut stdout)
            .read_line(&mut line)
            .expect("reading dbus-daemon's address");
        let address = line.trim().to_string();
        assert!(
            address.starts_with("unix:"),
            "dbus-daemon printed no address (got {line:?}); config {}; its log: {}",
            config.display(),
            std::fs::read_to_string(dir.path().join("dbus-daemon.log")).unwrap_or_default()
        );
        PrivateBus {
            child,
            _stdout: stdout,
            dir,
            address,
        }
    }

    /// The directory (transaction sockets of a stand-in may go here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// State.
// ---------------------------------------------------------------------------------------------

/// One deployment, as the stand-in keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub osname: String,
    /// The base commit (the image's).
    pub base_checksum: String,
    /// The deployed commit (the base, or a layered commit when packages are layered).
    pub checksum: String,
    pub serial: i32,
    /// The origin refspec: an ostree refspec, a checksum, or a container refspec
    /// (`ostree-unverified-registry:...`).
    pub origin: String,
    pub version: Option<String>,
    /// Kernel arguments, without `ostree=`.
    pub kargs: Vec<String>,
    pub requested_packages: Vec<String>,
    pub requested_base_removals: Vec<String>,
    pub booted: bool,
    pub staged: bool,
    pub pinned: bool,
    pub boot_csum: String,
}

fn sha(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

impl Deployment {
    /// A booted deployment of `origin` with kernel arguments `kargs`.
    pub fn booted(osname: &str, origin: &str, version: &str, kargs: &[&str]) -> Deployment {
        let base = sha(&["commit", origin]);
        Deployment {
            osname: osname.into(),
            base_checksum: base.clone(),
            checksum: base.clone(),
            serial: 0,
            origin: origin.into(),
            version: Some(version.into()),
            kargs: kargs.iter().map(|s| s.to_string()).collect(),
            requested_packages: Vec::new(),
            requested_base_removals: Vec::new(),
            booted: true,
            staged: false,
            pinned: false,
            boot_csum: sha(&["boot", &base]),
        }
    }

    pub fn id(&self) -> String {
        format!("{}-{}.{}", self.osname, self.checksum, self.serial)
    }

    fn is_container(&self) -> bool {
        self.origin.starts_with("ostree-unverified-registry:")
            || self.origin.starts_with("ostree-remote-registry:")
            || self.origin.starts_with("ostree-image-signed:")
            || self.origin.starts_with("ostree-unverified-image:")
    }

    /// The deployment dict, with the keys the real daemon sets (rpm-ostree's
    /// `deployment_populate_variant` and `rpmostreed_deployment_generate_variant`).
    fn to_dict(&self) -> HashMap<String, OwnedVariant> {
        let mut d: HashMap<String, OwnedVariant> = HashMap::new();
        let mut put = |k: &str, v: Variant<'_>| {
            d.insert(k.to_string(), v.try_to_owned().unwrap());
        };
        put("id", Variant::from(self.id()));
        put("osname", Variant::from(self.osname.clone()));
        put("serial", Variant::from(self.serial));
        put("checksum", Variant::from(self.checksum.clone()));
        put("timestamp", Variant::from(1_700_000_000u64));
        put("booted", Variant::from(self.booted));
        put("staged", Variant::from(self.staged));
        put("pinned", Variant::from(self.pinned));
        put("unlocked", Variant::from("none"));
        put("regenerate-initramfs", Variant::from(false));
        if let Some(v) = &self.version {
            put("version", Variant::from(v.clone()));
        }
        if self.is_container() {
            put(
                "container-image-reference",
                Variant::from(self.origin.clone()),
            );
        } else {
            put("origin", Variant::from(self.origin.clone()));
        }
        put(
            "requested-packages",
            Variant::from(self.requested_packages.clone()),
        );
        put("packages", Variant::from(self.requested_packages.clone()));
        put(
            "requested-base-removals",
            Variant::from(self.requested_base_removals.clone()),
        );
        if self.checksum != self.base_checksum {
            put("base-checksum", Variant::from(self.base_checksum.clone()));
        }
        d
    }

    fn options(&self) -> String {
        let mut v = vec![format!(
            "ostree=/ostree/boot.1/{}/{}/{}",
            self.osname, self.boot_csum, self.serial
        )];
        v.extend(self.kargs.iter().cloned());
        v.join(" ")
    }
}

/// One recorded method call.
#[derive(Debug, Clone)]
pub struct Call {
    /// `Sysroot`, `OS` or `Transaction`.
    pub interface: String,
    pub method: String,
    /// The arguments, converted to JSON (a{sv} → object).
    pub args: Json,
    /// For methods that start a transaction: its address.
    pub transaction: Option<String>,
}

#[derive(Debug)]
struct State {
    deployments: Vec<Deployment>,
    calls: Vec<Call>,
    /// Method → message: the next transaction of that method fails with it.
    fail: HashMap<String, String>,
    /// Methods whose next transaction "crashes": the connection closes without `Finished`.
    crash: Vec<String>,
    /// Method → how many more calls are refused with "Transaction in progress".
    busy: HashMap<String, u32>,
    txn_counter: u32,
    txn_dir: PathBuf,
    clients: Vec<String>,
    reboots: u32,
    /// Serve transactions with GLib's `GDBusServer` (as rpm-ostreed does) instead of zbus.
    glib_transactions: bool,
}

impl State {
    fn booted_index(&self) -> usize {
        self.deployments.iter().position(|d| d.booted).unwrap()
    }

    fn osname(&self) -> String {
        self.deployments[self.booted_index()].osname.clone()
    }

    /// The pending deployment if any, else the booted one (rpm-ostree's origin merge
    /// deployment).
    fn origin_merge(&self) -> Deployment {
        let os = self.osname();
        self.deployments
            .iter()
            .find(|d| d.osname == os)
            .cloned()
            .unwrap()
    }

    /// Stages `d` (replacing a staged deployment), at the top of the boot order.
    fn stage(&mut self, mut d: Deployment) -> Deployment {
        self.deployments.retain(|x| !x.staged);
        d.serial = self
            .deployments
            .iter()
            .filter(|x| x.checksum == d.checksum)
            .map(|x| x.serial + 1)
            .max()
            .unwrap_or(0);
        d.booted = false;
        d.staged = true;
        d.pinned = false;
        if d.checksum != d.base_checksum || d.boot_csum.is_empty() {
            d.boot_csum = sha(&["boot", &d.checksum]);
        }
        self.deployments.insert(0, d.clone());
        d
    }
}

// ---------------------------------------------------------------------------------------------
// Variant → JSON, for the record.
// ---------------------------------------------------------------------------------------------

pub fn to_json(v: &Variant<'_>) -> Json {
    match v {
        Variant::Bool(b) => json!(b),
        Variant::U8(n) => json!(n),
        Variant::I16(n) => json!(n),
        Variant::U16(n) => json!(n),
        Variant::I32(n) => json!(n),
        Variant::U32(n) => json!(n),
        Variant::I64(n) => json!(n),
        Variant::U64(n) => json!(n),
        Variant::F64(n) => json!(n),
        Variant::Str(s) => json!(s.as_str()),
        Variant::ObjectPath(p) => json!(p.as_str()),
        Variant::Variant(inner) => to_json(inner),
        Variant::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        Variant::Dict(d) => {
            let mut m = serde_json::Map::new();
            for (k, v) in d.iter() {
                let key = match to_json(k) {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                m.insert(key, to_json(v));
            }
            Json::Object(m)
        }
        Variant::Structure(s) => Json::Array(s.fields().iter().map(to_json).collect()),
        other => json!(format!("{other:?}")),
    }
}

fn dict_json(d: &HashMap<String, OwnedVariant>) -> Json {
    let mut m = serde_json::Map::new();
    for (k, v) in d {
        m.insert(k.clone(), to_json(v));
    }
    Json::Object(m)
}

fn strv(args: &Json, key: &str) -> Vec<String> {
    args.get(key)
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The service.
// ---------------------------------------------------------------------------------------------

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

fn record(state: &Arc<Mutex<State>>, interface: &str, method: &str, args: Json) {
    state.lock().unwrap().calls.push(Call {
        interface: interface.into(),
        method: method.into(),
        args,
        transaction: None,
    });
}

fn failed(msg: impl Into<String>) -> zbus::fdo::Error {
    zbus::fdo::Error::Failed(msg.into())
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

struct OsIface {
    state: Arc<Mutex<State>>,
    name: String,
}

/// What a transaction does when started.
#[derive(Debug, Clone)]
enum Work {
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

#[derive(Clone)]
struct Transaction {
    state: Arc<Mutex<State>>,
    method: String,
    work: Work,
    started: Arc<Mutex<bool>>,
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
    fn execute(&self) -> Result<Vec<String>, String> {
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

// ---------------------------------------------------------------------------------------------
// Transactions served by GLib's GDBusServer, as rpm-ostreed serves them.
// ---------------------------------------------------------------------------------------------

const TRANSACTION_XML: &str = r#"<node>
  <interface name="org.projectatomic.rpmostree1.Transaction">
    <property name="Title" type="s" access="read"/>
    <property name="InitiatingClientDescription" type="s" access="read"/>
    <method name="Cancel"/>
    <method name="Start"><arg name="started" type="b" direction="out"/></method>
    <signal name="Finished"><arg name="success" type="b"/><arg name="error_message" type="s"/></signal>
    <signal name="Message"><arg name="text" type="s"/></signal>
    <signal name="TaskBegin"><arg name="text" type="s"/></signal>
    <signal name="TaskEnd"><arg name="text" type="s"/></signal>
    <signal name="PercentProgress"><arg name="text" type="s"/><arg name="percentage" type="u"/></signal>
    <signal name="ProgressEnd"/>
  </interface>
</node>"#;

/// Runs one transaction's `GDBusServer` (flags NONE: authenticated, as rpm-ostreed creates it)
/// on a GLib main loop of this thread, forever (the thread ends with the test process).
fn glib_transaction_server(
    address: &str,
    txn: Transaction,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    use ostree::gio;
    use ostree::glib;
    use ostree::glib::prelude::*;

    let ctx = glib::MainContext::new();
    ctx.with_thread_default(|| {
        let node = gio::DBusNodeInfo::for_xml(TRANSACTION_XML).unwrap();
        let iface = node.lookup_interface(TRANSACTION_IFACE).unwrap();
        let server = match gio::DBusServer::new_sync(
            address,
            gio::DBusServerFlags::NONE,
            &gio::dbus_generate_guid(),
            None,
            gio::Cancellable::NONE,
        ) {
            Ok(s) => s,
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                return;
            }
        };
        let keep: std::rc::Rc<std::cell::RefCell<Vec<gio::DBusConnection>>> = Default::default();
        let keep2 = keep.clone();
        server.connect_new_connection(move |_, conn| {
            let txn = txn.clone();
            let registered = conn
                .register_object("/", &iface)
                .method_call(
                    move |conn, _sender, _path, _iface, method, _params, invocation| match method {
                        "Start" => {
                            record(
                                &txn.state,
                                "Transaction",
                                "Start",
                                json!({ "for": txn.method, "server": "GDBusServer" }),
                            );
                            let first = {
                                let mut started = txn.started.lock().unwrap();
                                !std::mem::replace(&mut *started, true)
                            };
                            invocation.return_value(Some(&(first,).to_variant()));
                            if !first {
                                return;
                            }
                            let emit = |member: &str, v: glib::Variant| {
                                if let Err(e) =
                                    conn.emit_signal(None, "/", TRANSACTION_IFACE, member, Some(&v))
                                {
                                    eprintln!("stand-in (GLib): emitting {member}: {e}");
                                }
                            };
                            emit(
                                "TaskBegin",
                                (format!("Running {}", txn.method),).to_variant(),
                            );
                            emit("PercentProgress", (txn.method.clone(), 50u32).to_variant());
                            let (success, message, lines) = match txn.execute() {
                                Ok(lines) => (true, String::new(), lines),
                                Err(m) => (false, m.clone(), vec![format!("error: {m}")]),
                            };
                            for line in lines {
                                emit("Message", (line,).to_variant());
                            }
                            emit("TaskEnd", ("done".to_string(),).to_variant());
                            emit("Finished", (success, message).to_variant());
                        }
                        "Cancel" => {
                            record(
                                &txn.state,
                                "Transaction",
                                "Cancel",
                                json!({ "for": txn.method }),
                            );
                            invocation.return_value(None);
                        }
                        other => invocation.return_dbus_error(
                            "org.freedesktop.DBus.Error.UnknownMethod",
                            &format!("no method {other}"),
                        ),
                    },
                )
                .build();
            if let Err(e) = registered {
                eprintln!("stand-in (GLib): registering the transaction object: {e}");
                return false;
            }
            keep2.borrow_mut().push(conn.clone());
            true
        });
        server.start();
        let _ = ready.send(Ok(()));
        glib::MainLoop::new(Some(&ctx), false).run();
        drop(keep);
    })
    .unwrap();
}
