//! OS images as rpm-ostree takes them ([`RpmOstreeImage`]): container image references,
//! ostree refspecs and commit checksums.

use crate::os::error::OsError;
use crate::os::image_ref::is_valid_ref;

/// The transport prefix hearth gives a container image reference (as the MCO does).
pub const CONTAINER_TRANSPORT: &str = "ostree-unverified-registry:";

/// An OS image as rpm-ostree takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpmOstreeImage {
    /// A container image: the refspec with its transport (`ostree-unverified-registry:...`).
    Container(String),
    /// An ostree refspec (`fedora:fedora/x86_64/coreos/stable`).
    Refspec(String),
    /// A commit checksum (`set-revision`).
    Commit(String),
}

impl RpmOstreeImage {
    /// Parses an `osImageURL`: a container image reference (`quay.io/...@sha256:...`, or one
    /// that already names its transport, `ostree-unverified-registry:...`), a 64-digit commit
    /// checksum, or an ostree refspec.
    pub fn parse(image: &str) -> Result<RpmOstreeImage, OsError> {
        let image = image.trim();
        if image.is_empty() {
            return Err(OsError::InvalidChange(
                "OS image \"\": expected a container image reference, an ostree refspec or a \
                 commit checksum"
                    .into(),
            ));
        }
        if image.starts_with("ostree-") && container_image(image).is_some() {
            return Ok(RpmOstreeImage::Container(image.to_string()));
        }
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(RpmOstreeImage::Commit(image.to_ascii_lowercase()));
        }
        let (remote, reference) = match image.split_once(':') {
            Some((r, rest)) if !r.contains('/') && !r.contains('.') => (Some(r), rest),
            _ => (None, image),
        };
        if is_valid_ref(reference) && remote.is_none_or(|r| !r.is_empty() && is_valid_ref(r)) {
            return Ok(RpmOstreeImage::Refspec(image.to_string()));
        }
        let first = image.split('/').next().unwrap_or_default();
        let registry = first.contains('.') || first.contains(':') || first == "localhost";
        let tagged = image
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'));
        let looks_like_container = image.contains('/')
            && (registry || tagged || image.contains("@sha256:"))
            && image
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "./:@_-".contains(c));
        if looks_like_container {
            return Ok(RpmOstreeImage::Container(format!(
                "{CONTAINER_TRANSPORT}{image}"
            )));
        }
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed by rpm-ostree: expected a container image \
             reference (registry/name@sha256:...), an ostree refspec (remote:ref) or a 64-digit \
             commit checksum"
        )))
    }

    /// The `osImageURL` form (without a container transport).
    pub fn image(&self) -> String {
        match self {
            RpmOstreeImage::Container(r) => container_image(r).unwrap_or(r).to_string(),
            RpmOstreeImage::Refspec(r) | RpmOstreeImage::Commit(r) => r.clone(),
        }
    }
}

/// The image reference inside a container refspec (`ostree-unverified-registry:IMG`,
/// `ostree-remote-registry:REMOTE:IMG`, `ostree-unverified-image:docker://IMG`, ...).
pub fn container_image(refspec: &str) -> Option<&str> {
    for prefix in [
        "ostree-unverified-registry:",
        "ostree-unverified-image:docker://",
        "ostree-image-signed:docker://",
    ] {
        if let Some(rest) = refspec.strip_prefix(prefix) {
            return Some(rest);
        }
    }
    for prefix in ["ostree-remote-registry:", "ostree-remote-image:"] {
        if let Some(rest) = refspec.strip_prefix(prefix) {
            let (_, img) = rest.split_once(':')?;
            return Some(img.strip_prefix("docker://").unwrap_or(img));
        }
    }
    None
}

/// The refspec (or checksum) rpm-ostree is given for an image.
pub(super) fn refspec_of(image: &RpmOstreeImage) -> &str {
    match image {
        RpmOstreeImage::Container(r) | RpmOstreeImage::Refspec(r) | RpmOstreeImage::Commit(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse() {
        let c = RpmOstreeImage::parse("quay.io/openshift/rhcos@sha256:0123abcd").unwrap();
        assert_eq!(
            c,
            RpmOstreeImage::Container(
                "ostree-unverified-registry:quay.io/openshift/rhcos@sha256:0123abcd".into()
            )
        );
        assert_eq!(c.image(), "quay.io/openshift/rhcos@sha256:0123abcd");
        assert_eq!(
            RpmOstreeImage::parse("registry.example:5000/os/rhcos:4.16").unwrap(),
            RpmOstreeImage::Container(
                "ostree-unverified-registry:registry.example:5000/os/rhcos:4.16".into()
            )
        );
        assert_eq!(
            RpmOstreeImage::parse("ostree-remote-registry:fedora:quay.io/fedora/fcos:stable")
                .unwrap()
                .image(),
            "quay.io/fedora/fcos:stable"
        );
        assert_eq!(
            RpmOstreeImage::parse("fedora:fedora/x86_64/coreos/stable").unwrap(),
            RpmOstreeImage::Refspec("fedora:fedora/x86_64/coreos/stable".into())
        );
        let csum = "A".repeat(64);
        assert_eq!(
            RpmOstreeImage::parse(&csum).unwrap(),
            RpmOstreeImage::Commit("a".repeat(64))
        );
        for bad in ["", "not an image", "a:b:c d"] {
            let e = RpmOstreeImage::parse(bad).unwrap_err().to_string();
            assert!(e.contains("OS image"), "{bad}: {e}");
        }
    }
}
