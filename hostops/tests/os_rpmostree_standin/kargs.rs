//! Kernel arguments: `KernelArgs` with the whole list, under the ledger.

use hearth_hostops::os::ledger::KargLedger;
use hearth_hostops::os::{Finalization, OsError};
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_kernel_args_append_and_delete_follow_the_ledger() {
    let e = env(vec![fcos(&["rw", "quiet", "mitigations=auto"])]).await;

    // Append: one KernelArgs transaction with the whole list.
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["hugepages=32", "selinux=0"]))
        .await
        .unwrap();
    let want = s(&[
        "rw",
        "quiet",
        "mitigations=auto",
        "hugepages=32",
        "selinux=0",
    ]);
    assert_eq!(staged.deployment.kernel_args, want);
    assert!(staged.deployment.staged);
    assert_eq!(staged.finalization, Finalization::AtShutdown);
    assert!(staged.skipped_deletes.is_empty());
    assert_eq!(transactions(&e.standin), ["KernelArgs"]);
    let k = &e.standin.calls_of("KernelArgs")[0];
    assert_eq!(
        k.args,
        json!({
            "existing_kernel_arg_string": "rw quiet mitigations=auto",
            "kernel_args_added": [],
            "kernel_args_replaced": [],
            "kernel_args_removed": [],
            "options": {
                "final-kernel-args": "rw quiet mitigations=auto hugepages=32 selinux=0",
                "initiating-command-line": "hearth-agent"
            }
        })
    );
    // Start was called on the transaction, and the client synced with Reload.
    assert!(e
        .standin
        .calls()
        .iter()
        .any(|c| c.interface == "Transaction" && c.method == "Start"));
    assert!(!e.standin.calls_of("Reload").is_empty());
    // The ledger records hearth's arguments.
    let ledger = KargLedger::new(e.root.path()).load().unwrap();
    assert_eq!(
        ledger.hearth_added(&want),
        s(&["hugepages=32", "selinux=0"])
    );

    e.standin.reboot();
    assert!(e
        .backend
        .verify_booted(&staged.expectation())
        .await
        .unwrap()
        .is_empty());

    // Delete: hearth's argument goes, the image's stays (skipped, with the reason).
    e.standin.clear_calls();
    let staged = e
        .backend
        .stage(&kargs_change(&["selinux=0", "quiet"], &[]))
        .await
        .unwrap();
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "quiet", "mitigations=auto", "hugepages=32"])
    );
    assert_eq!(staged.skipped_deletes.len(), 1);
    assert_eq!(staged.skipped_deletes[0].argument, "quiet");
    assert!(
        staged.skipped_deletes[0]
            .reason
            .contains("not added by hearth"),
        "{}",
        staged.skipped_deletes[0].reason
    );
    let k = &e.standin.calls_of("KernelArgs")[0];
    assert_eq!(
        k.args["options"]["final-kernel-args"],
        "rw quiet mitigations=auto hugepages=32"
    );
    assert_eq!(
        k.args["existing_kernel_arg_string"],
        "rw quiet mitigations=auto hugepages=32 selinux=0"
    );
    assert_eq!(transactions(&e.standin), ["KernelArgs"]);

    // A quoted argument with spaces cannot go through final-kernel-args: refused, nothing sent.
    e.standin.clear_calls();
    let err = e
        .backend
        .stage(&kargs_change(&[], &["dyndbg=\"file x.c +p\""]))
        .await
        .unwrap_err();
    assert!(matches!(err, OsError::InvalidChange(_)), "{err}");
    assert!(err.to_string().contains("contains a space"), "{err}");
    assert!(transactions(&e.standin).is_empty());

    // Adopting an argument of the booted deployment makes it deletable.
    e.standin.reboot();
    let adopted = e
        .backend
        .adopt_kernel_arguments(&s(&["quiet"]))
        .await
        .unwrap();
    assert_eq!(adopted, s(&["hugepages=32", "quiet"]));
    let staged = e
        .backend
        .stage(&kargs_change(&["quiet"], &[]))
        .await
        .unwrap();
    assert!(staged.skipped_deletes.is_empty());
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "mitigations=auto", "hugepages=32"])
    );
}
