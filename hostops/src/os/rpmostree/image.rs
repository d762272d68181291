//! OS images as rpm-ostree takes them ([`RpmOstreeImage`]): container image references,
//! ostree refspecs and commit checksums.

use crate::os::error::OsError;
use crate::os::image_ref::is_valid_ref;
use hearth_config::container::ContainerImage;

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
        if let Some(container) = ContainerImage::parse(image) {
            return container
                .map(|c| RpmOstreeImage::Container(c.ostree_ext()))
                .map_err(|why| {
                    OsError::InvalidChange(format!(
                        "OS image {image:?} is not a valid container image reference: {why}"
                    ))
                });
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
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed by rpm-ostree: expected a container image \
             reference (registry/name@sha256:...), an ostree refspec (remote:ref) or a 64-digit \
             commit checksum"
        )))
    }

    /// The `osImageURL` form (without a container transport).
    pub fn image(&self) -> String {
        match self {
            RpmOstreeImage::Container(r) => container_image(r).unwrap_or_else(|| r.clone()),
            RpmOstreeImage::Refspec(r) | RpmOstreeImage::Commit(r) => r.clone(),
        }
    }
}

/// The image reference inside a container refspec (`ostree-unverified-registry:IMG`,
/// `ostree-remote-registry:REMOTE:IMG`, `ostree-unverified-image:docker://IMG`, ...), as
/// `osImageURL` names it.
pub fn container_image(refspec: &str) -> Option<String> {
    ContainerImage::parse(refspec)?.ok().map(|c| c.to_string())
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
        let rhcos = format!("quay.io/openshift/rhcos@sha256:{}", "0123abcd".repeat(8));
        let c = RpmOstreeImage::parse(&rhcos).unwrap();
        assert_eq!(
            c,
            RpmOstreeImage::Container(format!("ostree-unverified-registry:{rhcos}"))
        );
        assert_eq!(c.image(), rhcos);
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
