//! rpm-ostree applies `final-kernel-args` as `ostree_kernel_args_from_string(final)` then
//! `ostree_kernel_args_to_strv` (rpmostreed-transaction-types.cxx,
//! `kernel_arg_apply_final_str`): this is that round trip through the real libostree (Debian
//! 12's 2022.7; RHCOS ships newer ones). It backs hearth-hostops' rpm-ostree backend
//! (`os/rpmostree/stage.rs`), and lives here because this is the crate that links libostree.

#[test]
fn libostree_keeps_order_and_duplicates_of_final_kernel_args() {
    for list in [
        &["rw", "quiet", "hugepages=32", "selinux=0"][..],
        &["a=1", "rw", "a=2", "b", "a=1"][..],
        &[
            "default_hugepagesz=1G",
            "hugepagesz=1G",
            "hugepages=32",
            "hugepagesz=2M",
            "hugepages=512",
        ][..],
        &["console=tty0", "console=ttyS0,115200n8", "quiet"][..],
    ] {
        let k = ::ostree::KernelArgs::from_string(&list.join(" "));
        let out: Vec<String> = k.to_strv().iter().map(|s| s.to_string()).collect();
        assert_eq!(out, list, "libostree changed {list:?}");
    }
    // But a quoted argument with spaces is split: why stage() refuses those.
    let k = ::ostree::KernelArgs::from_string("rw dyndbg=\"file x.c +p\" quiet");
    let out: Vec<String> = k.to_strv().iter().map(|s| s.to_string()).collect();
    assert_eq!(out, ["rw", "dyndbg=\"file", "x.c", "+p\"", "quiet"]);
}
