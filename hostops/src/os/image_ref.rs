//! OS images on the libostree backend: an ostree ref, a commit checksum or a container image
//! ([`ImageRef`]), and the grammar of ostree refs.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::OsError;
use hearth_config::container::ContainerImage;

/// An OS image on the libostree backend: an ostree ref, a commit checksum or a container image.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageRef {
    /// A ref (`hearth/debian/v2`), pulled from the configured remote.
    Ref(String),
    /// A commit checksum (64 hex digits).
    Commit(String),
    /// An ostree-native container image (`registry.example/os@sha256:…`, `oci:/media/os`).
    Container(ContainerImage),
}

impl ImageRef {
    /// Parses an `osImageURL` for the libostree backend.
    pub fn parse(image: &str) -> Result<ImageRef, OsError> {
        let image = image.trim();
        if let Some(container) = ContainerImage::parse(image) {
            return container.map(ImageRef::Container).map_err(|why| {
                OsError::InvalidChange(format!(
                    "OS image {image:?} is not a valid container image reference: {why}"
                ))
            });
        }
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(ImageRef::Commit(image.to_ascii_lowercase()));
        }
        if is_valid_ref(image) {
            return Ok(ImageRef::Ref(image.to_string()));
        }
        let why = if image.contains(':') {
            "name the remote in /etc/hearth/os.json (\"remote\"), not in the image"
        } else {
            "expected an ostree ref (like hearth/debian/v2), a 64-digit commit checksum or a \
             container image (registry.example/os@sha256:...)"
        };
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed on an ostree host: {why}"
        )))
    }

    /// The image as `osImageURL` names it: the ref, the checksum, or the container reference
    /// (with its transport unless it is a registry).
    pub fn image(&self) -> String {
        match self {
            ImageRef::Ref(r) | ImageRef::Commit(r) => r.clone(),
            ImageRef::Container(c) => c.to_string(),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Ref(r) => write!(f, "ref {r}"),
            ImageRef::Commit(c) => write!(f, "commit {c}"),
            ImageRef::Container(c) => write!(f, "container image {c}"),
        }
    }
}

/// Whether `r` is a valid ostree ref: `[\w][-._\w]*(/[\w][-._\w]*)*`.
pub fn is_valid_ref(r: &str) -> bool {
    !r.is_empty()
        && r.split('/').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse() {
        assert_eq!(
            ImageRef::parse("hearth/debian/v2").unwrap(),
            ImageRef::Ref("hearth/debian/v2".into())
        );
        let csum = "a".repeat(64);
        assert_eq!(ImageRef::parse(&csum).unwrap(), ImageRef::Commit(csum));
        let digest = format!("sha256:{}", "1f".repeat(32));
        let rhcos = format!("quay.io/openshift/rhcos@{digest}");
        match ImageRef::parse(&rhcos).unwrap() {
            ImageRef::Container(c) => assert_eq!(c.digest(), Some(digest.as_str())),
            other => panic!("{other:?}"),
        }
        let e = ImageRef::parse("quay.io/openshift/rhcos@sha256:0123").unwrap_err();
        assert!(e.to_string().contains("digest"), "{e}");
        let e = ImageRef::parse("hearth:hearth/debian/v2").unwrap_err();
        assert!(e.to_string().contains("remote"), "{e}");
        assert!(ImageRef::parse("").is_err());
        assert!(ImageRef::parse("a//b").is_err());
    }
}
