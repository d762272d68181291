//! Unit enablement without a running systemd: what `systemctl --root=DIR enable | disable |
//! mask | unmask | preset | is-enabled` do, for `hearth-agent apply --root DIR` (disk images
//! prepared in disconnected sites).
//!
//! Every file is read and every symlink written through [`fs::Root`](crate::fs::Root), so
//! nothing outside the root is ever touched; symbolic links inside the root (absolute ones
//! included) are resolved as if the root were `/`, like `systemctl --root` does.
//!
//! The logic follows systemd 252's `src/shared/install.c` (the version of Debian 12 and RHEL 9):
//!
//! - **Search path** (first match wins): `/etc/systemd/system.control`,
//!   `/run/systemd/system.control`, `/run/systemd/transient`, `/run/systemd/generator.early`,
//!   `/etc/systemd/system`, `/etc/systemd/system.attached`, `/run/systemd/system`,
//!   `/run/systemd/system.attached`, `/run/systemd/generator`, `/usr/local/lib/systemd/system`,
//!   `/usr/lib/systemd/system`, `/lib/systemd/system` (only when it is not the same directory
//!   as `/usr/lib/systemd/system`, i.e. on split-`/usr` images), `/run/systemd/generator.late`.
//!   Links therefore point at `/usr/lib/systemd/system/UNIT` on merged-`/usr` images, as
//!   Fedora CoreOS/RHCOS's systemctl writes them (Debian's systemctl, built for split `/usr`,
//!   writes `/lib/systemd/system/UNIT`: the same file).
//! - **enable**: the unit file's `[Install]` section (and its drop-ins' `[Install]` sections,
//!   `UNIT.d/*.conf` and, for instances, `TEMPLATE.d/*.conf`): `WantedBy=T` →
//!   `/etc/systemd/system/T.wants/UNIT`, `RequiredBy=T` → `T.requires/UNIT`, `Alias=A` →
//!   `/etc/systemd/system/A`, each a symlink to the unit file's path; `Also=` units are enabled
//!   too. Templates: an instance `foo@bar.service` links the template's file under its own name;
//!   a template `foo@.service` is enabled as `foo@DEFAULT.service` with `DefaultInstance=`, and
//!   without it only for template targets (`WantedBy=x@.target`), else it is an error. The
//!   specifiers `%n %N %p %P %i %I %j %J %f %%` are expanded. Existing links to somewhere else
//!   are replaced (`--force`), regular files never. A unit without `[Install]` rules is not an
//!   error (logged), as with systemctl.
//! - **disable**: removes every symlink below `/etc/systemd/system` (recursively) that is named
//!   like the unit (or its template) or resolves to a file of that name, then links to the
//!   removed links, and empty directories left behind; `Also=` units are disabled too. A masked
//!   unit is left alone.
//! - **mask**: `/etc/systemd/system/UNIT -> /dev/null` (refused over a regular file).
//! - **unmask**: removes `/etc/systemd/system/UNIT` if it is a link to `/dev/null` (or an empty
//!   file), and links to it.
//! - **preset**: `*.preset` files of `/etc/systemd/system-preset`, `/run/systemd/system-preset`,
//!   `/usr/local/lib/systemd/system-preset`, `/usr/lib/systemd/system-preset` (and
//!   `/lib/systemd/system-preset` on split-`/usr` images); a file name in an earlier directory
//!   hides the same name in later ones (a link to `/dev/null` hides it altogether); all files
//!   are read in the lexicographic order of their names; the first `enable PATTERN
//!   [INSTANCE...]` or `disable PATTERN` line whose glob matches decides. When no line matches,
//!   the unit is **enabled** (systemd.preset(5): "If no preset files exist, preset operations
//!   will enable all units"; systemd's `query_presets` enables on no match). Aliases are
//!   skipped. Preset-enabling a masked unit is an error, as with systemctl.
//! - **is-enabled**: `enabled`, `enabled-runtime`, `linked`, `linked-runtime`, `alias`,
//!   `masked`, `masked-runtime`, `static`, `indirect`, `disabled`, `generated`, `transient`,
//!   computed as systemd's `unit_file_lookup_state` does.
//!
//! Not done: user units, `--runtime`, `reenable`, `link`, unit files given as paths,
//! `UpheldBy=` (systemd 254+), specifiers that depend on the running system (`%H`, `%m`, `%b`,
//! `%v`, `%u`, ...: an error naming them).
//!
//! ## Files
//! - `mod.rs`: the public operations.
//! - `error.rs`: their errors ([`OfflineError`]).
//! - `name.rs`: unit names (grammar, templates, instances) and specifiers.
//! - `lookup.rs`: confined lookup: paths inside the root, the search path and its directories
//!   ([`CONFIG_DIR`]), entry kinds.
//! - `install.rs`: finding a unit and its `[Install]` section (parsing, aliases).
//! - `links.rs`: creating, removing and finding enablement links; `is-enabled`.
//! - `preset.rs`: preset files and rules, `fnmatch` globbing.

use crate::fs::Root;

mod error;
mod install;
mod links;
mod lookup;
mod name;
mod preset;
#[cfg(test)]
mod tests;

pub use error::OfflineError;
pub use lookup::CONFIG_DIR;

use lookup::{join, Ctx};
use name::validate;
use preset::{query_presets, read_presets};
use std::collections::HashSet;

// ---------------------------------------------------------------------------------------------
// The public operations
// ---------------------------------------------------------------------------------------------

/// `systemctl --root=ROOT enable --force UNIT`: creates the `[Install]` symlinks (see the module
/// documentation).
pub fn enable(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let info = ctx.discover("enable", unit)?;
    if info.masked {
        return Err(OfflineError::Masked {
            unit: unit.to_string(),
            path: info.path,
        });
    }
    ctx.enable_all("enable", info, false)
}

/// `systemctl --root=ROOT disable UNIT`: removes the symlinks in `/etc/systemd/system` that
/// enable the unit (and its `Also=` units). A unit that does not exist is not an error (links
/// named like it are removed), as with systemctl.
pub fn disable(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    // As systemctl: a unit without a unit file is not an error; links named like it still go.
    match ctx.search("disable", unit) {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::warn!("disable: unit {unit} does not exist; removing links named like it")
        }
        Err(e) => tracing::warn!("disable: {e}; removing links named like {unit}"),
    }
    ctx.disable_names("disable", vec![unit.to_string()])
}

/// `systemctl --root=ROOT mask --force UNIT`: `/etc/systemd/system/UNIT -> /dev/null`.
/// A regular file there is an error ([`OfflineError::Exists`]), never overwritten.
pub fn mask(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    ctx.create_symlink("/dev/null", &join(CONFIG_DIR, unit))
}

/// `systemctl --root=ROOT unmask UNIT`: removes `/etc/systemd/system/UNIT` if it masks the unit.
pub fn unmask(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let path = join(CONFIG_DIR, unit);
    if ctx.null_or_empty(&path)? != Some(true) {
        return Ok(());
    }
    if root.remove(&ctx.resolve_parent(&path)?)? {
        tracing::info!("removed {path}");
    }
    let mut marks = HashSet::from([path]);
    ctx.remove_marked_symlinks(&mut marks)
}

/// `systemctl --root=ROOT preset --force UNIT`: enables or disables the unit as the preset files
/// say (enables it when no line matches).
pub fn preset(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let rules = read_presets(&ctx)?;
    let info = ctx.discover("preset", unit)?;
    if info.name != unit {
        tracing::info!("preset: skipping {unit}: it is an alias of {}", info.name);
        return Ok(());
    }
    let (enable, instances) = query_presets(unit, &rules);
    tracing::info!(
        "preset: {} {unit}",
        if enable { "enabling" } else { "disabling" }
    );
    if !enable {
        return ctx.disable_names("preset", vec![unit.to_string()]);
    }
    let names = instances.unwrap_or_else(|| vec![unit.to_string()]);
    for name in names {
        let info = ctx.discover("preset", &name)?;
        if info.masked {
            return Err(OfflineError::Masked {
                unit: name,
                path: info.path,
            });
        }
        ctx.enable_all("preset", info, true)?;
    }
    Ok(())
}

/// `systemctl --root=ROOT is-enabled UNIT`: `enabled`, `disabled`, `masked`, `static`,
/// `indirect`, `alias`, `linked`, `enabled-runtime`, ... ([`OfflineError::NoSuchUnit`] when there
/// is no unit file).
pub fn is_enabled(root: &Root, unit: &str) -> Result<String, OfflineError> {
    validate(unit)?;
    Ctx::new(root)?.state(unit)
}
