//! The agent's calls to the Kubernetes API server, each bounded in time (and the MachineConfig
//! in size): its own Node's metadata (read, watched, annotations patched), the rendered
//! MachineConfig, its MachineConfigNode.

use super::annotations::Wanted;
use super::mcn;
use crate::journal::NamedConfig;
use crate::limits;
use ::kube::api::{Api, Patch, PatchParams, WatchParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::{Client, Config};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// How long one call to the API server (other than a watch) may take in all.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one watch of the Node lasts (the server ends it; the agent then reads the Node
/// again and watches anew).
pub const WATCH_SECONDS: u32 = 240;

/// A call to the API server that failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No answer in time.
    #[error("{what}: no answer from the API server within {} s", .limit.as_secs())]
    Timeout {
        /// The call.
        what: String,
        /// The limit it broke.
        limit: Duration,
    },
    /// The API server refused, or the connection failed.
    #[error("{what}: {message}")]
    Api {
        /// The call.
        what: String,
        /// The HTTP status, when the server answered.
        code: Option<u16>,
        /// Why.
        message: String,
    },
}

impl KubeError {
    fn api(what: &str, e: ::kube::Error) -> KubeError {
        let (code, message) = match &e {
            ::kube::Error::Api(s) => (Some(s.code), format!("{} ({})", s.message, s.code)),
            other => (None, other.to_string()),
        };
        KubeError::Api {
            what: what.to_string(),
            code,
            message,
        }
    }

    /// Whether the server said the object does not exist.
    pub fn not_found(&self) -> bool {
        matches!(
            self,
            KubeError::Api {
                code: Some(404),
                ..
            }
        )
    }
}

/// The watchdog's bound of a call limited to `limit` (see `crate::watchdog`).
fn busy(limit: Duration) -> crate::watchdog::Busy {
    crate::watchdog::busy(
        "a call to the Kubernetes API server",
        limit + Duration::from_secs(10),
    )
}

async fn bounded<T>(
    what: &str,
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, ::kube::Error>>,
) -> Result<T, KubeError> {
    let _busy = busy(limit);
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(|e| KubeError::api(what, e)),
        Err(_) => Err(KubeError::Timeout {
            what: what.to_string(),
            limit,
        }),
    }
}

/// The connection to the API server, as one node.
#[derive(Clone)]
pub struct Kube {
    client: Client,
    nodes: Api<Node>,
    node: String,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kube").field("node", &self.node).finish()
    }
}

impl Kube {
    /// Connects with `kubeconfig`, or in-cluster (the service account's token and CA, and
    /// `KUBERNETES_SERVICE_HOST`/`_PORT`) without one.
    pub async fn connect(kubeconfig: Option<&Path>, node: &str) -> anyhow::Result<Kube> {
        use anyhow::Context;
        let mut config = match kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .with_context(|| format!("the kubeconfig {}", path.display()))?
            }
            None => Config::incluster().context(
                "not in a cluster (no service account or KUBERNETES_SERVICE_HOST): give --kubeconfig",
            )?,
        };
        config.connect_timeout = Some(limits::CONNECT_TIMEOUT);
        config.read_timeout = Some(Duration::from_secs(u64::from(WATCH_SECONDS)) + API_TIMEOUT);
        config.write_timeout = Some(API_TIMEOUT);
        let client = Client::try_from(config).context("cannot make a Kubernetes client")?;
        Ok(Kube {
            nodes: Api::all(client.clone()),
            client,
            node: node.to_string(),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The Node's annotations and resource version.
    pub async fn annotations(&self) -> Result<(BTreeMap<String, String>, String), KubeError> {
        let what = format!("reading Node {}", self.node);
        let meta = bounded(&what, API_TIMEOUT, self.nodes.get_metadata(&self.node)).await?;
        let rv = meta.metadata.resource_version.clone().unwrap_or_default();
        Ok((meta.metadata.annotations.unwrap_or_default(), rv))
    }

    /// Waits until the Node changes after `version` (or the watch ends, at most
    /// [`WATCH_SECONDS`] later, or fails).
    pub async fn changed_since(&self, version: &str) -> Result<(), KubeError> {
        use futures_util::StreamExt;
        let what = format!("watching Node {}", self.node);
        let wp = WatchParams::default()
            .fields(&format!("metadata.name={}", self.node))
            .timeout(WATCH_SECONDS);
        let stream = bounded(&what, API_TIMEOUT, self.nodes.watch_metadata(&wp, version)).await?;
        let mut stream = std::pin::pin!(stream);
        let limit = Duration::from_secs(u64::from(WATCH_SECONDS)) + API_TIMEOUT;
        match tokio::time::timeout(limit, stream.next()).await {
            Ok(Some(Err(e))) => Err(KubeError::api(&what, e)),
            Ok(_) | Err(_) => Ok(()),
        }
    }

    /// Applies a JSON merge patch to this node's Node (its annotations only: see
    /// `annotations::patch`).
    /// Returns the Node's new resource version.
    pub async fn patch_node(&self, patch: &Value) -> Result<String, KubeError> {
        let what = format!("patching the annotations of Node {}", self.node);
        let meta = bounded(
            &what,
            API_TIMEOUT,
            self.nodes
                .patch_metadata(&self.node, &PatchParams::default(), &Patch::Merge(patch)),
        )
        .await?;
        Ok(meta.metadata.resource_version.unwrap_or_default())
    }

    /// A raw request to the API server: its status and its body, read up to `max` bytes, all
    /// within `limit`.
    async fn raw(
        &self,
        what: &str,
        request: http::Request<Vec<u8>>,
        max: u64,
        limit: Duration,
    ) -> Result<(u16, Vec<u8>), KubeError> {
        let call = async {
            let resp = self
                .client
                .send(request.map(::kube::client::Body::from))
                .await
                .map_err(|e| KubeError::api(what, e))?;
            let code = resp.status().as_u16();
            let max = if resp.status().is_success() {
                max
            } else {
                limits::MAX_ERROR_BYTES
            };
            let body = http_body_util::Limited::new(resp.into_body(), max as usize)
                .collect()
                .await
                .map_err(|e| KubeError::Api {
                    what: what.to_string(),
                    code: Some(code),
                    message: if e.is::<http_body_util::LengthLimitError>() {
                        limits::BodyError::TooLarge {
                            what: "a MachineConfig",
                            limit: limits::human(max),
                            declared: None,
                        }
                        .to_string()
                    } else {
                        e.to_string()
                    },
                })?;
            Ok((code, body.to_bytes().to_vec()))
        };
        let _busy = busy(limit);
        match tokio::time::timeout(limit, call).await {
            Ok(r) => r,
            Err(_) => Err(KubeError::Timeout {
                what: what.to_string(),
                limit,
            }),
        }
    }

    async fn raw_ok(
        &self,
        what: &str,
        request: http::Request<Vec<u8>>,
        max: u64,
        limit: Duration,
    ) -> Result<Vec<u8>, KubeError> {
        let (code, body) = self.raw(what, request, max, limit).await?;
        if (200..300).contains(&code) {
            return Ok(body);
        }
        let message = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        Err(KubeError::Api {
            what: what.to_string(),
            code: Some(code),
            message: format!("{message} ({code})"),
        })
    }

    /// The MachineConfig `name`, read whole within [`limits::MAX_CONFIG_BYTES`] and
    /// [`limits::FETCH_TIMEOUT`]: its JSON as it came (parsed by `crate::source`).
    pub async fn machine_config(&self, name: &str) -> Result<Vec<u8>, KubeError> {
        let what = format!("reading MachineConfig {name}");
        let request = http::Request::get(format!(
            "/apis/machineconfiguration.openshift.io/v1/machineconfigs/{}",
            path_segment(name)
        ))
        .header("Accept", "application/json")
        .body(Vec::new())
        .map_err(|e| KubeError::Api {
            what: what.clone(),
            code: None,
            message: e.to_string(),
        })?;
        self.raw_ok(
            &what,
            request,
            limits::MAX_CONFIG_BYTES,
            limits::FETCH_TIMEOUT,
        )
        .await
    }

    /// The cluster's node-disruption policy (`MachineConfiguration` `cluster`, its JSON), read
    /// within [`limits::MAX_ANSWER_BYTES`] and [`API_TIMEOUT`]; `None` when there is none (or
    /// its CRD is not installed).
    pub async fn cluster_policy(&self) -> Result<Option<Vec<u8>>, KubeError> {
        let what = "reading the node-disruption policy (machineconfiguration cluster)";
        let request = http::Request::get(super::policy::POLICY_PATH)
            .header("Accept", "application/json")
            .body(Vec::new())
            .map_err(|e| KubeError::Api {
                what: what.to_string(),
                code: None,
                message: e.to_string(),
            })?;
        match self
            .raw_ok(what, request, limits::MAX_ANSWER_BYTES, API_TIMEOUT)
            .await
        {
            Ok(body) => Ok(Some(body)),
            Err(e) if e.not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates this node's MachineConfigNode if it has none, points its spec at `desired`, and
    /// writes its status (through the status subresource).
    pub async fn write_mcn(
        &self,
        want: &Wanted,
        desired: &str,
        since: &str,
    ) -> Result<(), KubeError> {
        let what = format!("writing MachineConfigNode {}", self.node);
        let path = format!("{}/{}", mcn::MCN_PATH, path_segment(&self.node));
        let json = |method: &str, uri: &str, content_type: &str, body: &Value| {
            http::Request::builder()
                .method(method)
                .uri(uri)
                .header("Accept", "application/json")
                .header("Content-Type", content_type)
                .body(serde_json::to_vec(body).unwrap_or_default())
                .map_err(|e| KubeError::Api {
                    what: what.clone(),
                    code: None,
                    message: e.to_string(),
                })
        };
        let merge = "application/merge-patch+json";
        let obj = match self
            .raw_ok(
                &what,
                json("PATCH", &path, merge, &mcn::spec_patch(desired))?,
                limits::MAX_ANSWER_BYTES,
                API_TIMEOUT,
            )
            .await
        {
            Ok(body) => body,
            Err(e) if e.not_found() => self
                .raw_ok(
                    &what,
                    json(
                        "POST",
                        mcn::MCN_PATH,
                        "application/json",
                        &mcn::object(&self.node, desired),
                    )?,
                    limits::MAX_ANSWER_BYTES,
                    API_TIMEOUT,
                )
                .await
                .map_err(|e| match e {
                    // A node's RBAC cannot create objects by name: the administrator (or the
                    // controller) does (docs/kubernetes.md).
                    KubeError::Api {
                        what,
                        code: Some(403),
                        message,
                    } => KubeError::Api {
                        what,
                        code: Some(403),
                        message: format!(
                            "{message}; there is no MachineConfigNode {} and this node may not create one: create it (see docs/kubernetes.md)",
                            self.node
                        ),
                    },
                    other => other,
                })?,
            Err(e) => return Err(e),
        };
        let generation = serde_json::from_slice::<Value>(&obj)
            .ok()
            .and_then(|v| v["metadata"]["generation"].as_i64());
        let status = mcn::status_patch(want, desired, since, generation);
        self.raw_ok(
            &what,
            json("PATCH", &format!("{path}/status"), merge, &status)?,
            limits::MAX_ANSWER_BYTES,
            API_TIMEOUT,
        )
        .await?;
        Ok(())
    }
}

/// `name` as one segment of a URL path: an object name (a DNS subdomain) has nothing to
/// escape, anything else is percent-escaped so that it cannot name another path.
fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The MachineConfig's JSON as the agent's config: parsed by [`crate::source::parse_bytes`]
/// (the API's JSON is YAML to the reader), under the name `machineconfig/<name>` in messages.
pub fn parse_machine_config(
    name: &str,
    bytes: Vec<u8>,
) -> Result<NamedConfig, crate::source::SourceError> {
    crate::source::parse_bytes(&format!("machineconfig/{name}"), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake API server (plain HTTP on loopback) whose MachineConfig never ends: refused at
    /// the 64 MiB limit, never held whole.
    #[tokio::test]
    async fn an_endless_machine_config_is_refused_at_the_size_limit() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                        .await;
                    let mut chunk = b"10000\r\n".to_vec();
                    chunk.extend(std::iter::repeat_n(b' ', 0x10000));
                    chunk.extend_from_slice(b"\r\n");
                    while s.write_all(&chunk).await.is_ok() {}
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
            ),
        )
        .unwrap();
        let kube = Kube::connect(Some(&kubeconfig), "node-a").await.unwrap();
        let err = kube.machine_config("big").await.unwrap_err().to_string();
        assert!(
            err.contains("reading MachineConfig big") && err.contains("larger than 64 MiB"),
            "{err}"
        );
    }

    #[test]
    fn names_cannot_leave_their_path_segment() {
        assert_eq!(
            path_segment("rendered-worker-1.a_b"),
            "rendered-worker-1.a_b"
        );
        assert_eq!(path_segment("../nodes/x?y"), "..%2Fnodes%2Fx%3Fy");
    }

    /// A MachineConfig as the API server returns it (metadata the server adds, kubectl's
    /// last-applied annotation) is read as the file would be.
    #[test]
    fn an_api_object_parses_as_a_machine_config() {
        let json = r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
          "metadata":{"name":"rendered-worker-1","uid":"0b1c","resourceVersion":"412","generation":1,
            "creationTimestamp":"2026-01-01T00:00:00Z",
            "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},
            "managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"machineconfiguration.openshift.io/v1"}]},
          "spec":{"config":{"ignition":{"version":"3.2.0"},
            "storage":{"files":[{"path":"/etc/hello","contents":{"source":"data:,hi"},"mode":420}]}}}}"#;
        let c = parse_machine_config("rendered-worker-1", json.as_bytes().to_vec()).unwrap();
        assert_eq!(c.name, "rendered-worker-1");
        let bad = r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
          "metadata":{"name":"x"},"spec":{"kernelType":"rt"}}"#;
        let e = parse_machine_config("x", bad.as_bytes().to_vec()).unwrap_err();
        assert!(e.to_string().contains("machineconfig/x"), "{e}");
    }
}
