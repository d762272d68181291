//! First boot: which Ignition version a client asked for, and the config it receives (the pool's
//! rendered config plus the agent's bootstrap files).

use hearth_config::dataurl;
use hearth_config::ignition::{Config, File, Resource, SpecVersion, Unit};

/// The media type Ignition asks for.
pub const IGNITION_MEDIA_TYPE: &str = "application/vnd.coreos.ignition+json";

use crate::served_agent::{self, ServedAgent};
pub use hearth_api::firstboot::{AGENT_ENV_PATH, CA_PATH, STAMP_PATH};
use hearth_config::ignition::Verification;
/// The agent's unit, enabled on first boot.
pub const AGENT_UNIT: &str = hearth_config::own::AGENT_UNIT;

/// The version to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Negotiated {
    /// This version.
    Version(SpecVersion),
    /// The client asked only for versions hearth does not produce (the text names them).
    Unsupported(String),
}

/// Chooses the Ignition spec version from an `Accept` header, as the MCO's config server does:
/// media ranges are taken by descending `q`; the first `application/vnd.coreos.ignition+json`
/// range whose `version` hearth produces wins. Ignition ranges that name only unknown versions
/// give [`Negotiated::Unsupported`]; a header without any versioned Ignition range (curl, a
/// browser) gets the newest version, 3.5.0.
pub fn negotiate(accept: Option<&str>) -> Negotiated {
    let Some(accept) = accept else {
        return Negotiated::Version(SpecVersion::LATEST);
    };
    let mut ranges: Vec<(f32, usize, String)> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for (i, range) in accept.split(',').enumerate() {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        if media != IGNITION_MEDIA_TYPE {
            continue;
        }
        let mut version = None;
        let mut q = 1.0f32;
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "version" => version = Some(v.to_string()),
                "q" => q = v.parse().unwrap_or(0.0),
                _ => {}
            }
        }
        if let Some(v) = version {
            ranges.push((q, i, v));
        }
    }
    // Descending q; the header's order among equals.
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (q, _, v) in &ranges {
        if *q <= 0.0 {
            continue;
        }
        // Exact versions only ("3.4.0"); Ignition v0.x also lists "version=1" as a fallback.
        match SpecVersion::parse(v).filter(|s| s.as_str() == v) {
            Some(s) => return Negotiated::Version(s),
            None => unknown.push(v.clone()),
        }
    }
    if unknown.is_empty() {
        Negotiated::Version(SpecVersion::LATEST)
    } else {
        Negotiated::Unsupported(unknown.join(", "))
    }
}

/// What a first-booting node needs to come up managed.
#[derive(Debug, Clone)]
pub struct Bootstrap<'a> {
    /// The server's URL, or every replica's (the agent takes the list; the first serves the
    /// agent's binaries). Not empty.
    pub server_urls: &'a [String],
    /// The fleet CA (PEM).
    pub ca_pem: &'a str,
    /// The pool.
    pub pool: &'a str,
    /// The pool's bootstrap token, when the request carried it.
    pub bootstrap_token: Option<&'a str>,
    /// The node a node-bound token is for: the agent enrolls under this name.
    pub node: Option<&'a str>,
    /// The rendered config served (stamped, so the agent adopts what Ignition wrote).
    pub rendered: &'a str,
    /// The agent's binaries to install (`--serve-agent`), fetched from the first server URL.
    pub agent: Option<&'a ServedAgent>,
}

/// The contents of `/etc/hearth/agent.env`.
pub fn agent_env(b: &Bootstrap<'_>) -> String {
    let mut out = String::from(
        "# Written by hearth-server at first boot: how hearth-agent reaches its server.\n",
    );
    out.push_str(&format!("HEARTH_SERVER={}\n", b.server_urls.join(",")));
    out.push_str(&format!("HEARTH_CA={CA_PATH}\n"));
    out.push_str(&format!("HEARTH_POOL={}\n", b.pool));
    if let Some(node) = b.node {
        out.push_str(&format!("HEARTH_NODE_NAME={node}\n"));
    }
    match b.bootstrap_token {
        Some(t) => out.push_str(&format!("HEARTH_BOOTSTRAP_TOKEN={t}\n")),
        None => out.push_str(
            "# HEARTH_BOOTSTRAP_TOKEN is not included: this config was fetched with the admin token.\n",
        ),
    }
    out
}

/// The pool's rendered Ignition config plus the bootstrap files and the agent's unit. Every
/// file whose `overwrite` is unset gets `overwrite: true`, as the MCO serves it: Ignition 3
/// would otherwise refuse to replace a file the OS image already has and fail the first boot
/// (rendering sets it too; this also covers configs rendered before it did).
pub fn with_bootstrap(config: &Config, b: &Bootstrap<'_>) -> Config {
    let mut c = config.clone();
    hearth_config::mco::default_file_overwrite(&mut c);
    let mut add = |path: &str, bytes: &[u8], mode: i64| {
        c.storage.files.retain(|f| f.path != path);
        c.storage.files.push(File {
            path: path.to_string(),
            overwrite: Some(true),
            contents: Resource {
                source: Some(dataurl::encode(bytes)),
                ..Default::default()
            },
            mode: Some(mode),
            ..Default::default()
        });
    };
    add(CA_PATH, b.ca_pem.as_bytes(), 0o644);
    add(AGENT_ENV_PATH, agent_env(b).as_bytes(), 0o600);
    add(STAMP_PATH, format!("{}\n", b.rendered).as_bytes(), 0o644);
    if let Some(agent) = b.agent {
        // The binaries, fetched from this server and checked against their hash; the server
        // is trusted through the fleet CA (Ignition's own TLS trust for this config's fetches).
        for bin in &agent.binaries {
            let path = format!("{}/{}", served_agent::INSTALL_DIR, bin.name);
            c.storage.files.retain(|f| f.path != path);
            c.storage.files.push(File {
                path,
                overwrite: Some(true),
                contents: Resource {
                    source: Some(format!(
                        "{}{}/{}",
                        b.server_urls
                            .first()
                            .map_or("", String::as_str)
                            .trim_end_matches('/'),
                        served_agent::URL_PATH,
                        bin.name
                    )),
                    verification: Verification {
                        hash: Some(format!("sha512-{}", bin.sha512)),
                    },
                    ..Default::default()
                },
                mode: Some(0o755),
                ..Default::default()
            });
        }
        let ca = Resource {
            source: Some(dataurl::encode(b.ca_pem.as_bytes())),
            ..Default::default()
        };
        let cas = &mut c.ignition.security.tls.certificate_authorities;
        if !cas.contains(&ca) {
            cas.push(ca);
        }
    }
    // The agent's unit, enabled; with the agent served, its unit is served too (a stock image
    // has neither). A config may have given it drop-ins (nothing else: `hearth_config::own`),
    // which stay.
    let served_unit = b.agent.map(|_| served_agent::unit_text());
    match c.systemd.units.iter_mut().find(|u| u.name == AGENT_UNIT) {
        Some(u) => {
            u.enabled = Some(true);
            if served_unit.is_some() {
                u.contents = served_unit;
            }
        }
        None => c.systemd.units.push(Unit {
            name: AGENT_UNIT.to_string(),
            enabled: Some(true),
            contents: served_unit,
            ..Default::default()
        }),
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Negotiated {
        Negotiated::Version(SpecVersion::parse(s).unwrap())
    }

    #[test]
    fn accept_headers() {
        assert_eq!(negotiate(None), v("3.5.0"));
        assert_eq!(negotiate(Some("*/*")), v("3.5.0"));
        assert_eq!(
            negotiate(Some("application/vnd.coreos.ignition+json;version=3.4.0")),
            v("3.4.0")
        );
        // What Ignition 2.x sends.
        assert_eq!(
            negotiate(Some(
                "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1"
            )),
            v("3.2.0")
        );
        // What Ignition 0.x sends.
        assert_eq!(
            negotiate(Some("application/vnd.coreos.ignition+json; version=2.2.0, application/vnd.coreos.ignition+json; version=1; q=0.5, */*; q=0.1")),
            v("2.2.0")
        );
        // q orders the ranges.
        assert_eq!(
            negotiate(Some("application/vnd.coreos.ignition+json;version=2.2.0;q=0.5, application/vnd.coreos.ignition+json;version=3.1.0")),
            v("3.1.0")
        );
        match negotiate(Some(
            "application/vnd.coreos.ignition+json;version=3.9.0, */*;q=0.1",
        )) {
            Negotiated::Unsupported(s) => assert_eq!(s, "3.9.0"),
            other => panic!("{other:?}"),
        }
        // An unknown first choice falls back to a known later one.
        assert_eq!(
            negotiate(Some("application/vnd.coreos.ignition+json;version=3.9.0, application/vnd.coreos.ignition+json;version=3.4.0;q=0.8")),
            v("3.4.0")
        );
    }

    /// Issue 15, item 1 (the MCO's `TestSetDefaultFileOverwrite`): a file the OS image already
    /// has must carry `overwrite: true` at first boot, through rendering and the first-boot
    /// config, in every 3.x version served, or Ignition stops the boot with "file exists".
    #[test]
    fn first_boot_files_carry_overwrite_true_unless_the_config_says_false() {
        let yaml = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-chrony
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - path: /etc/chrony.conf
        mode: 0644
        contents: {source: "data:,server%20ntp"}
      - path: /etc/keep-if-present
        overwrite: false
        contents: {source: "data:,x"}
"#;
        let (m, d) = hearth_config::manifest::read_str("chrony.yaml", yaml);
        assert!(!d.iter().any(|d| d.is_error()), "{d:?}");
        let configs: Vec<_> = m.machine_configs.into_iter().map(|s| s.item).collect();
        let pools = hearth_config::render::with_builtin_pools(&[]);
        let worker = pools.iter().find(|p| p.name() == "worker").unwrap();
        let rendered = hearth_config::render::render_pool(worker, &configs).unwrap();
        let b = Bootstrap {
            server_urls: &["https://h:22623".to_string()],
            ca_pem: "PEM",
            pool: "worker",
            bootstrap_token: None,
            node: None,
            rendered: "rendered-worker-x",
            agent: None,
        };
        let served = with_bootstrap(&rendered.spec.config, &b);
        for v in ["3.0.0", "3.2.0", "3.5.0"] {
            let json = served.to_version(SpecVersion::parse(v).unwrap()).unwrap();
            let files = json["storage"]["files"].as_array().unwrap();
            assert_eq!(files.len(), 5, "{v}");
            for f in files {
                let want = f["path"] != "/etc/keep-if-present";
                assert_eq!(f["overwrite"], want, "{v}: {f}");
            }
        }
        // A rendered config from before rendering set the flag still gets it at first boot.
        let mut old = rendered.spec.config.clone();
        for f in &mut old.storage.files {
            if f.overwrite == Some(true) {
                f.overwrite = None;
            }
        }
        let served = with_bootstrap(&old, &b);
        let chrony = served
            .storage
            .files
            .iter()
            .find(|f| f.path == "/etc/chrony.conf")
            .unwrap();
        assert_eq!(chrony.overwrite, Some(true));
    }

    #[test]
    fn bootstrap_files_are_added_once() {
        let b = Bootstrap {
            server_urls: &["https://h:22623".to_string()],
            ca_pem: "PEM",
            pool: "worker",
            bootstrap_token: Some("tok"),
            node: None,
            rendered: "rendered-worker-x",
            agent: None,
        };
        let c = with_bootstrap(&with_bootstrap(&Config::default(), &b), &b);
        assert_eq!(c.storage.files.len(), 3);
        assert_eq!(c.systemd.units.len(), 1);
        let env = c
            .storage
            .files
            .iter()
            .find(|f| f.path == AGENT_ENV_PATH)
            .unwrap();
        assert_eq!(env.mode, Some(0o600));
        let text = dataurl::decode(env.contents.source.as_deref().unwrap(), None).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("HEARTH_BOOTSTRAP_TOKEN=tok"), "{text}");
    }

    /// A served agent of one small binary.
    fn served() -> ServedAgent {
        ServedAgent {
            binaries: vec![crate::served_agent::ServedBinary {
                name: "hearth-agent",
                bytes: b"bin".to_vec().into(),
                sha512: "00".into(),
            }],
        }
    }

    /// A config that gives the agent's unit drop-ins (a proxy) still has the agent enabled and,
    /// served, its unit written at first boot; the drop-ins stay.
    #[test]
    fn the_agents_unit_is_enabled_beside_the_drop_ins_a_config_gives_it() {
        let agent = served();
        let mut config = Config::default();
        config.systemd.units.push(Unit {
            name: AGENT_UNIT.to_string(),
            dropins: vec![hearth_config::ignition::Dropin {
                name: "10-proxy.conf".into(),
                contents: Some("[Service]\nEnvironment=HTTPS_PROXY=http://proxy:3128\n".into()),
            }],
            ..Default::default()
        });
        for served in [None, Some(&agent)] {
            let b = Bootstrap {
                server_urls: &["https://a:22623".to_string()],
                ca_pem: "PEM",
                pool: "worker",
                bootstrap_token: Some("tok"),
                node: None,
                rendered: "rendered-worker-x",
                agent: served,
            };
            let c = with_bootstrap(&config, &b);
            let units: Vec<_> = c
                .systemd
                .units
                .iter()
                .filter(|u| u.name == AGENT_UNIT)
                .collect();
            assert_eq!(units.len(), 1);
            assert_eq!(units[0].enabled, Some(true));
            assert_eq!(units[0].dropins.len(), 1);
            assert_eq!(units[0].contents.is_some(), served.is_some());
        }
    }

    /// With replicas (`--advertise-url A,B`): the agent gets the whole list; the binaries come
    /// from the first.
    #[test]
    fn replicas_go_to_the_agent_and_the_binaries_come_from_the_first() {
        let agent = served();
        let b = Bootstrap {
            server_urls: &["https://a:22623".to_string(), "https://b:22623".to_string()],
            ca_pem: "PEM",
            pool: "worker",
            bootstrap_token: Some("tok"),
            node: None,
            rendered: "rendered-worker-x",
            agent: Some(&agent),
        };
        let c = with_bootstrap(&Config::default(), &b);
        let env = c
            .storage
            .files
            .iter()
            .find(|f| f.path == AGENT_ENV_PATH)
            .unwrap();
        let text = dataurl::decode(env.contents.source.as_deref().unwrap(), None).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("HEARTH_SERVER=https://a:22623,https://b:22623\n"),
            "{text}"
        );
        let bin = c
            .storage
            .files
            .iter()
            .find(|f| f.path.ends_with("/hearth-agent"))
            .unwrap();
        assert_eq!(
            bin.contents.source.as_deref(),
            Some("https://a:22623/firstboot/bin/hearth-agent")
        );
    }
}
