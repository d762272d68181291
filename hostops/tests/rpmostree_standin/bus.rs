//! A private, real `dbus-daemon` ([`PrivateBus`]), optionally with the stand-in
//! D-Bus-activatable on it.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::names::BUS_NAME;

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
