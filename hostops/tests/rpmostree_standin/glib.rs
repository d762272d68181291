//! Transactions served by GLib's `GDBusServer`, as rpm-ostreed serves them.

use serde_json::json;

use super::names::TRANSACTION_IFACE;
use super::state::record;
use super::transaction::Transaction;

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
pub(super) fn glib_transaction_server(
    address: &str,
    txn: Transaction,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    use glib::prelude::*;

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
