//! Resolving a MachineConfig's tagged `osImageURL` (`registry.example:5000/os:4.16`) to the
//! digest of the manifest the tag names, once, when the config is applied: the config is stored
//! with that digest in its [`RESOLVED_ANNOTATION`], rendering deploys the pinned reference, and
//! every node of the pool pulls the same image however the tag moves later. Applying the config
//! again resolves the tag again.
//!
//! The OCI distribution API, as skopeo uses it: `HEAD /v2/<repo>/manifests/<tag>` with the
//! manifest media types accepted, its `Docker-Content-Digest` (or, without it, the SHA-256 of the
//! manifest, at most 4 MiB); a `401` answered with the challenge's scheme: `Basic` with the
//! registry's credentials, `Bearer` with a token from the realm it names (asked with those
//! credentials when there are some). Credentials come from a containers auth file
//! (`--registry-auth`, the format of `/etc/ostree/auth.json`), extra CAs from `--registry-ca`.
//! Every request is bounded in time, every body read in size.
//!
//! [`RESOLVED_ANNOTATION`]: hearth_config::container::RESOLVED_ANNOTATION

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use hearth_config::container::ContainerImage;
use hearth_config::digest::is_sha256_digest;
use sha2::{Digest as _, Sha256};

/// The media types a resolution accepts (lists first: a list's digest is what a pool pins; each
/// node deploys its platform's instance).
const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
                      application/vnd.docker.distribution.manifest.list.v2+json, \
                      application/vnd.oci.image.manifest.v1+json, \
                      application/vnd.docker.distribution.manifest.v2+json";

/// The largest manifest read (containers/image refuses larger ones too).
const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// The largest token answer read.
const MAX_TOKEN_BYTES: usize = 64 * 1024;
/// The largest auth file read.
const MAX_AUTH_FILE_BYTES: u64 = 1024 * 1024;
/// How long one request may take, connection included.
const REQUEST_TIME: Duration = Duration::from_secs(30);

/// Resolves tags to digests.
#[derive(Debug)]
pub struct Resolver {
    /// The HTTP client, made at the first resolution (a server that never resolves a tag
    /// never loads the system's CA certificates, which a machine may not have).
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    /// Extra CA certificates (`--registry-ca`).
    ca: Vec<reqwest::Certificate>,
    /// Registry (`host[:port]`) → `user:password`.
    credentials: BTreeMap<String, String>,
}

impl Resolver {
    /// A resolver with the credentials of `auth_file` (containers auth file) and the extra CA
    /// certificates (PEM) of `ca_file`, besides the system's; both files are read now.
    pub fn new(auth_file: Option<&Path>, ca_file: Option<&Path>) -> Result<Resolver, String> {
        let ca = match ca_file {
            Some(f) => {
                let pem =
                    std::fs::read(f).map_err(|e| format!("--registry-ca {}: {e}", f.display()))?;
                reqwest::Certificate::from_pem_bundle(&pem)
                    .map_err(|e| format!("--registry-ca {}: {e}", f.display()))?
            }
            None => Vec::new(),
        };
        let credentials = match auth_file {
            Some(f) => read_auth_file(f)?,
            None => BTreeMap::new(),
        };
        Ok(Resolver {
            client: std::sync::OnceLock::new(),
            ca,
            credentials,
        })
    }

    /// The client: the system's CAs and `--registry-ca`'s; only the latter when the system has
    /// none to load.
    fn client(&self) -> Result<&reqwest::Client, String> {
        let built = self.client.get_or_init(|| {
            let builder = || {
                reqwest::Client::builder()
                    .timeout(REQUEST_TIME)
                    .connect_timeout(Duration::from_secs(10))
                    .redirect(reqwest::redirect::Policy::limited(5))
                    .user_agent(concat!("hearth-server/", env!("CARGO_PKG_VERSION")))
            };
            let merged = builder().tls_certs_merge(self.ca.clone()).build();
            match merged {
                Ok(c) => Ok(c),
                Err(e) if !self.ca.is_empty() => {
                    tracing::warn!(error = %describe(&e), "the system's CA certificates cannot be used; trusting --registry-ca alone");
                    builder()
                        .tls_certs_only(self.ca.clone())
                        .build()
                        .map_err(|e| format!("the registry client: {}", describe(&e)))
                }
                Err(e) => Err(format!(
                    "the registry client: {} (give hearth-server --registry-ca)",
                    describe(&e)
                )),
            }
        });
        built.as_ref().map_err(Clone::clone)
    }

    /// The digest of the manifest a tag-only registry reference names.
    pub async fn digest(&self, image: &ContainerImage) -> Result<String, String> {
        let registry = image.registry().ok_or("not a registry image")?;
        let repository = image.repository();
        let path = repository
            .strip_prefix(registry)
            .and_then(|p| p.strip_prefix('/'))
            .ok_or("no repository in the reference")?;
        let tag = image
            .name
            .strip_prefix(repository)
            .and_then(|t| t.strip_prefix(':'))
            .unwrap_or("latest");
        let url = format!("https://{registry}/v2/{path}/manifests/{tag}");
        let creds = self.credentials.get(registry);
        let client = self.client()?;
        let mut auth: Option<String> = None;
        for attempt in 0..2 {
            let mut req = client.head(&url).header("Accept", ACCEPT);
            if let Some(a) = &auth {
                req = req.header("Authorization", a);
            }
            let resp = req.send().await.map_err(|e| describe(&e))?;
            let status = resp.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && attempt == 0 {
                let challenge = resp
                    .headers()
                    .get("WWW-Authenticate")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                auth = Some(self.answer(&challenge, creds, registry, path).await?);
                continue;
            }
            if status == reqwest::StatusCode::UNAUTHORIZED {
                return Err(format!(
                    "the registry refused the credentials for {registry} (401)"
                ));
            }
            if !status.is_success() {
                return Err(format!("the registry answered {status} for {url}"));
            }
            if let Some(d) = resp
                .headers()
                .get("Docker-Content-Digest")
                .and_then(|v| v.to_str().ok())
                .filter(|d| is_sha256_digest(d))
            {
                return Ok(d.to_string());
            }
            // No digest header: the manifest's own SHA-256.
            let mut req = client.get(&url).header("Accept", ACCEPT);
            if let Some(a) = &auth {
                req = req.header("Authorization", a);
            }
            let resp = req.send().await.map_err(|e| describe(&e))?;
            if !resp.status().is_success() {
                return Err(format!("the registry answered {} for {url}", resp.status()));
            }
            let body = read_bounded(resp, MAX_MANIFEST_BYTES, "the manifest").await?;
            return Ok(format!("sha256:{}", hex::encode(Sha256::digest(&body))));
        }
        Err("the registry asked for credentials twice".into())
    }

    /// The `Authorization` value answering a 401's challenge.
    async fn answer(
        &self,
        challenge: &str,
        creds: Option<&String>,
        registry: &str,
        repository: &str,
    ) -> Result<String, String> {
        let basic = || {
            creds.map(|c| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(c)
                )
            })
        };
        let no_creds = || {
            format!(
                "{registry} asks for credentials and hearth-server has none for it \
                 (--registry-auth FILE, a containers auth file)"
            )
        };
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return basic().ok_or_else(no_creds);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(format!(
                "{registry} asks for an authentication hearth-server does not speak: {challenge:?}"
            ));
        }
        let params = challenge_params(params);
        let realm = params
            .get("realm")
            .ok_or_else(|| format!("{registry}'s Bearer challenge names no realm"))?;
        let mut token_url = reqwest::Url::parse(realm)
            .map_err(|e| format!("{registry}'s token realm {realm:?}: {e}"))?;
        {
            let mut q = token_url.query_pairs_mut();
            if let Some(service) = params.get("service") {
                q.append_pair("service", service);
            }
            let scope = params
                .get("scope")
                .cloned()
                .unwrap_or_else(|| format!("repository:{repository}:pull"));
            q.append_pair("scope", &scope);
        }
        let mut req = self.client()?.get(token_url);
        if let Some(b) = basic() {
            req = req.header("Authorization", b);
        }
        let resp = req.send().await.map_err(|e| describe(&e))?;
        if !resp.status().is_success() {
            return Err(match resp.status() {
                reqwest::StatusCode::UNAUTHORIZED if creds.is_none() => no_creds(),
                s => format!("{registry}'s token service answered {s}"),
            });
        }
        let body = read_bounded(resp, MAX_TOKEN_BYTES, "the token").await?;
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{registry}'s token is not JSON: {e}"))?;
        let token = v["token"]
            .as_str()
            .or(v["access_token"].as_str())
            .ok_or_else(|| format!("{registry}'s token service gave no token"))?;
        Ok(format!("Bearer {token}"))
    }
}

/// `realm="…",service="…",scope="…"` as a map.
fn challenge_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, n)) => (v.to_string(), n),
                None => (quoted.to_string(), ""),
            },
            None => match after.split_once(',') {
                Some((v, n)) => (v.trim().to_string(), n),
                None => (after.trim().to_string(), ""),
            },
        };
        out.insert(key, value);
        rest = next.trim_start_matches(',').trim();
    }
    out
}

async fn read_bounded(
    mut resp: reqwest::Response,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| describe(&e))? {
        if body.len() + chunk.len() > max {
            return Err(format!("{what} is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The credentials of a containers auth file: registry → `user:password`.
fn read_auth_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    use std::io::Read;
    let what = || format!("--registry-auth {}", path.display());
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_AUTH_FILE_BYTES + 1).read_to_end(&mut raw))
        .map_err(|e| format!("{}: {e}", what()))?;
    if raw.len() as u64 > MAX_AUTH_FILE_BYTES {
        return Err(format!(
            "{}: larger than {MAX_AUTH_FILE_BYTES} bytes",
            what()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&raw).map_err(|e| format!("{}: not JSON: {e}", what()))?;
    let mut out = BTreeMap::new();
    for (registry, entry) in v["auths"].as_object().into_iter().flatten() {
        let Some(auth) = entry["auth"].as_str() else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|s| s.contains(':'))
            .ok_or_else(|| {
                format!(
                    "{}: auths.{registry}.auth is not base64 of user:password",
                    what()
                )
            })?;
        let host = registry
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .split('/')
            .next()
            .unwrap_or_default();
        out.insert(host.to_string(), decoded);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_and_auth_files_are_read() {
        let p = challenge_params(
            r#"realm="https://auth.example/token",service="registry.example",scope="repository:os:pull""#,
        );
        assert_eq!(p["realm"], "https://auth.example/token");
        assert_eq!(p["service"], "registry.example");
        assert_eq!(p["scope"], "repository:os:pull");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("auth.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("u:p");
        std::fs::write(
            &f,
            format!(r#"{{"auths": {{"registry.example:5000": {{"auth": "{auth}"}}}}}}"#),
        )
        .unwrap();
        assert_eq!(read_auth_file(&f).unwrap()["registry.example:5000"], "u:p");
        std::fs::write(&f, r#"{"auths": {"r": {"auth": "!!"}}}"#).unwrap();
        assert!(read_auth_file(&f).unwrap_err().contains("auths.r.auth"));
    }
}
