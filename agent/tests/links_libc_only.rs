//! The agent binary links libc only: its ELF `DT_NEEDED` entries are libc-family libraries
//! (libc, libm, libgcc_s, the dynamic loader), never libostree, GLib or GIO, which live in
//! hearth-ostree-helper. The check reads the dynamic section of the built binaries itself (no
//! `ldd`, which would run the loader); it is shown to see libostree in the helper.

use hearth_vm_tests::qemu::workspace_binary;

/// The libraries a binary may need on a plain host.
const LIBC_FAMILY: [&str; 5] = [
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
];

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// The `DT_NEEDED` names of a 64-bit little-endian ELF file.
fn needed(path: &std::path::Path) -> Vec<String> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not ELF", path.display());
    assert_eq!((b[4], b[5]), (2, 1), "64-bit little-endian ELF expected");
    let (shoff, shentsize, shnum) = (u64_at(&b, 0x28), u16_at(&b, 0x3a), u16_at(&b, 0x3c));
    let section = |i: usize| {
        let at = shoff + i * shentsize;
        // (type, offset, size, link)
        (
            u32_at(&b, at + 4),
            u64_at(&b, at + 0x18),
            u64_at(&b, at + 0x20),
            u32_at(&b, at + 0x28),
        )
    };
    const SHT_DYNAMIC: usize = 6;
    const DT_NEEDED: usize = 1;
    let (_, dyn_off, dyn_size, strtab) = (0..shnum)
        .map(section)
        .find(|s| s.0 == SHT_DYNAMIC)
        .expect("a dynamic section: the binary is dynamically linked");
    let (_, str_off, _, _) = section(strtab);
    let mut out = Vec::new();
    for entry in (dyn_off..dyn_off + dyn_size).step_by(16) {
        let (tag, val) = (u64_at(&b, entry), u64_at(&b, entry + 8));
        if tag == 0 {
            break;
        }
        if tag == DT_NEEDED {
            let name = &b[str_off + val..];
            let end = name.iter().position(|&c| c == 0).unwrap();
            out.push(String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    out
}

#[test]
fn the_agent_needs_only_libc_family_libraries() {
    let agent = needed(env!("CARGO_BIN_EXE_hearth-agent").as_ref());
    assert!(agent.iter().any(|l| l == "libc.so.6"), "{agent:?}");
    let other: Vec<&String> = agent
        .iter()
        .filter(|l| !LIBC_FAMILY.contains(&l.as_str()))
        .collect();
    assert!(
        other.is_empty(),
        "hearth-agent needs {other:?} besides libc (all: {agent:?})"
    );
    // The same reading sees libostree in the helper: the check can fail.
    let helper = workspace_binary("hearth-ostree-helper", "hearth-ostree-helper").unwrap();
    let helper = needed(&helper);
    assert!(
        helper.iter().any(|l| l.starts_with("libostree-1.so")),
        "{helper:?}"
    );
}
