//! Paths inside the root a backend works on (shared with `hearth-ostree-helper`).

use std::path::{Path, PathBuf};

/// The root as a display string.
pub fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `root` joined with an absolute path inside it.
pub fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Where the libostree backend keeps the container images it pulled, as an OCI image layout:
/// the layers of the images it keeps deployed (so that an update fetches only the layers that
/// changed, and a pull stopped midway resumes with the layers it has), verified under the
/// containers policy before ostree-ext imports them (docs/os-layer.md, "Container images").
pub const IMAGE_CACHE: &str = "/var/lib/hearth/os-images";

/// The containers signature policy a pull is checked against (`containers-policy.json(5)`).
pub const CONTAINERS_POLICY: &str = "/etc/containers/policy.json";

/// The registries configuration: mirrors, blocked and insecure registries
/// (`containers-registries.conf(5)`).
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// Where the signatures of a registry are looked up (`containers-registries.d(5)`).
pub const REGISTRIES_D: &str = "/etc/containers/registries.d";

/// The registries' CA certificates and client certificates, one directory per `host[:port]`
/// (`containers-certs.d(5)`).
pub const CERTS_D: &str = "/etc/containers/certs.d";

/// The pull secret, first found wins: the files ostree-ext and rpm-ostree read
/// (`/run` for a secret that must not persist across reboots).
pub const AUTH_FILES: [&str; 3] = [
    "/run/ostree/auth.json",
    "/etc/ostree/auth.json",
    "/usr/lib/ostree/auth.json",
];
