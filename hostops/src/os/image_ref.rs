//! OS images on the libostree backend: an ostree ref or a commit checksum ([`ImageRef`]), and
//! the grammar of ostree refs.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::OsError;

/// An OS image on the libostree backend: an ostree ref or a commit checksum.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageRef {
    /// A ref (`hearth/debian/v2`), pulled from the configured remote.
    Ref(String),
    /// A commit checksum (64 hex digits).
    Commit(String),
}

impl ImageRef {
    /// Parses an `osImageURL` for the libostree backend.
    pub fn parse(image: &str) -> Result<ImageRef, OsError> {
        let image = image.trim();
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(ImageRef::Commit(image.to_ascii_lowercase()));
        }
        if is_valid_ref(image) {
            return Ok(ImageRef::Ref(image.to_string()));
        }
        let looks_like_container = image.contains('@')
            || image.contains("://")
            || image
                .split_once(':')
                .is_some_and(|(host, _)| host.contains('/') || host.contains('.'));
        let why = if looks_like_container {
            "it looks like a container image reference; those need the rpm-ostree backend"
        } else if image.contains(':') {
            "name the remote in /etc/hearth/os.json (\"remote\"), not in the image"
        } else {
            "expected an ostree ref (like hearth/debian/v2) or a 64-digit commit checksum"
        };
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed on an ostree host: {why}"
        )))
    }

    /// The ref or checksum.
    pub fn as_str(&self) -> &str {
        match self {
            ImageRef::Ref(r) | ImageRef::Commit(r) => r,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Ref(r) => write!(f, "ref {r}"),
            ImageRef::Commit(c) => write!(f, "commit {c}"),
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
        let e = ImageRef::parse("quay.io/openshift/rhcos@sha256:0123").unwrap_err();
        assert!(e.to_string().contains("rpm-ostree"), "{e}");
        let e = ImageRef::parse("hearth:hearth/debian/v2").unwrap_err();
        assert!(e.to_string().contains("remote"), "{e}");
        assert!(ImageRef::parse("").is_err());
        assert!(ImageRef::parse("a//b").is_err());
    }
}
