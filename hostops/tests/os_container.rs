//! Container images on hearth's libostree backend, on real sysroots booted in systemd-nspawn
//! (the ostree fast tier), from inside the booted system (native mode: staged, finalized at
//! shutdown; the production path): the OS images of `images/build-images.sh` as ostree-native
//! container images (`images/build-oci-images.sh`), pushed to a real registry (Debian's
//! docker-registry, TLS, htpasswd) that the container reaches on its loopback, pulled by the
//! real helper with skopeo and ostree-ext.
//!
//! Needs root, systemd-nspawn, ostree, skopeo, docker-registry, htpasswd and gpg; the first
//! run builds the OS images and their container images (cached).

use crate::os_common;

use std::collections::BTreeSet;
use std::path::Path;

use hearth_hostops::os::{OsChange, OsError, OsStatus, PullPhase, PullProgress};
use hearth_vm_tests::ostree::{cached_oci_images, tags, OciImages, OstreeHost};
use hearth_vm_tests::registry::{lookaside_config, Registry, SigningKey};
use hearth_vm_tests::relay_into;
use os_common::*;

const IMAGE_CACHE: &str = hearth_hostops::os::paths::IMAGE_CACHE;

fn image_change(image: &str) -> OsChange {
    OsChange {
        os_image: Some(image.to_string()),
        ..Default::default()
    }
}

/// Writes a file into the booted system's `/etc` (or anywhere in its live root).
fn put(host: &OstreeHost, path: &str, content: &[u8]) {
    let p = host.live_path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, content).unwrap();
}

/// The registry reached from inside on the same port; its CA and the pull secret where a node
/// keeps them (`/etc/containers/certs.d/HOST/ca.crt`, `/etc/ostree/auth.json`).
fn connect(host: &OstreeHost, registry: &Registry, with_credentials: bool) {
    relay_into(host.host(), registry.addr(), registry.port()).unwrap();
    put(
        host,
        &format!("/etc/containers/certs.d/{}/ca.crt", registry.host()),
        registry.ca_pem().unwrap().as_bytes(),
    );
    if with_credentials {
        put(
            host,
            "/etc/ostree/auth.json",
            registry.auth_json().as_bytes(),
        );
    }
}

fn read_inside(host: &OstreeHost, path: &str) -> String {
    host.exec_ok(&["cat", path]).unwrap().trim().to_string()
}

/// The container images recorded in the sysroot's repository (ostree-ext's refs).
fn repo_images(host: &OstreeHost) -> BTreeSet<String> {
    host.exec_ok(&[
        "ostree",
        "refs",
        "--repo=/sysroot/ostree/repo",
        "ostree/container/image",
    ])
    .unwrap()
    .lines()
    .filter(|l| !l.trim().is_empty())
    .map(|l| l.trim().to_string())
    .collect()
}

/// The manifests the node's layout keeps.
fn layout_manifests(host: &OstreeHost) -> BTreeSet<String> {
    let index =
        std::fs::read(host.live_path(format!("{IMAGE_CACHE}/index.json"))).unwrap_or_default();
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap_or_default();
    index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["digest"].as_str().map(str::to_string))
        .collect()
}

fn layout_blob_bytes(host: &OstreeHost) -> u64 {
    let dir = host.live_path(format!("{IMAGE_CACHE}/blobs/sha256"));
    std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn no_pending(d: &Driver, host: &OstreeHost) -> OsStatus {
    let status = d.status(host).unwrap();
    assert!(
        status.pending.is_none(),
        "nothing may be staged after a failed pull: {:?}",
        status.pending
    );
    status
}

fn total_layer_bytes(images: &OciImages, tag: &str) -> u64 {
    images.layers(tag).unwrap().iter().map(|(_, s)| s).sum()
}

// ---------------------------------------------------------------------------------------------

/// A manifest list by tag (this node's platform instance is deployed), then a derived image by
/// digest (only its own layer is fetched), each rebooted into and read back; afterwards the
/// repository and the node's layout hold the two deployed images and nothing else.
#[test]
fn container_image_pivots_inside() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    for (tag, name) in [(tags::V1, "v1"), (tags::V2, "v2"), (tags::MULTI, "multi")] {
        registry
            .push(
                &images.reference(tag),
                &format!("hearth/debian:{name}"),
                None,
            )
            .unwrap();
    }
    let (v1, v2) = (
        images.digest(tags::V1).unwrap(),
        images.digest(tags::V2).unwrap(),
    );
    let mut host = boot_v1();
    connect(&host, &registry, true);
    let d = Driver::new(&host, Mode::Inside);

    // 1. A tag naming a manifest list: linux/amd64's instance is v1, fetched whole.
    let multi = format!("{}/hearth/debian:multi", registry.host());
    let (staged, progress) = d.stage_with_progress(&host, &image_change(&multi)).unwrap();
    assert_eq!(staged.deployment.image, multi);
    assert_eq!(staged.deployment.image_digest.as_deref(), Some(v1));
    assert_eq!(
        staged.fetched_bytes,
        Some(total_layer_bytes(&images, tags::V1) + config_size(&images, tags::V1))
    );
    // The pull's progress, as the node's status shows it while it runs: the fetch of every
    // layer (bytes never going back, ending complete), then the import of every layer.
    let layers = images.layers(tags::V1).unwrap();
    let fetching: Vec<&PullProgress> = progress
        .iter()
        .filter(|p| p.phase == PullPhase::Fetching)
        .collect();
    let importing: Vec<&PullProgress> = progress
        .iter()
        .filter(|p| p.phase == PullPhase::Importing)
        .collect();
    assert!(
        !fetching.is_empty() && !importing.is_empty(),
        "{progress:?}"
    );
    let first_import = progress
        .iter()
        .position(|p| p.phase == PullPhase::Importing)
        .unwrap();
    assert!(progress[first_import..]
        .iter()
        .all(|p| p.phase == PullPhase::Importing));
    assert!(fetching
        .windows(2)
        .all(|w| w[0].bytes_done <= w[1].bytes_done && w[0].layers_done <= w[1].layers_done));
    let last = fetching.last().unwrap();
    assert_eq!(
        (last.layers_done, last.layers_total),
        (layers.len() as u32, layers.len() as u32)
    );
    assert_eq!(last.bytes_done, total_layer_bytes(&images, tags::V1));
    assert_eq!(last.bytes_total, last.bytes_done);
    assert_eq!(fetching[0].image, multi);
    let last = importing.last().unwrap();
    assert_eq!(last.layers_done, last.layers_total);
    assert_eq!(last.layers_total, layers.len() as u32);
    host.reboot(REBOOT).unwrap();
    relay_into(host.host(), registry.addr(), registry.port()).unwrap();
    let status = d.status(&host).unwrap();
    assert_eq!(status.booted.id, staged.deployment.id);
    assert_eq!(status.booted.image_digest.as_deref(), Some(v1));
    assert_eq!(read_inside(&host, "/usr/lib/hearth-image-version"), "v1");
    // As ostree-ext and rpm-ostree record it: pinned to the digest.
    let id = &status.booted.id;
    let origin = read_inside(
        &host,
        &format!(
            "/sysroot/ostree/deploy/{}/deploy/{}.{}.origin",
            id.osname, id.checksum, id.serial
        ),
    );
    let pinned = format!("{}/hearth/debian@{v1}", registry.host());
    assert!(
        origin.contains(&format!(
            "container-image-reference=ostree-unverified-registry:{pinned}"
        )),
        "{origin}"
    );

    // 2. v2 by digest: v1's layers are on the node, only v2's own layer and config come (as
    //    the registry's own request log says).
    let by_digest = format!("{}/hearth/debian@{v2}", registry.host());
    let served_before = registry.blobs_served().len();
    let staged = d.stage(&host, &image_change(&by_digest)).unwrap();
    let (own_layer, own_size) = images.layers(tags::V2).unwrap().last().cloned().unwrap();
    assert!(images
        .layers(tags::V1)
        .unwrap()
        .iter()
        .all(|(l, _)| *l != own_layer));
    assert_eq!(
        registry.blobs_served()[served_before..]
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([own_layer, config_digest(&images, tags::V2)]),
        "only the derived layer and the config are downloaded"
    );
    assert_eq!(
        staged.fetched_bytes,
        Some(own_size + config_size(&images, tags::V2))
    );
    host.reboot(REBOOT).unwrap();
    let status = d.status(&host).unwrap();
    assert_eq!(status.booted.image_digest.as_deref(), Some(v2));
    assert_eq!(status.booted.image, by_digest);
    assert_eq!(read_inside(&host, "/usr/lib/hearth-image-version"), "v2");
    assert_eq!(
        status
            .rollback
            .as_ref()
            .and_then(|r| r.image_digest.as_deref()),
        Some(v1)
    );

    // 3. Only what is deployed stays: the two images, in the repository and in the layout.
    assert_eq!(repo_images(&host).len(), 2, "{:?}", repo_images(&host));
    assert_eq!(
        layout_manifests(&host),
        BTreeSet::from([v1.to_string(), v2.to_string()])
    );
    host.shutdown().unwrap();
}

fn config_digest(images: &OciImages, tag: &str) -> String {
    images.manifest(tag).unwrap()["config"]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

fn config_size(images: &OciImages, tag: &str) -> u64 {
    images.manifest(tag).unwrap()["config"]["size"]
        .as_u64()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------

/// What goes wrong on the way from a registry: no credentials, no registry, a pull stopped
/// midway (the registry cannot serve the image's config, which skopeo fetches after the
/// layers); each is a per-node reason naming the image, and nothing is staged. The layers
/// fetched before the stop stay: the next try downloads only the rest (the registry's log).
#[test]
fn container_pull_failures_inside() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    registry
        .push(&images.reference(tags::V2), "hearth/debian:v2", None)
        .unwrap();
    let v2 = format!("{}/hearth/debian:v2", registry.host());
    let host = boot_v1();
    let d = Driver::new(&host, Mode::Inside);

    // 1. No pull secret.
    connect(&host, &registry, false);
    let e = d.stage(&host, &image_change(&v2)).unwrap_err();
    match &e {
        OsError::ImagePull { image, cause } => {
            assert_eq!(image, &v2);
            assert!(
                cause.contains("unauthorized") || cause.contains("authentication required"),
                "{e}"
            );
        }
        other => panic!("expected an image pull error, got {other:?}"),
    }
    assert!(e.to_string().contains("nothing was staged"), "{e}");
    no_pending(&d, &host);

    // 2. Nothing listens there.
    let nowhere = "127.0.0.1:1/hearth/debian:v2";
    let e = d.stage(&host, &image_change(nowhere)).unwrap_err();
    assert!(
        matches!(&e, OsError::ImagePull { cause, .. } if cause.contains("connection refused")),
        "{e}"
    );
    no_pending(&d, &host);

    // 3. Stopped midway: the registry serves v2's layers but not its config, which skopeo
    //    fetches after them.
    put(
        &host,
        "/etc/ostree/auth.json",
        registry.auth_json().as_bytes(),
    );
    let config = config_digest(&images, tags::V2);
    let data = registry.blob_data(&config).unwrap();
    let aside = data.with_extension("aside");
    std::fs::rename(&data, &aside).unwrap();
    let e = d.stage(&host, &image_change(&v2)).unwrap_err();
    assert!(matches!(&e, OsError::ImagePull { .. }), "{e}");
    no_pending(&d, &host);
    let layers = total_layer_bytes(&images, tags::V2);
    assert_eq!(
        layout_blob_bytes(&host),
        layers,
        "the layers fetched before the stop stay on the node"
    );
    // 4. Served again: the next try downloads what was missing, not what it has (the
    //    registry's own request log).
    std::fs::rename(&aside, &data).unwrap();
    let served_before = registry.blobs_served().len();
    let staged = d.stage(&host, &image_change(&v2)).unwrap();
    assert_eq!(
        &registry.blobs_served()[served_before..],
        std::slice::from_ref(&config),
        "resumed: only the config is downloaded"
    );
    assert_eq!(
        staged.fetched_bytes,
        Some(config_size(&images, tags::V2)),
        "resumed: only the config is fetched"
    );
    assert_eq!(
        staged.deployment.image_digest.as_deref(),
        Some(images.digest(tags::V2).unwrap())
    );
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// A node whose containers policy requires images of the site registry to be signed by the
/// site's key: an unsigned image and one signed by another key are refused before a layer is
/// fetched, with the image, the policy and the reason; the image signed by the site's key
/// (`skopeo copy --sign-by`, signatures in a lookaside store) is deployed.
#[test]
fn container_signature_policy_inside() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    let site = SigningKey::create("hearth-site").unwrap();
    let stranger = SigningKey::create("stranger").unwrap();
    registry
        .push(&images.reference(tags::V2), "hearth/unsigned:v2", None)
        .unwrap();
    registry
        .push(
            &images.reference(tags::V2),
            "hearth/stranger:v2",
            Some(&stranger),
        )
        .unwrap();
    registry
        .push(&images.reference(tags::V2), "hearth/signed:v2", Some(&site))
        .unwrap();
    let host = boot_v1();
    connect(&host, &registry, true);
    // The site's policy, key and lookaside store, as a MachineConfig would write them.
    let policy = serde_json::json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {registry.host(): [{
            "type": "signedBy",
            "keyType": "GPGKeys",
            "keyPath": "/etc/pki/containers/hearth-site.gpg"
        }]}}
    });
    put(
        &host,
        "/etc/containers/policy.json",
        serde_json::to_string_pretty(&policy).unwrap().as_bytes(),
    );
    put(
        &host,
        "/etc/pki/containers/hearth-site.gpg",
        &std::fs::read(site.public_key()).unwrap(),
    );
    let store_inside = "/var/lib/hearth-test-sigstore";
    put(
        &host,
        "/etc/containers/registries.d/hearth-site.yaml",
        lookaside_config(&registry.host(), Path::new(store_inside), false).as_bytes(),
    );
    for key in [&site, &stranger] {
        copy_tree(&key.sigstore(), &host.live_path(store_inside));
    }
    let d = Driver::new(&host, Mode::Inside);

    for repo in ["unsigned", "stranger"] {
        let image = format!("{}/hearth/{repo}:v2", registry.host());
        let e = d.stage(&host, &image_change(&image)).unwrap_err();
        match &e {
            OsError::ImageRefused {
                image: i,
                policy,
                cause,
            } => {
                assert_eq!(i, &image);
                assert_eq!(policy, "/etc/containers/policy.json");
                assert!(cause.to_lowercase().contains("signature"), "{repo}: {e}");
            }
            other => panic!("{repo}: expected a refusal by the policy, got {other:?}"),
        }
        no_pending(&d, &host);
        assert_eq!(
            layout_blob_bytes(&host),
            0,
            "{repo}: refused before any layer is fetched"
        );
        assert!(
            registry.blobs_served().is_empty(),
            "{repo}: the registry served no blob: {:?}",
            registry.blobs_served()
        );
    }
    // ostree-ext's rule for `ostree-image-signed:`: a policy whose default accepts anything is
    // refused (this one's default does); an ostree remote's keys are not used on this backend.
    let signed = format!("{}/hearth/signed:v2", registry.host());
    let e = d
        .stage(
            &host,
            &image_change(&format!("ostree-image-signed:docker://{signed}")),
        )
        .unwrap_err();
    assert!(
        matches!(&e, OsError::ImageRefused { cause, .. } if cause.contains("insecureAcceptAnything")),
        "{e}"
    );
    let e = d
        .stage(
            &host,
            &image_change(&format!("ostree-remote-image:fedora:docker://{signed}")),
        )
        .unwrap_err();
    assert!(
        matches!(&e, OsError::InvalidChange(m) if m.contains("policy.json")),
        "{e}"
    );
    no_pending(&d, &host);
    let staged = d.stage(&host, &image_change(&signed)).unwrap();
    assert_eq!(
        staged.deployment.image_digest.as_deref(),
        Some(images.digest(tags::V2).unwrap())
    );
    host.shutdown().unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// The release's own reference (`quay.io/…@sha256:X`) pulled from the site's registry through a
/// `registries.conf` mirror (the effect of the MCO's ImageDigestMirrorSet; the container has no
/// route to quay.io), and images carried on media: an OCI archive, and an OCI layout whose tag
/// is a manifest list (this node's instance deployed).
#[test]
fn container_images_from_a_mirror_and_from_media_inside() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    registry
        .push(&images.reference(tags::V2), "ocp/rhcos:v2", None)
        .unwrap();
    let host = boot_v1();
    connect(&host, &registry, true);
    let release = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";
    put(
        &host,
        "/etc/containers/registries.conf.d/50-site-mirror.conf",
        format!(
            "[[registry]]\nprefix = \"{release}\"\nlocation = \"{release}\"\n\n\
             [[registry.mirror]]\nlocation = \"{}/ocp/rhcos\"\npull-from-mirror = \"digest-only\"\n",
            registry.host()
        )
        .as_bytes(),
    );
    let d = Driver::new(&host, Mode::Inside);
    let v2 = images.digest(tags::V2).unwrap();
    let served_before = registry.blobs_served().len();
    let staged = d
        .stage(&host, &image_change(&format!("{release}@{v2}")))
        .unwrap();
    assert_eq!(staged.deployment.image_digest.as_deref(), Some(v2));
    assert_eq!(staged.deployment.image, format!("{release}@{v2}"));
    assert!(
        registry.blobs_served().len() > served_before,
        "the mirror served the layers"
    );

    // An OCI archive on media (written where the container's /var comes from).
    let media = host.sysroot().stateroot_var().join("media");
    let archive = media.join("os-v1.tar");
    std::fs::create_dir_all(archive.parent().unwrap()).unwrap();
    let out = std::process::Command::new("skopeo")
        .args(["copy", "--quiet", &images.reference(tags::V1)])
        .arg(format!("oci-archive:{}", archive.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let staged = d
        .stage(&host, &image_change("oci-archive:/var/media/os-v1.tar"))
        .unwrap();
    assert_eq!(
        staged.deployment.image_digest.as_deref(),
        Some(images.digest(tags::V1).unwrap())
    );
    assert_eq!(staged.deployment.image, "oci-archive:/var/media/os-v1.tar");

    // An OCI layout on media whose tag is a manifest list: linux/amd64's instance (v1).
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&images.layout)
        .arg(media.join("layout"))
        .status()
        .unwrap();
    assert!(copied.success());
    let staged = d
        .stage(&host, &image_change("oci:/var/media/layout:multi"))
        .unwrap();
    assert_eq!(
        staged.deployment.image_digest.as_deref(),
        Some(images.digest(tags::V1).unwrap())
    );
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// Bytes of the files under `dir` (hard links counted once per name: the repository's objects).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        total += if meta.is_dir() {
            tree_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Ten updates in a row, each a new image (v1 plus a layer of its own: 1 MiB that no other
/// image has), staged one after the other on the booted host: the repository and the node's
/// layout keep what is deployed (the booted commit and the last staged image), not ten images.
#[test]
fn container_images_are_pruned_inside() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let work = tempfile::tempdir().unwrap();
    let layout = work.path().join("layout");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&images.layout)
        .arg(&layout)
        .status()
        .unwrap();
    assert!(copied.success());
    let tool =
        hearth_vm_tests::qemu::workspace_binary("hearth-image-tool", "hearth-image-tool").unwrap();
    const PAYLOAD: u64 = 1024 * 1024;
    let registry = Registry::start().unwrap();
    for i in 1..=10 {
        // 1 MiB of its own: hex of a hash chain seeded with the update's number.
        use sha2::Digest;
        let mut block = sha2::Sha256::digest(format!("update {i}"));
        let mut content = String::with_capacity(PAYLOAD as usize);
        while (content.len() as u64) < PAYLOAD {
            block = sha2::Sha256::digest(block);
            content.push_str(&hex::encode(block));
        }
        let file = work.path().join(format!("payload-{i}"));
        std::fs::write(&file, &content).unwrap();
        let out = std::process::Command::new(&tool)
            .arg("derive")
            .arg(&layout)
            .args([tags::V1, &format!("u{i}")])
            .arg(format!("--file=/usr/lib/hearth-update=@{}", file.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        registry
            .push(
                &format!("oci:{}:u{i}", layout.display()),
                &format!("hearth/debian:u{i}"),
                None,
            )
            .unwrap();
    }
    let host = boot_v1();
    connect(&host, &registry, true);
    let d = Driver::new(&host, Mode::Inside);
    let objects = host.sysroot().repo().join("objects");
    let mut after_first = 0;
    let mut last = None;
    for i in 1..=10 {
        let staged = d
            .stage(
                &host,
                &image_change(&format!("{}/hearth/debian:u{i}", registry.host())),
            )
            .unwrap();
        if i == 1 {
            after_first = tree_bytes(&objects);
        }
        last = staged.deployment.image_digest;
    }
    let after_ten = tree_bytes(&objects);
    assert_eq!(
        repo_images(&host).len(),
        1,
        "only the staged image is kept (the booted deployment is a commit): {:?}",
        repo_images(&host)
    );
    assert_eq!(layout_manifests(&host), BTreeSet::from([last.unwrap()]));
    assert!(
        after_ten < after_first + 2 * PAYLOAD,
        "ten updates grew the repository by {} bytes (one image's own layer is {PAYLOAD})",
        after_ten.saturating_sub(after_first)
    );
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// Measurements (not a pass/fail test): a container pivot staged by hearth (v1 whole, then v2
/// with only its own layer), next to the floor of its download, `skopeo copy` of the same image
/// into an OCI layout in the same container. Prints a Markdown table (docs/performance.md, "OS
/// images as container images").
///
/// ```sh
/// cargo test -p hearth-hostops --test hostops os_container::measure_container_pivots -- --ignored --nocapture
/// ```
#[test]
#[ignore = "measurement, not a pass/fail test (it proves nothing; its figures are in docs/performance.md): run with --ignored --nocapture"]
fn measure_container_pivots() {
    init_logging();
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    for tag in [tags::V1, tags::V2] {
        registry
            .push(
                &images.reference(tag),
                &format!("hearth/debian:{tag}"),
                None,
            )
            .unwrap();
    }
    let v1 = format!(
        "{}/hearth/debian@{}",
        registry.host(),
        images.digest(tags::V1).unwrap()
    );
    let v2 = format!(
        "{}/hearth/debian@{}",
        registry.host(),
        images.digest(tags::V2).unwrap()
    );
    let (mut full, mut delta, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    let (mut full_bytes, mut delta_bytes) = (0, 0);
    for _ in 0..5 {
        let host = boot_v1();
        connect(&host, &registry, true);
        let d = Driver::new(&host, Mode::Inside);
        let t = std::time::Instant::now();
        let out = host
            .exec(&[
                "skopeo",
                "copy",
                "--quiet",
                "--authfile=/etc/ostree/auth.json",
                &format!("docker://{v1}"),
                "oci:/var/tmp/floor:v1",
            ])
            .unwrap();
        assert!(out.success(), "{out}");
        floor.push(t.elapsed());
        host.exec_ok(&["rm", "-rf", "/var/tmp/floor"]).unwrap();
        let t = std::time::Instant::now();
        full_bytes = d
            .stage(&host, &image_change(&v1))
            .unwrap()
            .fetched_bytes
            .unwrap();
        full.push(t.elapsed());
        let t = std::time::Instant::now();
        delta_bytes = d
            .stage(&host, &image_change(&v2))
            .unwrap()
            .fetched_bytes
            .unwrap();
        delta.push(t.elapsed());
        host.shutdown().unwrap();
    }
    let median = |v: &mut Vec<std::time::Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (f, dl, fl) = (median(&mut full), median(&mut delta), median(&mut floor));
    println!("| what | median of 5 | fetched |");
    println!("| --- | --- | --- |");
    println!(
        "| floor: `skopeo copy` of v1 into an OCI layout | {} ms | {} bytes |",
        fl.as_millis(),
        total_layer_bytes(&images, tags::V1) + config_size(&images, tags::V1)
    );
    println!(
        "| hearth stages v1 (copy under the policy, import, deploy, prune) | {} ms ({:.1}× the floor) | {full_bytes} bytes |",
        f.as_millis(),
        f.as_secs_f64() / fl.as_secs_f64()
    );
    println!(
        "| hearth stages v2 after v1 (its own layer only) | {} ms | {delta_bytes} bytes |",
        dl.as_millis()
    );
}
