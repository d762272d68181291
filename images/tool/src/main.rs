//! `hearth-image-tool`: builds the ostree-native container images hearth's tests deploy, into an
//! OCI image layout, from the ostree commits `images/build-images.sh` makes. Debian 12's `ostree`
//! has no `container` subcommand; this is the part of it the tests need, on ostree-ext (the
//! library rpm-ostree and bootc build theirs with).
//!
//! ```text
//! hearth-image-tool encapsulate REPO REV LAYOUT TAG [--label K=V]...
//!     the commit REV of the ostree repository REPO as an image tagged TAG
//! hearth-image-tool derive LAYOUT FROM TAG --file PATH=CONTENT|@FILE... [--label K=V]...
//!     FROM plus one layer with these files (a derived, "layered" image)
//! hearth-image-tool index LAYOUT TAG --platform OS/ARCH=IMAGE_TAG...
//!     a manifest list of images already in the layout
//! ```
//!
//! Everything is reproducible: fixed timestamps, so the same commit gives the same digests.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ocidir::cap_std::{ambient_authority, fs::Dir};
use ocidir::oci_spec::image as oci;
use ostree_ext::container as oc;
use ostree_ext::ostree;

/// The time every image and layer is stamped with.
const CREATED: &str = "2024-01-01T00:00:00Z";

/// The labels that make an image bootable for ostree-ext (`require_bootable`) and bootc.
const BOOTABLE_LABELS: [(&str, &str); 2] = [("ostree.bootable", "true"), ("containers.bootc", "1")];

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Builds the ostree-native container images of hearth's tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// An ostree commit as a bootable container image.
    Encapsulate {
        /// The ostree repository.
        repo: PathBuf,
        /// The ref or commit.
        rev: String,
        /// The OCI layout directory (created if missing).
        layout: PathBuf,
        /// The tag.
        tag: String,
        /// Extra labels, `KEY=VALUE`.
        #[arg(long = "label")]
        labels: Vec<String>,
    },
    /// An image of the layout plus one layer with the given files.
    Derive {
        /// The OCI layout directory.
        layout: PathBuf,
        /// The tag of the base image.
        from: String,
        /// The tag of the new image.
        tag: String,
        /// Files of the new layer, `PATH=CONTENT`, or `PATH=@FILE` for the content of a file
        /// here (absolute paths; mode 0644).
        #[arg(long = "file", required = true)]
        files: Vec<String>,
        /// Labels to set or change, `KEY=VALUE`.
        #[arg(long = "label")]
        labels: Vec<String>,
    },
    /// A manifest list of images of the layout.
    Index {
        /// The OCI layout directory.
        layout: PathBuf,
        /// The tag of the list.
        tag: String,
        /// Instances, `OS/ARCH=TAG`.
        #[arg(long = "platform", required = true)]
        platforms: Vec<String>,
    },
}

fn split_pair<'a>(s: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    s.split_once('=')
        .with_context(|| format!("{what} {s:?}: expected KEY=VALUE"))
}

fn encapsulate(repo: &Path, rev: &str, layout: &Path, tag: &str, labels: &[String]) -> Result<()> {
    let repo = ostree::Repo::new_for_path(repo);
    repo.open(ostree::gio::Cancellable::NONE)
        .context("opening the ostree repository")?;
    let mut all: std::collections::BTreeMap<String, String> = BOOTABLE_LABELS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for l in labels {
        let (k, v) = split_pair(l, "label")?;
        all.insert(k.into(), v.into());
    }
    let config = oc::Config {
        labels: Some(all),
        cmd: None,
    };
    let mut opts = oc::ExportOpts::default();
    opts.created = Some(CREATED.to_string());
    std::fs::create_dir_all(layout)?;
    let dest = oc::ImageReference {
        transport: oc::Transport::OciDir,
        name: format!("{}:{tag}", layout.display()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let digest = runtime
        .block_on(oc::encapsulate(&repo, rev, &config, Some(opts), &dest))
        .with_context(|| format!("encapsulating {rev}"))?;
    println!("{tag} {digest}");
    Ok(())
}

fn open_layout(layout: &Path) -> Result<ocidir::OciDir> {
    let dir = Dir::open_ambient_dir(layout, ambient_authority())
        .with_context(|| format!("opening {}", layout.display()))?;
    ocidir::OciDir::open(&dir).with_context(|| format!("reading the layout {}", layout.display()))
}

fn platform() -> oci::Platform {
    oci::PlatformBuilder::default()
        .os(oci::Os::Linux)
        .architecture(oci::Arch::Amd64)
        .build()
        .expect("a platform")
}

fn derive(layout: &Path, from: &str, tag: &str, files: &[String], labels: &[String]) -> Result<()> {
    let oci = open_layout(layout)?;
    let mut manifest = oci
        .find_manifest_with_tag(from)?
        .with_context(|| format!("no image tagged {from} in {}", layout.display()))?;
    let mut config: oci::ImageConfiguration = oci.read_json_blob(manifest.config())?;
    if !labels.is_empty() {
        let mut runtime = config.config().clone().unwrap_or_default();
        let mut all = runtime.labels().clone().unwrap_or_default();
        for l in labels {
            let (k, v) = split_pair(l, "label")?;
            all.insert(k.into(), v.into());
        }
        runtime.set_labels(Some(all));
        config.set_config(Some(runtime));
    }
    let created = chrono::DateTime::parse_from_rfc3339(CREATED)?.with_timezone(&chrono::Utc);
    let mut layer = oci.create_layer(None)?;
    for f in files {
        let (path, content) = split_pair(f, "file")?;
        let content = match content.strip_prefix('@') {
            Some(file) => std::fs::read(file).with_context(|| format!("reading {file}"))?,
            None => content.as_bytes().to_vec(),
        };
        let Some(rel) = path.strip_prefix('/') else {
            bail!("file {path:?}: expected an absolute path");
        };
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(created.timestamp() as u64);
        header.set_size(content.len() as u64);
        layer.append_data(&mut header, rel, content.as_slice())?;
    }
    let layer = layer.into_inner()?.complete()?;
    oci.push_layer_full(
        &mut manifest,
        &mut config,
        layer,
        None::<HashMap<String, String>>,
        "hearth-image-tool derive",
        created,
    );
    let desc = oci.insert_manifest_and_config(manifest, config, Some(tag), platform())?;
    println!("{tag} {}", desc.digest());
    Ok(())
}

fn index(layout: &Path, tag: &str, platforms: &[String]) -> Result<()> {
    let oci = open_layout(layout)?;
    let index_path = layout.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).context("reading index.json")?)?;
    let entries = index["manifests"].as_array().cloned().unwrap_or_default();
    let mut instances = Vec::new();
    for p in platforms {
        let (platform, image) = split_pair(p, "platform")?;
        let (os, arch) = platform
            .split_once('/')
            .with_context(|| format!("platform {platform:?}: expected OS/ARCH"))?;
        let entry = entries
            .iter()
            .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == image)
            .with_context(|| format!("no image tagged {image} in {}", layout.display()))?;
        instances.push(serde_json::json!({
            "mediaType": entry["mediaType"],
            "digest": entry["digest"],
            "size": entry["size"],
            "platform": {"architecture": arch, "os": os},
        }));
    }
    let list = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": instances,
    });
    let blob = oci
        .write_json_blob(&list, oci::MediaType::ImageIndex)?
        .build()?;
    let mut desc = serde_json::to_value(&blob)?;
    desc["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": tag});
    if let Some(list) = index["manifests"].as_array_mut() {
        list.retain(|m| m["annotations"]["org.opencontainers.image.ref.name"] != tag);
        list.push(desc);
    }
    let tmp = layout.join(".index.json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(&index)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &index_path)?;
    println!("{tag} {}", blob.digest());
    Ok(())
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Encapsulate {
            repo,
            rev,
            layout,
            tag,
            labels,
        } => encapsulate(&repo, &rev, &layout, &tag, &labels),
        Command::Derive {
            layout,
            from,
            tag,
            files,
            labels,
        } => derive(&layout, &from, &tag, &files, &labels),
        Command::Index {
            layout,
            tag,
            platforms,
        } => index(&layout, &tag, &platforms),
    }
}
