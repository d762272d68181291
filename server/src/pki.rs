//! The state directory's secrets: the fleet CA, the serving certificate, the admin token and the
//! first bootstrap tokens. Created on first start, reused afterwards; every file is written
//! atomically (temporary file, fsync, rename, fsync of the directory) with mode 0600 in
//! directories of mode 0700.
//!
//! ```text
//! <state-dir>/
//!   hearth.redb            the store
//!   admin.token            the admin token (the store keeps only its sha256)
//!   tokens/<pool>.token    bootstrap tokens created by the server (master, worker)
//!   pki/ca.crt, ca.key     the fleet CA (ECDSA P-256, 10 years)
//!   pki/server.crt, .key   the serving certificate (signed by the CA, 397 days, renewed on
//!                          start within 30 days of expiry or when --san changes)
//!   pki/server.json        the serving certificate's names and expiry
//! ```
//!
//! Admin client certificates ([`issue_admin_cert`]) are signed by the same CA; the server
//! keeps no copy of them.

use anyhow::{anyhow, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The CA's subject; fixed so that the CA can sign again after a restart.
const CA_COMMON_NAME: &str = "hearth-server fleet CA";
const CA_ORGANIZATION: &str = "hearth";
const CA_DAYS: i64 = 3650;
const SERVER_DAYS: i64 = 397;
const RENEW_DAYS: i64 = 30;

/// Token prefixes (they tell tokens apart in logs and to secret scanners).
pub const ADMIN_PREFIX: &str = "hearth-admin-";
/// Bootstrap token prefix.
pub const BOOTSTRAP_PREFIX: &str = "hearth-bootstrap-";
/// Node credential prefix.
pub const NODE_PREFIX: &str = "hearth-node-";

/// Where things live in the state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The state directory.
    pub dir: PathBuf,
}

impl Layout {
    /// The database file.
    pub fn database(&self) -> PathBuf {
        self.dir.join("hearth.redb")
    }
    /// The admin token file.
    pub fn admin_token(&self) -> PathBuf {
        self.dir.join("admin.token")
    }
    /// The metrics token file (read-only access to `/metrics`).
    pub fn metrics_token(&self) -> PathBuf {
        self.dir.join("metrics.token")
    }
    /// The bootstrap token file of a pool.
    pub fn bootstrap_token(&self, pool: &str) -> PathBuf {
        self.dir.join("tokens").join(format!("{pool}.token"))
    }
    /// The CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("pki/ca.crt")
    }
    fn ca_key(&self) -> PathBuf {
        self.dir.join("pki/ca.key")
    }
    fn server_cert(&self) -> PathBuf {
        self.dir.join("pki/server.crt")
    }
    fn server_key(&self) -> PathBuf {
        self.dir.join("pki/server.key")
    }
    fn server_meta(&self) -> PathBuf {
        self.dir.join("pki/server.json")
    }
}

/// The TLS material the server serves with.
#[derive(Debug)]
pub struct Tls {
    /// The CA certificate (PEM): what clients trust, and what first-booting nodes receive.
    pub ca_pem: String,
    /// sha256 of the CA certificate (DER), hex, for people to compare.
    pub ca_fingerprint: String,
    /// The serving certificate chain.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its key.
    pub key: PrivateKeyDer<'static>,
    /// The names and addresses the certificate is valid for.
    pub sans: Vec<String>,
}

/// What [`init`] found or made.
#[derive(Debug)]
pub struct Init {
    /// TLS.
    pub tls: Tls,
    /// The admin token (from `admin.token`).
    pub admin_token: String,
    /// True when the CA was created now (first start).
    pub created_ca: bool,
    /// True when the admin token was created now.
    pub created_admin_token: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerMeta {
    sans: Vec<String>,
    not_after: i64,
}

/// Random bytes from the TLS provider's CSPRNG.
pub fn random_bytes(n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut buf)
        .map_err(|_| anyhow!("the system random number generator failed"))?;
    Ok(buf)
}

/// A new token: the prefix and 32 random bytes (hex).
pub fn new_token(prefix: &str) -> Result<String> {
    Ok(format!("{prefix}{}", hex::encode(random_bytes(32)?)))
}

/// sha256 of a token, hex: what the store keeps.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.trim().as_bytes()))
}

/// The prefix of the metrics token.
pub const METRICS_PREFIX: &str = "hearth-metrics-";

/// The metrics token: `<state-dir>/metrics.token`, created (mode 0600) when missing. Rotate it
/// by writing a new one there and restarting.
pub fn metrics_token(layout: &Layout) -> Result<String> {
    let path = layout.metrics_token();
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => {
            let t = new_token(METRICS_PREFIX)?;
            write_private(&path, format!("{t}\n").as_bytes())?;
            Ok(t)
        }
    }
}

/// Creates `dir` (and parents) and sets it to mode 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot set the mode of {}", dir.display()))?;
    Ok(())
}

/// Writes `bytes` to `path` atomically with mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    ensure_private_dir(dir)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("bad file name {}", path.display()))?;
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn ca_params(now: time::OffsetDateTime) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    dn.push(DnType::OrganizationName, CA_ORGANIZATION);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(CA_DAYS);
    p
}

/// The host name (for the default SANs and URLs).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The default SANs: `localhost`, `127.0.0.1`, `::1` and the host name.
pub fn default_sans() -> Vec<String> {
    let mut out = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let h = hostname();
    if !out.contains(&h) {
        out.push(h);
    }
    out
}

/// Sets up the state directory: creates what is missing, reuses what is there.
pub fn init(layout: &Layout, sans: &[String]) -> Result<Init> {
    ensure_private_dir(&layout.dir)?;
    ensure_private_dir(&layout.dir.join("pki"))?;
    ensure_private_dir(&layout.dir.join("tokens"))?;
    let now = time::OffsetDateTime::now_utc();

    // The CA.
    let (ca_key, ca_pem, created_ca) =
        match (read_opt(&layout.ca_key())?, read_opt(&layout.ca_cert())?) {
            (Some(k), Some(c)) => (
                KeyPair::from_pem(&k).map_err(|e| {
                    anyhow!("{} is not a usable key: {e}", layout.ca_key().display())
                })?,
                c,
                false,
            ),
            (None, None) => {
                let key = KeyPair::generate().map_err(|e| anyhow!("cannot make a key: {e}"))?;
                let cert = ca_params(now)
                    .self_signed(&key)
                    .map_err(|e| anyhow!("cannot make the CA: {e}"))?;
                write_private(&layout.ca_key(), key.serialize_pem().as_bytes())?;
                write_private(&layout.ca_cert(), cert.pem().as_bytes())?;
                // A new CA invalidates any serving certificate.
                let _ = std::fs::remove_file(layout.server_meta());
                (key, cert.pem(), true)
            }
            _ => {
                return Err(anyhow!(
                "{} and {} must both exist or both be absent; restore the missing one or remove both to make a new CA (clients then need the new ca.crt)",
                layout.ca_cert().display(),
                layout.ca_key().display()
            ))
            }
        };
    let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
        .map_err(|e| anyhow!("{} is not a certificate: {e}", layout.ca_cert().display()))?;
    let ca_fingerprint = hex::encode(Sha256::digest(ca_der.as_ref()));

    // The serving certificate.
    let meta: Option<ServerMeta> =
        read_opt(&layout.server_meta())?.and_then(|s| serde_json::from_str(&s).ok());
    let mut wanted: Vec<String> = sans.to_vec();
    wanted.dedup();
    let fresh = meta.as_ref().is_some_and(|m| {
        m.sans == wanted && m.not_after > (now + time::Duration::days(RENEW_DAYS)).unix_timestamp()
    }) && layout.server_cert().exists()
        && layout.server_key().exists();
    if !fresh {
        let key = KeyPair::generate().map_err(|e| anyhow!("cannot make a key: {e}"))?;
        let mut params =
            CertificateParams::new(wanted.clone()).map_err(|e| anyhow!("invalid --san: {e}"))?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            wanted
                .first()
                .cloned()
                .unwrap_or_else(|| "hearth-server".into()),
        );
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(SERVER_DAYS);
        let issuer = Issuer::new(ca_params(now), &ca_key);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| anyhow!("cannot sign the serving certificate: {e}"))?;
        write_private(&layout.server_key(), key.serialize_pem().as_bytes())?;
        write_private(&layout.server_cert(), cert.pem().as_bytes())?;
        let m = ServerMeta {
            sans: wanted.clone(),
            not_after: params.not_after.unix_timestamp(),
        };
        write_private(&layout.server_meta(), &serde_json::to_vec_pretty(&m)?)?;
    }
    let cert_pem = std::fs::read(layout.server_cert())?;
    let key_pem = std::fs::read(layout.server_key())?;
    let mut chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("{}: {e}", layout.server_cert().display()))?;
    chain.push(ca_der);
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| anyhow!("{}: {e}", layout.server_key().display()))?;

    // The admin token.
    let (admin_token, created_admin_token) = match read_opt(&layout.admin_token())? {
        Some(t) if !t.trim().is_empty() => (t.trim().to_string(), false),
        _ => {
            let t = new_token(ADMIN_PREFIX)?;
            write_private(&layout.admin_token(), format!("{t}\n").as_bytes())?;
            (t, true)
        }
    };

    Ok(Init {
        tls: Tls {
            ca_pem,
            ca_fingerprint,
            chain,
            key,
            sans: wanted,
        },
        admin_token,
        created_ca,
        created_admin_token,
    })
}

/// The organization (`O`) of admin client certificates: a client certificate signed by the fleet
/// CA is an admin's only with it (and the client-authentication key usage).
pub const ADMIN_ORGANIZATION: &str = "hearth admins";
/// How long an admin certificate is valid unless told otherwise.
pub const ADMIN_CERT_DAYS: i64 = 90;

/// A client certificate and its key (PEM).
#[derive(Debug)]
pub struct ClientCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (keep it 0600).
    pub key_pem: String,
}

fn load_ca(layout: &Layout) -> Result<KeyPair> {
    let k = read_opt(&layout.ca_key())?.ok_or_else(|| {
        anyhow!(
            "{} does not exist: start hearth-server once with this --state-dir to create the fleet CA",
            layout.ca_key().display()
        )
    })?;
    KeyPair::from_pem(&k)
        .map_err(|e| anyhow!("{} is not a usable key: {e}", layout.ca_key().display()))
}

/// Issues an admin client certificate for `name` (its CN) from the fleet CA, valid for `days`.
pub fn issue_admin_cert(layout: &Layout, name: &str, days: i64) -> Result<ClientCert> {
    let now = time::OffsetDateTime::now_utc();
    issue_client_cert(
        layout,
        name,
        Some(ADMIN_ORGANIZATION),
        now - time::Duration::hours(1),
        now + time::Duration::days(days),
    )
}

/// Issues a client certificate from the fleet CA with any subject and validity (tests use it
/// for expired certificates and certificates of no admin).
pub fn issue_client_cert(
    layout: &Layout,
    name: &str,
    organization: Option<&str>,
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> Result<ClientCert> {
    if name.trim().is_empty() || name.chars().any(|c| c.is_control()) {
        return Err(anyhow!(
            "the certificate's name must be a non-empty printable name"
        ));
    }
    let ca_key = load_ca(layout)?;
    let key = KeyPair::generate().map_err(|e| anyhow!("cannot make a key: {e}"))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    params.distinguished_name = dn;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before;
    params.not_after = not_after;
    let issuer = Issuer::new(ca_params(time::OffsetDateTime::now_utc()), &ca_key);
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| anyhow!("cannot sign the client certificate: {e}"))?;
    Ok(ClientCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Who a verified client certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The subject's CN.
    pub name: String,
    /// Whether it was issued for an admin ([`ADMIN_ORGANIZATION`]).
    pub admin: bool,
}

/// Reads the subject of a client certificate the TLS layer has verified against the fleet CA.
pub fn client_identity(der: &[u8]) -> Option<ClientIdentity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())?
        .to_string();
    let admin = subject
        .iter_organization()
        .any(|a| a.as_str().ok() == Some(ADMIN_ORGANIZATION));
    Some(ClientIdentity { name, admin })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn first_start_creates_and_second_reuses() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout {
            dir: d.path().join("state"),
        };
        let sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let a = init(&layout, &sans).unwrap();
        assert!(a.created_ca && a.created_admin_token);
        assert!(a.admin_token.starts_with(ADMIN_PREFIX));
        for f in ["pki/ca.key", "pki/ca.crt", "pki/server.key", "admin.token"] {
            let m = std::fs::metadata(layout.dir.join(f)).unwrap();
            assert_eq!(m.mode() & 0o777, 0o600, "{f}");
        }
        assert_eq!(
            std::fs::metadata(&layout.dir).unwrap().mode() & 0o777,
            0o700
        );
        let server_pem = std::fs::read(layout.server_cert()).unwrap();
        let b = init(&layout, &sans).unwrap();
        assert!(!b.created_ca && !b.created_admin_token);
        assert_eq!(a.admin_token, b.admin_token);
        assert_eq!(a.tls.ca_pem, b.tls.ca_pem);
        assert_eq!(std::fs::read(layout.server_cert()).unwrap(), server_pem);
        // New names: a new serving certificate from the same CA.
        let c = init(&layout, &["example.test".to_string()]).unwrap();
        assert_eq!(c.tls.ca_pem, a.tls.ca_pem);
        assert_ne!(std::fs::read(layout.server_cert()).unwrap(), server_pem);
    }
}
