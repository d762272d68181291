//! Getting the commit to deploy: resolved in the sysroot's repository, or pulled from the
//! configured remote (added or updated first), with the space check before the pull.

use ::ostree as lo;
use lo::gio;
use lo::glib;
use tracing::{debug, info};

use crate::session::{none, Session};
use hearth_hostops::os::paths::{display, inside};
use hearth_hostops::os::ImageRef;
use hearth_hostops::os::OsError;
use hearth_hostops::os::SpaceCheck;
use hearth_hostops::os::{OsConfig, RemoteConfig, CONFIG_PATH};

impl Session {
    /// Pulls or resolves the target.
    pub(crate) fn fetch(&self, config: &OsConfig, target: &ImageRef) -> Result<Fetched, OsError> {
        let target = match target {
            ImageRef::Container(image) => return self.fetch_container(config, image),
            ImageRef::Ref(_) | ImageRef::Commit(_) => target,
        };
        let repo_path = inside(&self.root, "/ostree/repo");
        let repo_name = display(&repo_path);
        let local = |rev: &str| -> Result<Option<String>, OsError> {
            self.repo
                .resolve_rev(rev, true)
                .map(|o| o.map(|s| s.to_string()))
                .map_err(|e| OsError::ostree(format!("resolving {rev} in {repo_name}"), e))
        };
        let complete = |csum: &str| -> bool {
            matches!(self.repo.load_commit(csum), Ok((_, state)) if !state.contains(lo::RepoCommitState::PARTIAL))
        };
        let Some(remote) = &config.remote else {
            let why = "no remote is configured to pull it from (\"remote\" in /etc/hearth/os.json)";
            return match target {
                ImageRef::Ref(r) => match local(r)? {
                    Some(csum) if complete(&csum) => Ok(Fetched::local(csum, Some(r.clone()))),
                    _ => Err(OsError::NotFound {
                        reference: target.to_string(),
                        repo: repo_name,
                        why: why.into(),
                    }),
                },
                ImageRef::Commit(c) if complete(c) => Ok(Fetched::local(c.clone(), None)),
                ImageRef::Commit(_) | ImageRef::Container(_) => Err(OsError::NotFound {
                    reference: target.to_string(),
                    repo: repo_name,
                    why: why.into(),
                }),
            };
        };
        if let ImageRef::Commit(c) = target {
            if complete(c) {
                return Ok(Fetched::local(c.clone(), None));
            }
        }
        let url = self.ensure_remote(remote)?;
        let token = match &remote.bearer_token_file {
            Some(file) => {
                let path = inside(&self.root, file);
                let token = std::fs::read_to_string(&path).map_err(|e| OsError::Config {
                    source_name: CONFIG_PATH.into(),
                    message: format!(
                        "remote.bearerTokenFile {}: {e} (the agent writes it when it enrolls \
                         with hearth-server)",
                        display(&path)
                    ),
                })?;
                Some(token.trim().to_string())
            }
            None => None,
        };
        let pull = |what: &str, flags: lo::RepoPullFlags| -> Result<(), OsError> {
            debug!(remote = %remote.name, what, ?flags, "pulling");
            let opts = glib::VariantDict::new(None);
            opts.insert_value("refs", &glib::Variant::from(vec![what.to_string()]));
            opts.insert("flags", flags.bits() as i32);
            if let Some(token) = &token {
                let headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
                opts.insert_value("http-headers", &glib::Variant::from(headers));
            }
            self.repo
                .pull_with_options(&remote.name, &opts.end(), None, none())
                .map_err(|e| OsError::Pull {
                    remote: remote.name.clone(),
                    url: url.clone(),
                    reference: what.to_string(),
                    cause: e.to_string(),
                })
        };
        // The commit object first: its size metadata says how much the pull will write.
        pull(&target.image(), lo::RepoPullFlags::COMMIT_ONLY)?;
        let (csum, refspec) = match target {
            ImageRef::Ref(r) => {
                let refspec = format!("{}:{r}", remote.name);
                let csum = local(&refspec)?.ok_or_else(|| OsError::NotFound {
                    reference: target.to_string(),
                    repo: repo_name.clone(),
                    why: format!("remote {} did not provide it", remote.name),
                })?;
                (csum, Some(refspec))
            }
            ImageRef::Commit(c) => (c.clone(), None),
            ImageRef::Container(_) => unreachable!("container images are fetched above"),
        };
        let check = self.pull_space(config, &csum, target)?;
        pull(&csum, lo::RepoPullFlags::NONE)?;
        if let ImageRef::Ref(r) = target {
            self.repo
                .set_ref_immediate(Some(&remote.name), r, Some(&csum), none())
                .map_err(|e| {
                    OsError::ostree(format!("setting ref {}:{r} to {csum}", remote.name), e)
                })?;
        }
        let pulled = format!("{} ({csum})", refspec.as_deref().unwrap_or(&csum));
        info!(pulled, "pulled the OS image");
        Ok(Fetched {
            commit: csum,
            refspec,
            pulled: Some(pulled),
            space: vec![check],
            image_digest: None,
            fetched_bytes: None,
        })
    }

    /// Adds the remote or updates its URL; returns the URL.
    fn ensure_remote(&self, remote: &RemoteConfig) -> Result<String, OsError> {
        let existing = self
            .repo
            .remote_get_url(&remote.name)
            .ok()
            .map(|u| u.to_string());
        let Some(url) = &remote.url else {
            return existing.ok_or_else(|| OsError::Config {
                source_name: CONFIG_PATH.into(),
                message: format!(
                    "remote {} has no url and the sysroot's repository does not know it",
                    remote.name
                ),
            });
        };
        let gpg = self.repo.remote_get_gpg_verify(&remote.name).ok();
        let ca = self
            .repo
            .remote_option(&remote.name, "tls-ca-path", None)
            .ok()
            .flatten()
            .map(|s| s.to_string());
        let want_ca = remote
            .tls_ca_path
            .as_ref()
            .map(|p| display(&inside(&self.root, p)));
        if existing.as_deref() == Some(url.as_str())
            && gpg == Some(remote.gpg_verify)
            && ca == want_ca
        {
            return Ok(url.clone());
        }
        let opts = glib::VariantDict::new(None);
        opts.insert("gpg-verify", remote.gpg_verify);
        if let Some(ca) = &want_ca {
            opts.insert("tls-ca-path", ca.as_str());
        }
        let change = if existing.is_some() {
            lo::RepoRemoteChange::Replace
        } else {
            lo::RepoRemoteChange::Add
        };
        self.repo
            .remote_change(
                None::<&gio::File>,
                change,
                &remote.name,
                Some(url),
                Some(&opts.end()),
                none(),
            )
            .map_err(|e| {
                OsError::ostree(format!("configuring remote {} ({url})", remote.name), e)
            })?;
        Ok(url.clone())
    }
}

/// What [`Session::fetch`] found or pulled.
pub(crate) struct Fetched {
    /// The commit to deploy.
    pub(crate) commit: String,
    /// The refspec for the new deployment's origin (`remote:ref`, or a local ref).
    pub(crate) refspec: Option<String>,
    /// What was pulled, for the report.
    pub(crate) pulled: Option<String>,
    /// The space checks done before pulling.
    pub(crate) space: Vec<SpaceCheck>,
    /// For a container image: the digest of the manifest imported.
    pub(crate) image_digest: Option<String>,
    /// For a container image: the bytes fetched from the registry.
    pub(crate) fetched_bytes: Option<u64>,
}

impl Fetched {
    fn local(commit: String, refspec: Option<String>) -> Fetched {
        Fetched {
            commit,
            refspec,
            pulled: None,
            space: Vec::new(),
            image_digest: None,
            fetched_bytes: None,
        }
    }
}
