//! Container image references as `osImageURL` carries them ([`ContainerImage`]): an image in a
//! registry (`registry.example:5000/os/rhcos@sha256:…`, as the MCO writes it since OpenShift
//! 4.12), an OCI layout directory (`oci:/media/os:v2`) or an OCI archive
//! (`oci-archive:/media/os.tar`), also written with the transports of ostree-ext and rpm-ostree
//! (`ostree-unverified-registry:…`, `ostree-image-signed:docker://…`, `docker://…`).
//!
//! The grammar of a registry reference is the one of `containers/image`'s `docker/reference`
//! (a domain with a `.` or a port, or `localhost`; lower-case path components; a tag; a
//! digest), written here so that the agent, which links no container library, parses exactly
//! what skopeo will accept.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::digest::{is_sha256_digest, SHA256};

/// The annotation in which hearth-server records what a MachineConfig's tagged `osImageURL`
/// resolved to when the config was applied: the reference pinned to the manifest's digest
/// (`registry/repo:tag@sha256:…`). Rendering deploys that ([`effective_os_image`]), so that
/// every node of a pool gets the same digest however the tag moves later.
pub const RESOLVED_ANNOTATION: &str = "hearth.io/resolved-os-image";

/// The `osImageURL` a MachineConfig deploys: `spec_url`, or, when its annotations carry
/// [`RESOLVED_ANNOTATION`] for that very reference (the annotation without its digest is
/// `spec_url`) with a valid digest, the pinned reference.
pub fn effective_os_image<'a>(
    spec_url: &'a str,
    annotations: &'a std::collections::BTreeMap<String, String>,
) -> &'a str {
    let Some(resolved) = annotations.get(RESOLVED_ANNOTATION) else {
        return spec_url;
    };
    let matches = resolved
        .rsplit_once('@')
        .is_some_and(|(name, digest)| name == spec_url.trim() && is_sha256_digest(digest));
    if matches {
        resolved
    } else {
        spec_url
    }
}

/// The longest reference accepted (the registry grammar's own limit is 255 for the name).
pub const MAX_REFERENCE_LEN: usize = 1024;

/// Where a container image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    /// A registry (`docker://` in skopeo's words).
    Registry,
    /// An OCI image layout directory on the node (`oci:PATH[:REF]`).
    Oci,
    /// An OCI image layout in a tar archive on the node (`oci-archive:PATH[:REF]`).
    OciArchive,
}

/// How the image's signature is to be verified, as the reference's ostree-ext transport says
/// (`ostree-unverified-registry:`, `ostree-image-signed:`, `ostree-remote-image:REMOTE:`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SigVerify {
    /// As the containers policy (`policy.json`) says, whatever its default: what a reference
    /// without an ostree-ext transport means, and what the MCO writes.
    #[default]
    Unverified,
    /// `ostree-image-signed:`: the containers policy, and a default that accepts anything is
    /// refused (ostree-ext's rule).
    ContainerPolicy,
    /// `ostree-remote-image:REMOTE:` / `ostree-remote-registry:REMOTE:`: the ostree remote's
    /// GPG keys (rpm-ostree does this; the libostree backend refuses it).
    OstreeRemote(String),
}

/// A container image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerImage {
    /// The transport.
    pub transport: Transport,
    /// `registry/repo[:tag][@sha256:…]` for a registry, `PATH[:REF]` for the OCI transports.
    pub name: String,
    /// How its signature is verified.
    #[serde(default)]
    pub sigverify: SigVerify,
}

impl ContainerImage {
    /// Parses a container image reference; `None` when `image` is not one (it may then be an
    /// ostree ref or checksum), `Some(Err(why))` when it is one, but malformed.
    pub fn parse(image: &str) -> Option<Result<ContainerImage, String>> {
        let image = image.trim();
        let (sigverify, transport, rest) = strip_transport(image)?;
        if image.len() > MAX_REFERENCE_LEN {
            return Some(Err(format!(
                "the reference is longer than {MAX_REFERENCE_LEN} characters"
            )));
        }
        Some(match transport {
            Transport::Registry => check_registry_reference(rest).map(|()| ContainerImage {
                transport,
                name: rest.to_string(),
                sigverify,
            }),
            Transport::Oci | Transport::OciArchive => {
                let path = rest.split_once(':').map_or(rest, |(p, _)| p);
                if !path.starts_with('/') {
                    Err(format!("{path:?} is not an absolute path"))
                } else if rest.chars().any(|c| c.is_control()) {
                    Err("the path has control characters".into())
                } else {
                    Ok(ContainerImage {
                        transport,
                        name: rest.to_string(),
                        sigverify,
                    })
                }
            }
        })
    }

    /// The digest the reference pins (`sha256:…`), if any (registry references only).
    pub fn digest(&self) -> Option<&str> {
        match self.transport {
            Transport::Registry => self.name.split_once('@').map(|(_, d)| d),
            Transport::Oci | Transport::OciArchive => None,
        }
    }

    /// Whether the reference names a registry image by tag only (no digest): what hearth-server
    /// resolves to a digest when the config is applied.
    pub fn is_tag_only(&self) -> bool {
        self.transport == Transport::Registry && self.digest().is_none()
    }

    /// The registry's host (and port) of a registry reference.
    pub fn registry(&self) -> Option<&str> {
        match self.transport {
            Transport::Registry => self.name.split('/').next(),
            Transport::Oci | Transport::OciArchive => None,
        }
    }

    /// The reference as skopeo takes it (`docker://…`, `oci:…`, `oci-archive:…`).
    pub fn skopeo(&self) -> String {
        match self.transport {
            Transport::Registry => format!("docker://{}", self.name),
            Transport::Oci => format!("oci:{}", self.name),
            Transport::OciArchive => format!("oci-archive:{}", self.name),
        }
    }

    /// The reference as ostree-ext and rpm-ostree take it and record it in a deployment's
    /// origin, with its signature source (`ostree-unverified-registry:…`,
    /// `ostree-image-signed:docker://…`, `ostree-remote-image:REMOTE:docker://…`,
    /// `ostree-unverified-image:oci:…`).
    pub fn ostree_ext(&self) -> String {
        match (&self.sigverify, self.transport) {
            (SigVerify::Unverified, Transport::Registry) => {
                format!("ostree-unverified-registry:{}", self.name)
            }
            (SigVerify::Unverified, _) => format!("ostree-unverified-image:{}", self.skopeo()),
            (SigVerify::ContainerPolicy, _) => format!("ostree-image-signed:{}", self.skopeo()),
            (SigVerify::OstreeRemote(remote), _) => {
                format!("ostree-remote-image:{remote}:{}", self.skopeo())
            }
        }
    }

    /// The same image pinned to `digest` (registry references; others are returned as they are).
    pub fn with_digest(&self, digest: &str) -> ContainerImage {
        match self.transport {
            Transport::Registry => {
                let repo = self.repository();
                ContainerImage {
                    transport: self.transport,
                    name: format!("{repo}@{digest}"),
                    sigverify: self.sigverify.clone(),
                }
            }
            Transport::Oci | Transport::OciArchive => self.clone(),
        }
    }

    /// A registry reference without its tag and digest (`registry/repo`).
    pub fn repository(&self) -> &str {
        let name = self
            .name
            .split_once('@')
            .map_or(self.name.as_str(), |(n, _)| n);
        match name.rfind(':') {
            Some(i) if !name[i..].contains('/') => &name[..i],
            _ => name,
        }
    }
}

impl fmt::Display for ContainerImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transport {
            Transport::Registry => f.write_str(&self.name),
            Transport::Oci | Transport::OciArchive => f.write_str(&self.skopeo()),
        }
    }
}

/// The signature source, the transport of `image` and the rest, or `None` when it is not a
/// container reference.
fn strip_transport(image: &str) -> Option<(SigVerify, Transport, &str)> {
    if let Some(rest) = image.strip_prefix("ostree-unverified-registry:") {
        return Some((SigVerify::Unverified, Transport::Registry, rest));
    }
    if let Some(rest) = image.strip_prefix("ostree-remote-registry:") {
        let (remote, rest) = rest.split_once(':').unwrap_or(("", rest));
        return Some((
            SigVerify::OstreeRemote(remote.into()),
            Transport::Registry,
            rest,
        ));
    }
    let wrapped = if let Some(rest) = image.strip_prefix("ostree-unverified-image:") {
        Some((SigVerify::Unverified, rest))
    } else if let Some(rest) = image.strip_prefix("ostree-image-signed:") {
        Some((SigVerify::ContainerPolicy, rest))
    } else if let Some(rest) = image.strip_prefix("ostree-remote-image:") {
        let (remote, rest) = rest.split_once(':').unwrap_or(("", rest));
        Some((SigVerify::OstreeRemote(remote.into()), rest))
    } else {
        None
    };
    if let Some((sigverify, rest)) = wrapped {
        // The image inside names its transport (`docker://`, `registry:`, `oci:`, ...).
        return Some(match image_transport(rest) {
            Some((transport, name)) => (sigverify, transport, name),
            None => (sigverify, Transport::Registry, rest),
        });
    }
    if let Some((transport, rest)) = image_transport(image) {
        return Some((SigVerify::Unverified, transport, rest));
    }
    // A bare reference: a registry host first (`host.domain`, `host:PORT` or `localhost`) and a
    // tag or a digest, or a port. Without a tag, a digest or a port it is left to the ostree
    // grammar: `fedora.example/os/x86_64` is an ostree ref there, as it always was.
    let (first, path) = image.split_once('/')?;
    let (host, port) = match first.split_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, true),
        Some(_) => return None, // `remote:ref`
        None => (first, false),
    };
    let domain = host.contains('.') || port || host == "localhost";
    let pinned = path.contains(':') || path.contains('@');
    (domain && (pinned || port)).then_some((SigVerify::Unverified, Transport::Registry, image))
}

/// An image's own transport prefix (`docker://`, `registry:`, `oci:`, `oci-archive:`).
fn image_transport(image: &str) -> Option<(Transport, &str)> {
    [
        ("docker://", Transport::Registry),
        ("registry:", Transport::Registry),
        ("oci-archive:", Transport::OciArchive),
        ("oci:", Transport::Oci),
    ]
    .into_iter()
    .find_map(|(prefix, t)| image.strip_prefix(prefix).map(|rest| (t, rest)))
}

/// Checks `name` against the registry reference grammar: `DOMAIN/PATH[:TAG][@DIGEST]`.
fn check_registry_reference(name: &str) -> Result<(), String> {
    let (rest, digest) = match name.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (name, None),
    };
    let (domain, path) = rest
        .split_once('/')
        .ok_or_else(|| format!("{name:?} names no registry (expected registry/repository)"))?;
    let host_ok = |h: &str| {
        !h.is_empty()
            && h.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    let domain_ok = match domain.rsplit_once(':') {
        Some((host, port)) => {
            host_ok(host) && !port.is_empty() && port.len() <= 5 && port.parse::<u16>().is_ok()
        }
        None => host_ok(domain),
    } || (domain.starts_with('[') && domain.contains(']'));
    if !domain_ok || !(domain.contains('.') || domain.contains(':') || domain == "localhost") {
        return Err(format!(
            "{domain:?} is not a registry host (expected a name with a '.', a port, or \
             localhost)"
        ));
    }
    let (path, tag) = match path.rsplit_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (path, None),
    };
    let component_ok = |c: &str| {
        // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
        !c.is_empty()
            && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
            && !c.contains("..")
            && !c.contains("___")
    };
    if path.len() > 255 || !path.split('/').all(component_ok) {
        return Err(format!(
            "repository {path:?} is not valid (lower-case letters, digits and separators . _ -)"
        ));
    }
    if let Some(tag) = tag {
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !ok {
            return Err(format!("tag {tag:?} is not valid"));
        }
    }
    if let Some(digest) = digest {
        if !is_sha256_digest(digest) {
            return Err(format!(
                "digest {digest:?} is not valid (expected sha256: and 64 lower-case hex digits)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> ContainerImage {
        ContainerImage::parse(s).unwrap().unwrap()
    }

    fn bad(s: &str) -> String {
        ContainerImage::parse(s).unwrap().unwrap_err()
    }

    #[test]
    fn references_as_the_mco_and_ostree_ext_write_them() {
        let d = format!("sha256:{}", "0a".repeat(32));
        let mco = format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{d}");
        let i = ok(&mco);
        assert_eq!(
            (i.transport, i.name.as_str()),
            (Transport::Registry, mco.as_str())
        );
        assert_eq!(i.digest(), Some(d.as_str()));
        assert_eq!(i.registry(), Some("quay.io"));
        assert_eq!(
            i.repository(),
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
        );
        assert_eq!(i.skopeo(), format!("docker://{mco}"));
        assert_eq!(i.ostree_ext(), format!("ostree-unverified-registry:{mco}"));
        for wrapped in [
            format!("ostree-unverified-registry:{mco}"),
            format!("ostree-unverified-image:docker://{mco}"),
            format!("docker://{mco}"),
        ] {
            assert_eq!(ok(&wrapped), i, "{wrapped}");
        }
        // The signature source is kept, and written back as it came.
        let signed = ok(&format!("ostree-image-signed:docker://{mco}"));
        assert_eq!(signed.sigverify, SigVerify::ContainerPolicy);
        assert_eq!(
            signed.ostree_ext(),
            format!("ostree-image-signed:docker://{mco}")
        );
        for remote in [
            format!("ostree-remote-image:fedora:docker://{mco}"),
            format!("ostree-remote-registry:fedora:{mco}"),
        ] {
            let r = ok(&remote);
            assert_eq!(
                r.sigverify,
                SigVerify::OstreeRemote("fedora".into()),
                "{remote}"
            );
            assert_eq!(r.name, mco);
            assert_eq!(
                r.ostree_ext(),
                format!("ostree-remote-image:fedora:docker://{mco}")
            );
        }
        assert_eq!(
            signed.with_digest(&d).sigverify,
            SigVerify::ContainerPolicy,
            "pinning keeps the signature source"
        );
        let tagged = ok("registry.example:5000/os/rhcos:4.16");
        assert_eq!(tagged.digest(), None);
        assert_eq!(tagged.repository(), "registry.example:5000/os/rhcos");
        assert_eq!(
            tagged.with_digest(&d).name,
            format!("registry.example:5000/os/rhcos@{d}")
        );
        assert_eq!(ok("localhost/os:v1").registry(), Some("localhost"));
        let oci = ok("oci:/media/os:v2");
        assert_eq!(
            (oci.transport, oci.name.as_str()),
            (Transport::Oci, "/media/os:v2")
        );
        assert_eq!(oci.to_string(), "oci:/media/os:v2");
        assert_eq!(oci.ostree_ext(), "ostree-unverified-image:oci:/media/os:v2");
        assert_eq!(
            ok("oci-archive:/media/os.tar").transport,
            Transport::OciArchive
        );
        assert_eq!(
            ok("ostree-unverified-image:oci-archive:/m/os.tar").transport,
            Transport::OciArchive
        );
    }

    #[test]
    fn a_resolved_tag_is_deployed_pinned_while_the_annotation_names_it() {
        let digest = format!("sha256:{}", "5a".repeat(32));
        let pinned = format!("registry.example/os:v2@{digest}");
        let mut ann = std::collections::BTreeMap::new();
        assert_eq!(
            effective_os_image("registry.example/os:v2", &ann),
            "registry.example/os:v2"
        );
        ann.insert(RESOLVED_ANNOTATION.to_string(), pinned.clone());
        assert_eq!(effective_os_image("registry.example/os:v2", &ann), pinned);
        // The spec moved on (another tag) without a new resolution: the spec wins.
        assert_eq!(
            effective_os_image("registry.example/os:v3", &ann),
            "registry.example/os:v3"
        );
        ann.insert(
            RESOLVED_ANNOTATION.to_string(),
            "registry.example/os:v2@sha256:00".into(),
        );
        assert_eq!(
            effective_os_image("registry.example/os:v2", &ann),
            "registry.example/os:v2"
        );
        assert!(ok("registry.example/os:v2").is_tag_only());
        assert!(!ok(&pinned).is_tag_only());
        assert!(!ok("oci:/media/os").is_tag_only());
        // A pinned reference with its tag reads back as the same image, asked for by digest.
        assert_eq!(
            ok(&pinned).with_digest(&digest).name,
            format!("registry.example/os@{digest}")
        );
    }

    #[test]
    fn ostree_refs_are_not_container_references() {
        for r in [
            "hearth/debian/v2",
            "fedora/x86_64/coreos/stable",
            &"a".repeat(64),
        ] {
            assert!(ContainerImage::parse(r).is_none(), "{r}");
        }
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        assert!(bad("quay.io/Upper/case@sha256:00").contains("repository"));
        assert!(bad("quay.io/os@sha256:00").contains("digest"));
        let sha512 = format!("quay.io/os@sha512:{}", "0".repeat(128));
        assert!(bad(&sha512).contains("expected sha256"));
        assert!(bad("quay.io/os:bad tag").contains("tag"));
        assert!(bad("docker://os").contains("names no registry"));
        assert!(bad("docker://notahost/os").contains("registry host"));
        assert!(bad("quay.io/os:bad:tag").contains("not valid"));
        assert!(bad("oci:relative/dir").contains("absolute"));
        assert!(bad(&format!("quay.io/{}:v1", "a".repeat(2000))).contains("longer"));
    }
}
