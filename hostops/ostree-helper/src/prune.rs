//! Pruning after a new deployment: the container images no deployment uses go from the
//! sysroot's repository (ostree-ext's image refs, its layer garbage collection, then libostree's
//! cleanup) and from the node's OCI layout (index entries and blobs no kept manifest names).

use std::collections::HashSet;

use ostree_ext::container as oc;
use tracing::{info, warn};

use crate::oci_layout::Layout;
use crate::session::{none, Session, ORIGIN_CONTAINER, ORIGIN_GROUP, ORIGIN_IMAGE_DIGEST};
use hearth_hostops::os::paths::IMAGE_CACHE;
use hearth_hostops::os::OsError;

impl Session {
    /// Whether the repository or the node's layout holds container images (pruning has
    /// something to do).
    pub(crate) fn has_container_images(&self) -> bool {
        Layout::new(&self.root, IMAGE_CACHE).dir().exists()
            || oc::store::list_images(&self.repo).is_ok_and(|l| !l.is_empty())
    }

    /// Removes the images and layers no deployment uses from the repository and the node's
    /// layout (after a new deployment was written: the booted, the new and the rollback
    /// deployments' images stay).
    pub(crate) fn prune_images(&self) -> Result<(), OsError> {
        let deployed: HashSet<String> = self
            .sysroot
            .deployments()
            .iter()
            .filter_map(|d| d.origin())
            .filter_map(|o| o.string("origin", ORIGIN_CONTAINER).ok())
            .filter_map(|s| oc::OstreeImageReference::try_from(s.as_str()).ok())
            .map(|r| r.imgref.to_string())
            .collect();
        let images = oc::store::list_images(&self.repo).map_err(|e| {
            OsError::ostree("listing container images".to_string(), format!("{e:#}"))
        })?;
        for name in images {
            if deployed.contains(&name) {
                continue;
            }
            let Ok(imgref) = oc::ImageReference::try_from(name.as_str()) else {
                continue;
            };
            match oc::store::remove_image(&self.repo, &imgref) {
                Ok(_) => info!(image = %name, "removed a container image no deployment uses"),
                Err(e) => warn!(image = %name, "removing a container image: {e:#}"),
            }
        }
        let layers = oc::store::gc_image_layers(&self.repo).map_err(|e| {
            OsError::ostree(
                "pruning container image layers".to_string(),
                format!("{e:#}"),
            )
        })?;
        // libostree's cleanup: unreachable objects go, the deployments' commits (the staged
        // one's included) stay, as after `ostree admin cleanup`.
        self.sysroot
            .cleanup(none())
            .map_err(|e| OsError::ostree("pruning the repository".to_string(), e))?;
        info!(layers, "pruned the repository");
        let keep: HashSet<String> = self
            .sysroot
            .deployments()
            .iter()
            .filter_map(|d| d.origin())
            .filter_map(|o| o.string(ORIGIN_GROUP, ORIGIN_IMAGE_DIGEST).ok())
            .map(|s| s.to_string())
            .collect();
        let freed = Layout::new(&self.root, IMAGE_CACHE).collect_garbage(&keep)?;
        info!(
            freed,
            "removed from the image layout what no deployment uses"
        );
        Ok(())
    }
}
