//! A MachineConfig naming its OS image by tag: resolved to the manifest's digest when it is
//! applied, at a real registry (Debian's docker-registry, TLS with its own CA, htpasswd), so
//! that the pool's rendered config pins the digest; a tag that cannot be resolved refuses the
//! apply naming the object, the field and what to do. Needs docker-registry, htpasswd, skopeo
//! (and the cached OS container images).

use crate::common::*;
use hearth_vm_tests::ostree::{cached_oci_images, tags};
use hearth_vm_tests::registry::Registry;
use reqwest::StatusCode;
use std::sync::Arc;

fn mc(image: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
         name: 10-os\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  \
         osImageURL: {image}\n"
    )
}

/// The osImageURL of the worker pool's rendered config, as the apply's answer names it.
async fn rendered_image(api: &Api, applied: &Answer) -> String {
    let target = applied.json["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "worker")
        .and_then(|p| p["target"].as_str())
        .unwrap_or_else(|| panic!("no worker target in {}", applied.text))
        .to_string();
    let rendered = api
        .get(&format!("/api/v1/machineconfigs/{target}"))
        .await
        .json;
    rendered["spec"]["osImageURL"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tagged_os_image_is_pinned_to_its_digest_when_applied() {
    let images = tokio::task::spawn_blocking(cached_oci_images)
        .await
        .unwrap()
        .unwrap();
    let registry = Registry::start().unwrap();
    let reference = images.reference(tags::MULTI);
    let pushed = tokio::task::block_in_place(|| {
        registry.push(&reference, "os/debian:stable", None).unwrap()
    });
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("registry-ca.crt");
    std::fs::write(&ca, registry.ca_pem().unwrap()).unwrap();
    let auth = dir.path().join("auth.json");
    std::fs::write(&auth, registry.auth_json()).unwrap();

    // With the registry's CA and credentials: the list's digest is pinned.
    let mut opts = options(5);
    opts.registry = Some(Arc::new(
        hearth_server::registry::Resolver::new(Some(&auth), Some(&ca)).unwrap(),
    ));
    let s = start(&dir.path().join("state"), opts).await;
    let api = Api::admin(&s);
    let a = api.apply_text("os.yaml", &mc(&pushed)).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let list = images.digest(tags::MULTI).unwrap();
    assert_eq!(rendered_image(&api, &a).await, format!("{pushed}@{list}"));
    // The config as applied keeps its tag; the annotation says what it resolved to.
    let stored = api.get("/api/v1/machineconfigs/10-os").await.json;
    assert_eq!(stored["spec"]["osImageURL"], pushed.as_str());
    assert_eq!(
        stored["metadata"]["annotations"][hearth_config::container::RESOLVED_ANNOTATION],
        format!("{pushed}@{list}")
    );
    // Applied again while the tag names the same image: unchanged.
    let a = api.apply_text("os.yaml", &mc(&pushed)).await;
    assert_eq!(a.json["results"][0]["action"], "unchanged", "{}", a.text);
    // The tag moves (v1 pushed under it): a new apply pins the new digest, a new render.
    tokio::task::block_in_place(|| {
        registry
            .push(&images.reference(tags::V1), "os/debian:stable", None)
            .unwrap()
    });
    let a = api.apply_text("os.yaml", &mc(&pushed)).await;
    assert_eq!(a.json["results"][0]["action"], "configured", "{}", a.text);
    assert_eq!(
        rendered_image(&api, &a).await,
        format!("{pushed}@{}", images.digest(tags::V1).unwrap())
    );
    // An unknown tag: refused, nothing changed.
    let unknown = format!("{}/os/debian:nope", registry.host());
    let a = api.apply_text("os.yaml", &mc(&unknown)).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    assert!(
        a.text.contains("MachineConfig 10-os spec.osImageURL") && a.text.contains("404"),
        "{}",
        a.text
    );
    s.shutdown().await;

    // Without the credentials: refused, saying what to give.
    let mut opts = options(5);
    opts.registry = Some(Arc::new(
        hearth_server::registry::Resolver::new(None, Some(&ca)).unwrap(),
    ));
    let s = start(&dir.path().join("state2"), opts).await;
    let api = Api::admin(&s);
    let a = api.apply_text("os.yaml", &mc(&pushed)).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    assert!(
        a.text.contains("--registry-auth") && a.text.contains("os.yaml"),
        "{}",
        a.text
    );
    // A digest needs no registry at all.
    let pinned = format!("{pushed}@{list}");
    let a = api.apply_text("os.yaml", &mc(&pinned)).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(rendered_image(&api, &a).await, pinned);
    s.shutdown().await;
}
