//! Container images on the libostree backend: the manifest for this node (a manifest list
//! resolved to its platform's instance), the space its missing layers need, the copy into the
//! node's OCI layout under the containers signature policy (skopeo.rs), and the import into the
//! sysroot's repository with ostree-ext (layered images included). Pruning: prune.rs.
//!
//! The imported image is recorded under its pinned reference (`registry/repo@sha256:…`), as
//! ostree-ext and rpm-ostree record the images they deploy, so that `rpm-ostree status` and
//! `bootc status` read the same origin.

use std::path::Path;

use ostree_ext::container as oc;
use sha2::{Digest as _, Sha256};
use tracing::{debug, info};

use crate::fetch::Fetched;
use crate::oci_layout::{go_arch, parse_manifest, Blob, Layout, Parsed};
use crate::session::Session;
use crate::skopeo::{skopeo_command, Skopeo};
use crate::space::{free_space, space_ok};
use hearth_hostops::os::paths::{display, inside, IMAGE_CACHE};
use hearth_hostops::os::{
    human_bytes, ContainerImage, OsConfig, OsError, PullPhase, PullProgress, SigVerify, SpaceCheck,
    Transport, SHA256,
};

/// The manifest this node deploys from an image reference.
struct Resolved {
    /// What skopeo copies: pinned to the manifest's digest (`docker://repo@sha256:…`), or the
    /// OCI reference as it is.
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
    let sigverify = match &image.sigverify {
        SigVerify::ContainerPolicy => oc::SignatureSource::ContainerPolicy,
        SigVerify::Unverified | SigVerify::OstreeRemote(_) => {
            oc::SignatureSource::ContainerPolicyAllowInsecure
        }
    };
    oc::OstreeImageReference {
        sigverify,
        imgref: oc::ImageReference {
            transport,
            name: image.name.clone(),
        },
    }
}

fn sha256(raw: &[u8]) -> String {
    format!("{SHA256}{}", hex::encode(Sha256::digest(raw)))
}

fn pull_error(image: &ContainerImage, cause: impl std::fmt::Display) -> OsError {
    OsError::ImagePull {
        image: image.to_string(),
        cause: cause.to_string(),
    }
}

impl Session {
    /// Fetches a container image into the sysroot's repository and returns its merge commit.
    /// The copy runs every time, also for an image the repository has (another tool imported
    /// it, or a looser policy let it in): the policy is checked before a layer is fetched, and
    /// layers the node's layout has are not fetched again.
    pub(crate) fn fetch_container(
        &self,
        config: &OsConfig,
        image: &ContainerImage,
    ) -> Result<Fetched, OsError> {
        let skopeo = Skopeo::new(&self.root, self.native);
        if let SigVerify::OstreeRemote(remote) = &image.sigverify {
            return Err(OsError::InvalidChange(format!(
                "container image {image}: its reference asks for the GPG keys of ostree remote \
                 {remote:?}, which the libostree backend does not use for container images; \
                 name the image without the ostree-remote transport and require signatures in \
                 /etc/containers/policy.json (signedBy)"
            )));
        }
        if image.sigverify == SigVerify::ContainerPolicy && skopeo.policy_accepts_anything()? {
            return Err(OsError::ImageRefused {
                image: image.to_string(),
                policy: skopeo.policy(),
                cause: "the reference is ostree-image-signed, and the policy's default accepts \
                        any image unsigned (insecureAcceptAnything)"
                    .into(),
            });
        }
        let layout = Layout::new(&self.root, IMAGE_CACHE);
        // 1. The manifest for this node.
        let resolved = self.resolve(&skopeo, image)?;
        let pinned = image.with_digest(&resolved.digest);
        // 2. Space for what the layout does not have.
        let missing: Vec<&Blob> = resolved
            .blobs
            .iter()
            .filter(|b| !layout.has_blob(&b.digest))
            .collect();
        let missing_bytes = missing
            .iter()
            .try_fold(0u64, |sum, b| sum.checked_add(b.size))
            .ok_or_else(|| pull_error(image, "its manifest's layer sizes add up past 2^64"))?;
        let space = self.image_space(config, image, &layout, &resolved, missing_bytes)?;
        // 3. The copy, under the signature policy.
        layout.prepare()?;
        let tag = format!("hearth-{}", resolved.digest.trim_start_matches(SHA256));
        info!(
            image = %image,
            digest = %resolved.digest,
            layers = resolved.blobs.len().saturating_sub(1),
            missing = missing.len(),
            missing_bytes,
            "fetching the container image's missing layers"
        );
        let config_blob = resolved.blobs.first().map(|b| b.digest.as_str());
        let fetching = Fetching::new(image, &missing, config_blob);
        fetching.report(&layout);
        skopeo.copy(image, &resolved.source, layout.dir(), &tag, || {
            fetching.report(&layout)
        })?;
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
        // 4. The import (nothing to do when the repository has it already).
        let commit = self.import(image, layout.dir(), &tag, &recorded(&pinned))?;
        let pulled = format!(
            "{pinned} ({} layers, {} fetched)",
            resolved.blobs.len().saturating_sub(1),
            human_bytes(missing_bytes)
        );
        info!(pulled, commit, "imported the container image");
        Ok(Fetched {
            commit,
            refspec: None,
            pulled: Some(pulled),
            space,
            image_digest: Some(resolved.digest),
            fetched_bytes: Some(missing_bytes),
        })
    }

    fn resolve(&self, skopeo: &Skopeo, image: &ContainerImage) -> Result<Resolved, OsError> {
        // A reference with a tag and a digest is asked for by its digest (the registry
        // transport takes no reference with both).
        let asked = match image.digest() {
            Some(d) => image.with_digest(d),
            None => image.clone(),
        };
        let raw = skopeo.inspect_raw(image, &asked.skopeo())?;
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
        let (digest, raw) = match parsed {
            Parsed::Image(_) => (sha256(&raw), raw),
            Parsed::List(instances) => {
                let arch = go_arch();
                let Some((digest, ..)) = instances
                    .iter()
                    .find(|(_, a, os)| a == arch && os == "linux")
                else {
                    let have: Vec<String> = instances
                        .iter()
                        .map(|(_, a, os)| format!("{os}/{a}"))
                        .collect();
                    return Err(pull_error(
                        image,
                        format!(
                            "the manifest list has no image for linux/{arch} (it has {})",
                            have.join(", ")
                        ),
                    ));
                };
                let raw = self.instance(skopeo, image, digest)?;
                debug!(list = ?image.digest(), instance = %digest, arch, "the platform's instance");
                (digest.clone(), raw)
            }
        };
        let blobs = match parse_manifest(&raw).map_err(|e| pull_error(image, e))? {
            Parsed::Image(blobs) => blobs,
            Parsed::List(_) => {
                return Err(pull_error(
                    image,
                    format!("instance {digest} of the manifest list is a list itself"),
                ))
            }
        };
        let source = match image.transport {
            Transport::Registry => image.with_digest(&digest).skopeo(),
            // skopeo picks the platform's instance of a layout itself.
            Transport::Oci | Transport::OciArchive => image.skopeo(),
        };
        Ok(Resolved {
            source,
            digest,
            blobs,
        })
    }

    /// The manifest of a list's instance, checked against its digest: from the registry by
    /// digest, or from the blobs of an `oci:` layout; an `oci-archive:` list is refused.
    fn instance(
        &self,
        skopeo: &Skopeo,
        image: &ContainerImage,
        digest: &str,
    ) -> Result<Vec<u8>, OsError> {
        let raw = match image.transport {
            Transport::Registry => {
                let instance = image.with_digest(digest);
                skopeo.inspect_raw(image, &instance.skopeo())?
            }
            Transport::Oci => {
                let dir = image
                    .name
                    .split_once(':')
                    .map_or(image.name.as_str(), |(d, _)| d);
                let source = Layout::at(inside(&self.root, dir));
                source
                    .read_blob(digest)?
                    .ok_or_else(|| pull_error(image, format!("the layout has no blob {digest}")))?
            }
            Transport::OciArchive => {
                return Err(pull_error(
                    image,
                    "it is a manifest list in an OCI archive, whose instances cannot be read \
                     without unpacking it: unpack it (oci:DIR) or name the platform's image",
                ))
            }
        };
        if sha256(&raw) != digest {
            return Err(pull_error(
                image,
                format!("the manifest of instance {digest} does not match its digest"),
            ));
        }
        Ok(raw)
    }

    /// The layout must hold the missing layers (compressed sizes from the manifest) and the
    /// repository their unpacked objects: at least as much again, bounded in the end by
    /// libostree's own min-free-space while it writes. One check when both are on one file
    /// system, else one each.
    fn image_space(
        &self,
        config: &OsConfig,
        image: &ContainerImage,
        layout: &Layout,
        resolved: &Resolved,
        missing: u64,
    ) -> Result<Vec<SpaceCheck>, OsError> {
        let repo_path = inside(&self.root, "/ostree/repo");
        let reserve = self.repo.min_free_space_bytes().unwrap_or(0) + config.min_free_bytes.sysroot;
        let layers = resolved.blobs.len().saturating_sub(1);
        let total = resolved
            .blobs
            .iter()
            .fold(0u64, |sum, b| sum.saturating_add(b.size));
        let unpacked = missing;
        let layout_dir = layout.existing_ancestor();
        let same_fs = same_file_system(&repo_path, &layout_dir);
        let mut checks = Vec::new();
        let (available, _, _) = free_space(&repo_path)?;
        checks.push(SpaceCheck {
            what: "/sysroot".into(),
            path: display(&repo_path),
            needed: unpacked
                .saturating_add(if same_fs { missing } else { 0 })
                .saturating_add(reserve),
            available,
            detail: format!(
                "{} of {layers} layers to fetch (compressed, of {} in all){}, as much again at \
                 least for their unpacked objects in the repository; {} reserve",
                human_bytes(missing),
                human_bytes(total),
                if same_fs {
                    format!(" into {IMAGE_CACHE} on the same file system")
                } else {
                    String::new()
                },
                human_bytes(reserve)
            ),
        });
        if !same_fs {
            let (available, _, _) = free_space(&layout_dir)?;
            checks.push(SpaceCheck {
                what: IMAGE_CACHE.into(),
                path: display(&layout_dir),
                needed: missing.saturating_add(config.min_free_bytes.sysroot),
                available,
                detail: format!(
                    "{} of {layers} layers to fetch (compressed); {} reserve",
                    human_bytes(missing),
                    human_bytes(config.min_free_bytes.sysroot)
                ),
            });
        }
        for check in &checks {
            space_ok(check, &image.to_string())?;
        }
        Ok(checks)
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
        let mut skopeo = skopeo_command();
        skopeo.arg("--insecure-policy");
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
                    oc::store::PrepareResult::Ready(prep) => {
                        // The layers the repository does not have yet.
                        let sizes: Vec<u64> = prep
                            .all_layers()
                            .filter(|l| l.commit.is_none())
                            .map(|l| l.layer().size())
                            .collect();
                        let events = importer.request_progress();
                        let reporting = report_import(image, sizes, events);
                        let (state, ()) = tokio::join!(importer.import(prep), reporting);
                        state
                    }
                }
            })
            .map_err(|e| pull_error(image, format!("importing into the repository: {e:#}")))?;
        Ok(state.merge_commit.clone())
    }
}

/// The layers of a fetch and how far they are, reported as [`PullProgress`] lines (at most
/// once a second unless a layer completed).
struct Fetching {
    image: String,
    blobs: Vec<(String, u64)>,
    last: std::cell::RefCell<Option<(PullProgress, std::time::Instant)>>,
}

impl Fetching {
    /// The missing layers (the config blob, a few hundred bytes, not counted).
    fn new(image: &ContainerImage, missing: &[&Blob], config: Option<&str>) -> Fetching {
        Fetching {
            image: image.to_string(),
            blobs: missing
                .iter()
                .filter(|b| Some(b.digest.as_str()) != config)
                .map(|b| (b.digest.clone(), b.size))
                .collect(),
            last: std::cell::RefCell::new(None),
        }
    }

    /// Measures what reached the layout (complete blobs, and the temporary files of those
    /// being fetched) and reports it when it changed.
    fn report(&self, layout: &Layout) {
        let total: u64 = self.blobs.iter().map(|b| b.1).sum();
        let done: Vec<&(String, u64)> = self
            .blobs
            .iter()
            .filter(|(d, _)| layout.has_blob(d))
            .collect();
        let bytes = done.iter().map(|b| b.1).sum::<u64>() + layout.partial_bytes();
        let p = PullProgress {
            image: self.image.clone(),
            phase: PullPhase::Fetching,
            layers_done: done.len() as u32,
            layers_total: self.blobs.len() as u32,
            bytes_done: bytes.min(total),
            bytes_total: total,
        };
        let mut last = self.last.borrow_mut();
        let due = match &*last {
            None => true,
            Some((q, at)) => {
                q.layers_done != p.layers_done
                    || (q.bytes_done != p.bytes_done
                        && at.elapsed() >= std::time::Duration::from_secs(1))
            }
        };
        if due {
            emit(&p);
            *last = Some((p, std::time::Instant::now()));
        }
    }
}

/// Writes a progress line for the agent (hostops' client reads it from standard error).
fn emit(p: &PullProgress) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", p.line());
}

/// Reports the import of the layers (their sizes) as ostree-ext completes them.
async fn report_import(
    image: &ContainerImage,
    sizes: Vec<u64>,
    mut events: tokio::sync::mpsc::Receiver<oc::store::ImportProgress>,
) {
    let mut p = PullProgress {
        image: image.to_string(),
        phase: PullPhase::Importing,
        layers_done: 0,
        layers_total: sizes.len() as u32,
        bytes_done: 0,
        bytes_total: sizes.iter().sum(),
    };
    emit(&p);
    while let Some(event) = events.recv().await {
        use oc::store::ImportProgress as E;
        if let E::OstreeChunkCompleted(d) | E::DerivedLayerCompleted(d) = event {
            p.layers_done = (p.layers_done + 1).min(p.layers_total);
            let size = d.size();
            p.bytes_done = (p.bytes_done + size).min(p.bytes_total);
            emit(&p);
        }
    }
}

/// Whether two paths are on one file system (`st_dev`); `true` when either cannot be read (the
/// stricter, combined check).
fn same_file_system(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev(),
        _ => true,
    }
}
