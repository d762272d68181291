//! `UpdateDeployment`: the kernel type swap, rebases to container images, extensions as
//! package layers.

use std::path::Path;

use hearth_config::model::KernelType;
use hearth_config::plan::Action;
use hearth_hostops::os::rpmostree::{
    DEFAULT_KERNEL_PACKAGES, KERNEL_64K_PACKAGES, REALTIME_KERNEL_PACKAGES,
};
use hearth_hostops::os::{OsBackend, OsChange, OsError};
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_kernel_type_swap_sends_the_mco_override_modifiers() {
    let e = env(vec![fcos(&["rw"])]).await;
    let to_rt = OsChange {
        kernel_type: Some((KernelType::Default, KernelType::Realtime)),
        ..Default::default()
    };
    let staged = e.backend.stage(&to_rt).await.unwrap();
    assert_eq!(staged.deployment.kernel_type, KernelType::Realtime);
    assert_eq!(staged.deployment.kernel_args, s(&["rw"]));
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["override-remove-packages"]),
        strs(&DEFAULT_KERNEL_PACKAGES)
    );
    assert_eq!(
        set(&u["modifiers"]["install-packages"]),
        strs(&REALTIME_KERNEL_PACKAGES)
    );
    assert_eq!(u["modifiers"].as_object().unwrap().len(), 2, "{u}");
    assert_eq!(u["options"]["idempotent-layering"], true);
    // The layered commit differs from the booted one.
    assert_ne!(staged.deployment.id.checksum, staged.from.checksum);

    e.standin.reboot();
    assert_eq!(
        e.backend.status().await.unwrap().booted.kernel_type,
        KernelType::Realtime
    );

    // Back to the default kernel: the overrides are reset, the realtime packages uninstalled.
    e.standin.clear_calls();
    let to_default = OsChange {
        kernel_type: Some((KernelType::Realtime, KernelType::Default)),
        ..Default::default()
    };
    let staged = e.backend.stage(&to_default).await.unwrap();
    assert_eq!(staged.deployment.kernel_type, KernelType::Default);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["override-reset-packages"]),
        strs(&DEFAULT_KERNEL_PACKAGES)
    );
    assert_eq!(
        set(&u["modifiers"]["uninstall-packages"]),
        strs(&REALTIME_KERNEL_PACKAGES)
    );
    assert_eq!(u["modifiers"].as_object().unwrap().len(), 2, "{u}");

    // 64k-pages: aarch64 only, as in the MCO.
    e.standin.clear_calls();
    let to_64k = OsChange {
        kernel_type: Some((KernelType::Realtime, KernelType::Pages64k)),
        ..Default::default()
    };
    let r = e.backend.stage(&to_64k).await;
    if std::env::consts::ARCH == "aarch64" {
        let staged = r.unwrap();
        assert_eq!(staged.deployment.kernel_type, KernelType::Pages64k);
        let u = &e.standin.calls_of("UpdateDeployment")[0].args;
        assert_eq!(
            set(&u["modifiers"]["install-packages"]),
            strs(&KERNEL_64K_PACKAGES)
        );
    } else {
        let err = r.unwrap_err().to_string();
        assert!(err.contains("only supported on aarch64"), "{err}");
        assert!(transactions(&e.standin).is_empty(), "nothing was sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_rebase_to_a_container_image_with_kernel_args() {
    let e = env(vec![fcos(&["rw"])]).await;
    let image = format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
        "cd".repeat(32)
    );
    let change = OsChange {
        os_image: Some(image.clone()),
        kargs_append: s(&["nosmt"]),
        ..Default::default()
    };
    let staged = e.backend.stage(&change).await.unwrap();
    assert_eq!(staged.deployment.image, image);
    assert_eq!(
        staged.deployment.refspec.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    assert_eq!(
        staged.pulled.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    // UpdateDeployment first (the step that pulls), then KernelArgs on its result.
    assert_eq!(transactions(&e.standin), ["UpdateDeployment", "KernelArgs"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        u["modifiers"],
        json!({"set-refspec": format!("ostree-unverified-registry:{image}")})
    );
    let k = &e.standin.calls_of("KernelArgs")[0].args;
    assert_eq!(k["options"]["final-kernel-args"], "rw nosmt");
    // One pending deployment carries both: booted + staged.
    let ds = e.standin.deployments();
    assert_eq!(ds.len(), 2, "{ds:#?}");
    assert!(ds[0].staged && ds[1].booted);

    // Staging again replaces the pending deployment, from the booted one.
    e.standin.clear_calls();
    let again = e
        .backend
        .stage(&OsChange {
            os_image: Some(FCOS.into()),
            ..Default::default()
        })
        .await;
    // The booted deployment is already on FCOS: only the pending one is dropped.
    let again = again.unwrap();
    assert_eq!(transactions(&e.standin), ["Cleanup"]);
    assert_eq!(
        e.standin.calls_of("Cleanup")[0].args,
        json!({"elements": ["pending-deploy"]})
    );
    assert!(again.deployment.booted);
    assert_eq!(e.standin.deployments().len(), 1);

    // An ostree refspec is sent as it is.
    e.standin.clear_calls();
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some("fedora:fedora/x86_64/coreos/next".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(staged.deployment.image, "fedora:fedora/x86_64/coreos/next");
    assert_eq!(
        e.standin.calls_of("UpdateDeployment")[0].args["modifiers"],
        json!({"set-refspec": "fedora:fedora/x86_64/coreos/next"})
    );

    // A commit checksum is deployed with set-revision (the refspec stays).
    e.standin.reboot();
    e.standin.clear_calls();
    let rev = "5".repeat(64);
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some(rev.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        e.standin.calls_of("UpdateDeployment")[0].args["modifiers"],
        json!({"set-revision": rev})
    );
    assert_eq!(staged.deployment.id.checksum, rev);
    assert_eq!(staged.deployment.image, "fedora:fedora/x86_64/coreos/next");

    // Garbage is refused before anything is sent.
    e.standin.clear_calls();
    let err = e
        .backend
        .stage(&OsChange {
            os_image: Some("not an image".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, OsError::InvalidChange(_)), "{err}");
    assert!(transactions(&e.standin).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_extensions_are_package_layers() {
    let e = env(vec![fcos(&["rw"])]).await;
    let add = [Action::Extensions {
        from: vec![],
        to: s(&["usbguard", "kerberos"]),
    }];
    // Only a backend with package layering accepts them.
    let e_lib = OsChange::from_actions(&add).unwrap_err().to_string();
    assert!(e_lib.contains("rpm-ostree package layers"), "{e_lib}");
    let change = e.backend.change_from_actions(&add).unwrap();
    assert_eq!(
        change.extensions,
        Some((vec![], s(&["usbguard", "kerberos"])))
    );
    let staged = e.backend.stage(&change).await.unwrap();
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["install-packages"]),
        strs(&["usbguard", "krb5-workstation", "libkadm5"])
    );
    assert_eq!(u["options"]["idempotent-layering"], true);
    assert_eq!(
        e.standin.deployments()[0].requested_packages.len(),
        3,
        "the stand-in layered them"
    );
    assert!(staged.deployment.staged);

    // Removing one extension uninstalls its packages only.
    e.standin.reboot();
    e.standin.clear_calls();
    let remove = [Action::Extensions {
        from: s(&["usbguard", "kerberos"]),
        to: s(&["usbguard"]),
    }];
    let change = e.backend.change_from_actions(&remove).unwrap();
    e.backend.stage(&change).await.unwrap();
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        u["modifiers"],
        json!({"uninstall-packages": ["krb5-workstation", "libkadm5"]})
    );

    // An unknown extension is refused with the supported list, before anything is sent.
    e.standin.clear_calls();
    let bad = e
        .backend
        .change_from_actions(&[Action::Extensions {
            from: vec![],
            to: s(&["emacs"]),
        }])
        .unwrap();
    let err = e.backend.stage(&bad).await.unwrap_err().to_string();
    assert!(err.contains("\"emacs\" is not supported"), "{err}");
    assert!(err.contains("usbguard"), "{err}");
    assert!(transactions(&e.standin).is_empty());

    // The libostree backend keeps refusing a change that carries extensions.
    let lib = OsBackend::detect_with_config(Path::new("/nonexistent"), Default::default());
    assert!(lib.change_from_actions(&add).is_err());
}
