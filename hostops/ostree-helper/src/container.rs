//! Container images on the libostree backend: the manifest for this node (a manifest list
//! resolved to its platform's instance), the space its missing layers need, the copy into the
//! node's OCI layout under the containers signature policy (skopeo.rs), the import into the
//! sysroot's repository with ostree-ext (layered images included), and pruning what no
//! deployment uses any more.
//!
//! The imported image is recorded under its pinned reference (`registry/repo@sha256:…`), as
//! ostree-ext and rpm-ostree record the images they deploy, so that `rpm-ostree status` and
//! `bootc status` read the same origin.

use std::collections::HashSet;
use std::path::Path;

use ostree_ext::container as oc;
use sha2::{Digest as _, Sha256};
use tracing::{debug, info, warn};

use crate::fetch::Fetched;
use crate::oci_layout::{go_arch, parse_manifest, Blob, Layout, Parsed};
use crate::session::{none, Session};
use crate::skopeo::Skopeo;
use crate::space::{free_space, space_ok};
use hearth_hostops::os::paths::{display, inside, IMAGE_CACHE};
use hearth_hostops::os::{human_bytes, ContainerImage, OsConfig, OsError, SpaceCheck, Transport};

/// The origin key in which ostree-ext and rpm-ostree record a deployment's container image.
pub(crate) const ORIGIN_CONTAINER: &str = oc::deploy::ORIGIN_CONTAINER;

/// The manifest this node deploys from an image reference.
struct Resolved {
    /// What skopeo copies (`docker://repo@sha256:instance`, `oci:…`).
    source: String,
    /// The image manifest's digest (of the platform's instance, for a list).
    digest: String,
    /// Its config and layers.
    blobs: Vec<Blob>,
}

/// The reference ostree-ext records the image under.
pub(crate) fn recorded(image: &ContainerImage) -> oc::OstreeImageReference {
    let transport = match image.transport {
        Transport::Registry => oc::Transport::Registry,
        Transport::Oci => oc::Transport::OciDir,
        Transport::OciArchive => oc::Transport::OciArchive,
    };
    oc::OstreeImageReference {
        sigverify: oc::SignatureSource::ContainerPolicyAllowInsecure,
        imgref: oc::ImageReference {
            transport,
            name: image.name.clone(),
        },
    }
}

fn sha256(raw: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(raw)))
}

fn pull_error(image: &ContainerImage, cause: impl std::fmt::Display) -> OsError {
    OsError::ImagePull {
        image: image.to_string(),
        cause: cause.to_string(),
    }
}

impl Session {
    /// Fetches a container image into the sysroot's repository and returns its merge commit.
    pub(crate) fn fetch_container(
        &self,
        config: &OsConfig,
        image: &ContainerImage,
    ) -> Result<Fetched, OsError> {
        let skopeo = Skopeo::new(&self.root, self.native);
        let layout = Layout::new(&self.root, IMAGE_CACHE);
        // 1. The manifest for this node.
        let resolved = self.resolve(&skopeo, image)?;
        let pinned = image.with_digest(&resolved.digest);
        let record = recorded(&pinned);
        // 2. Imported already (a retry, or a deployment of the same image)?
        if let Some(state) = oc::store::query_image(&self.repo, &record.imgref)
            .map_err(|e| pull_error(image, format!("reading the repository: {e:#}")))?
        {
            if state.manifest_digest.to_string() == resolved.digest {
                debug!(image = %pinned, "already in the repository");
                return Ok(Fetched {
                    commit: state.merge_commit.clone(),
                    refspec: None,
                    pulled: None,
                    space: Vec::new(),
                    image_digest: Some(resolved.digest),
                    fetched_bytes: Some(0),
                });
            }
        }
        // 3. Space for what is missing.
        let missing: Vec<&Blob> = resolved
            .blobs
            .iter()
            .filter(|b| !layout.has_blob(&b.digest))
            .collect();
        let missing_bytes: u64 = missing.iter().map(|b| b.size).sum();
        let check = self.image_space(config, image, &resolved, missing_bytes)?;
        // 4. The copy, under the signature policy.
        let dir = layout.dir();
        std::fs::create_dir_all(dir).map_err(|e| OsError::io(dir, e))?;
        let tag = format!("hearth-{}", resolved.digest.trim_start_matches("sha256:"));
        info!(
            image = %image,
            digest = %resolved.digest,
            layers = resolved.blobs.len() - 1,
            missing = missing.len(),
            missing_bytes,
            "fetching the container image's missing layers"
        );
        skopeo.copy(image, &resolved.source, dir, &tag)?;
        match layout.tagged(&tag)? {
            Some(d) if d == resolved.digest => {}
            other => {
                return Err(pull_error(
                    image,
                    format!(
                        "skopeo copied manifest {other:?}, not {} (the image changed while it \
                         was pulled? try again)",
                        resolved.digest
                    ),
                ))
            }
        }
        // 5. The import.
        let commit = self.import(image, dir, &tag, &record)?;
        let pulled = format!(
            "{pinned} ({} layers, {} fetched)",
            resolved.blobs.len() - 1,
            human_bytes(missing_bytes)
        );
        info!(pulled, commit, "imported the container image");
        Ok(Fetched {
            commit,
            refspec: None,
            pulled: Some(pulled),
            space: vec![check],
            image_digest: Some(resolved.digest),
            fetched_bytes: Some(missing_bytes),
        })
    }

    fn resolve(&self, skopeo: &Skopeo, image: &ContainerImage) -> Result<Resolved, OsError> {
        let raw = skopeo.inspect_raw(image, &image.skopeo())?;
        let parsed = parse_manifest(&raw).map_err(|e| pull_error(image, e))?;
        if let Some(want) = image.digest() {
            let got = sha256(&raw);
            if got != want {
                return Err(pull_error(
                    image,
                    format!("the registry returned a manifest with digest {got}"),
                ));
            }
        }
        match parsed {
            Parsed::Image(blobs) => Ok(Resolved {
                source: image.skopeo(),
                digest: sha256(&raw),
                blobs,
            }),
            Parsed::List(instances) => {
                let arch = go_arch();
                let Some((digest, ..)) = instances
                    .iter()
                    .find(|(_, a, os, _)| a == arch && os == "linux")
                else {
                    let have: Vec<String> = instances
                        .iter()
                        .map(|(_, a, os, _)| format!("{os}/{a}"))
                        .collect();
                    return Err(pull_error(
                        image,
                        format!(
                            "the manifest list has no image for linux/{arch} (it has {})",
                            have.join(", ")
                        ),
                    ));
                };
                let instance = image.with_digest(digest);
                let source = match image.transport {
                    Transport::Registry => instance.skopeo(),
                    // skopeo picks the platform's instance itself from a layout.
                    Transport::Oci | Transport::OciArchive => image.skopeo(),
                };
                let raw = skopeo.inspect_raw(&instance, &instance.skopeo())?;
                if sha256(&raw) != *digest {
                    return Err(pull_error(
                        image,
                        format!("the manifest of instance {digest} does not match its digest"),
                    ));
                }
                match parse_manifest(&raw).map_err(|e| pull_error(image, e))? {
                    Parsed::Image(blobs) => {
                        debug!(list = ?image.digest(), instance = %digest, arch, "the platform's instance");
                        Ok(Resolved {
                            source,
                            digest: digest.clone(),
                            blobs,
                        })
                    }
                    Parsed::List(_) => Err(pull_error(
                        image,
                        format!("instance {digest} of the manifest list is a list itself"),
                    )),
                }
            }
        }
    }

    /// The layout must hold the missing layers (compressed sizes from the manifest) and the
    /// repository their unpacked objects: at least as much again, bounded in the end by
    /// libostree's own min-free-space while it writes.
    fn image_space(
        &self,
        config: &OsConfig,
        image: &ContainerImage,
        resolved: &Resolved,
        missing: u64,
    ) -> Result<SpaceCheck, OsError> {
        let repo_path = inside(&self.root, "/ostree/repo");
        let (available, _, _) = free_space(&repo_path)?;
        let reserve = self.repo.min_free_space_bytes().unwrap_or(0) + config.min_free_bytes.sysroot;
        let check = SpaceCheck {
            what: "/sysroot".into(),
            path: display(&repo_path),
            needed: 2 * missing + reserve,
            available,
            detail: format!(
                "{} of {} layers to fetch (compressed, of {} in all) into {IMAGE_CACHE}, as much \
                 again at least for their unpacked objects in the repository; {} reserve",
                human_bytes(missing),
                resolved.blobs.len() - 1,
                human_bytes(resolved.blobs.iter().map(|b| b.size).sum()),
                human_bytes(reserve)
            ),
        };
        space_ok(&check, &image.to_string())?;
        Ok(check)
    }

    fn import(
        &self,
        image: &ContainerImage,
        layout: &Path,
        tag: &str,
        record: &oc::OstreeImageReference,
    ) -> Result<String, OsError> {
        let source = oc::OstreeImageReference {
            sigverify: oc::SignatureSource::ContainerPolicyAllowInsecure,
            imgref: oc::ImageReference {
                transport: oc::Transport::OciDir,
                name: format!("{}:{tag}", layout.display()),
            },
        };
        // The layout's content passed the policy when skopeo copied it: the proxy that reads it
        // back (which enforces the policy from protocol 0.2.6 on) checks nothing again. Not
        // under ostree-ext's `setpriv --reuid nobody`: the layout is root's.
        let mut skopeo = std::process::Command::new("setpriv");
        skopeo.args(["--pdeathsig", "KILL", "--", "skopeo", "--insecure-policy"]);
        let proxy = oc::store::ImageProxyConfig {
            skopeo_cmd: Some(skopeo),
            auth_anonymous: true,
            ..Default::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| pull_error(image, format!("starting the import: {e}")))?;
        let state = runtime
            .block_on(async {
                let mut importer =
                    oc::store::ImageImporter::new(&self.repo, &source, proxy).await?;
                importer.set_target(record);
                importer.require_bootable();
                match importer.prepare().await? {
                    oc::store::PrepareResult::AlreadyPresent(state) => Ok(state),
                    oc::store::PrepareResult::Ready(prep) => importer.import(prep).await,
                }
            })
            .map_err(|e| pull_error(image, format!("importing into the repository: {e:#}")))?;
        Ok(state.merge_commit.clone())
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
            .filter_map(|o| o.string(crate::session::ORIGIN_GROUP, "image-digest").ok())
            .map(|s| s.to_string())
            .collect();
        Layout::new(&self.root, IMAGE_CACHE).collect_garbage(&keep)?;
        Ok(())
    }
}
