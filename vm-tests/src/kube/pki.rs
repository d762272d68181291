//! The test cluster's credentials, made fresh for every cluster with rcgen: a CA (which also
//! signs client certificates: `--client-ca-file`), the API server's serving certificate
//! (SAN `IP:127.0.0.1` and `localhost`), the service-account signing key, the static tokens
//! (`--token-auth-file`) and kubeconfig files.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::util;

/// The group whose members may do everything (Kubernetes' built-in superuser group).
pub const MASTERS_GROUP: &str = "system:masters";
/// The group of nodes (the Node authorizer and NodeRestriction know it).
pub const NODES_GROUP: &str = "system:nodes";

/// One static identity of `--token-auth-file`.
#[derive(Debug, Clone)]
pub(crate) struct StaticToken {
    pub token: String,
    pub user: String,
    pub groups: Vec<String>,
}

impl StaticToken {
    pub fn new(user: &str, groups: &[&str]) -> Result<StaticToken> {
        Ok(StaticToken {
            token: util::random_hex32()?,
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        })
    }
}

/// The CA and the files made from it, all in one directory.
pub(crate) struct Pki {
    dir: PathBuf,
    ca_params: CertificateParams,
    ca_key: KeyPair,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish()
    }
}

impl Pki {
    /// Makes the CA, the serving certificate and the service-account key in `dir`.
    pub fn create(dir: &Path) -> Result<Pki> {
        let pki = Pki::new_ca(dir, "hearth test kubernetes CA")?;
        pki.sign_serving("apiserver", "kube-apiserver")?;
        // The service-account signing key (ECDSA P-256, PKCS#8) and its public half (what
        // `--service-account-key-file` reads).
        let sa = key()?;
        write(&dir.join("sa.key"), &sa.serialize_pem())?;
        write(&dir.join("sa.pub"), &sa.public_key_pem())?;
        Ok(pki)
    }

    /// A CA named `common_name` in `dir` (its certificate in `ca.crt`): also the test
    /// registry's (`crate::registry`).
    pub fn new_ca(dir: &Path, common_name: &str) -> Result<Pki> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut ca_params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        ca_params.distinguished_name = dn;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = key()?;
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .map_err(|e| anyhow!("cannot make the test CA {common_name:?}: {e}"))?;
        write(&dir.join("ca.crt"), &ca_cert.pem())?;
        Ok(Pki {
            dir: dir.to_path_buf(),
            ca_params,
            ca_key,
        })
    }

    /// A serving certificate for `127.0.0.1` and `localhost` signed by the CA: `<name>.crt`,
    /// `<name>.key`.
    pub fn sign_serving(&self, name: &str, common_name: &str) -> Result<(PathBuf, PathBuf)> {
        self.sign_serving_for(name, common_name, &["127.0.0.1", "localhost"])
    }

    /// A serving certificate for `names` (IP addresses or DNS names), signed by the CA.
    pub fn sign_serving_for(
        &self,
        name: &str,
        common_name: &str,
        names: &[&str],
    ) -> Result<(PathBuf, PathBuf)> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .map_err(|e| anyhow!("serving certificate names: {e}"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, name)
    }

    /// The CA certificate (PEM file).
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The serving certificate and its key.
    pub fn serving(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("apiserver.crt"),
            self.dir.join("apiserver.key"),
        )
    }

    /// The service-account signing key and its public key.
    pub fn sa_keys(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("sa.key"), self.dir.join("sa.pub"))
    }

    /// A client certificate for `user` in `groups` (CN and O, as Kubernetes reads them),
    /// signed by the CA: returns the certificate and key files `<name>.crt`, `<name>.key`.
    pub fn client_cert(
        &self,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> Result<(PathBuf, PathBuf)> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, user);
        for g in groups {
            dn.push(DnType::OrganizationName, *g);
        }
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, name)
    }

    fn sign(&self, mut params: CertificateParams, name: &str) -> Result<(PathBuf, PathBuf)> {
        params.use_authority_key_identifier_extension = true;
        let key = key()?;
        let issuer = Issuer::new(self.ca_params.clone(), &self.ca_key);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| anyhow!("cannot sign the certificate {name}: {e}"))?;
        let crt = self.dir.join(format!("{name}.crt"));
        let key_path = self.dir.join(format!("{name}.key"));
        write(&key_path, &key.serialize_pem())?;
        write(&crt, &cert.pem())?;
        Ok((crt, key_path))
    }
}

fn key() -> Result<KeyPair> {
    KeyPair::generate().map_err(|e| anyhow!("cannot make a key: {e}"))
}

/// Writes a file of the test cluster (mode 0600: keys and tokens).
pub(crate) fn write(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The `--token-auth-file` text: `token,user,uid,"group1,group2"` per line.
pub(crate) fn token_file(tokens: &[StaticToken]) -> String {
    let mut out = String::new();
    for t in tokens {
        let _ = writeln!(
            out,
            "{},{},{},\"{}\"",
            t.token,
            t.user,
            t.user,
            t.groups.join(",")
        );
    }
    out
}

/// How a kubeconfig's user proves who it is.
pub(crate) enum Credential<'a> {
    /// A bearer token.
    Token(&'a str),
    /// A client certificate and its key (files).
    Cert(&'a Path, &'a Path),
}

/// A kubeconfig (JSON, which every kubeconfig reader takes) with one cluster, user and
/// context named `hearth-test`, files referenced by absolute path.
pub(crate) fn kubeconfig(server: &str, ca: &Path, cred: Credential<'_>) -> String {
    let user = match cred {
        Credential::Token(t) => serde_json::json!({ "token": t }),
        Credential::Cert(crt, key) => serde_json::json!({
            "client-certificate": crt,
            "client-key": key,
        }),
    };
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "hearth-test", "cluster": {
            "server": server,
            "certificate-authority": ca,
        }}],
        "users": [{ "name": "hearth-test", "user": user }],
        "contexts": [{ "name": "hearth-test", "context": {
            "cluster": "hearth-test",
            "user": "hearth-test",
        }}],
        "current-context": "hearth-test",
    });
    serde_json::to_string_pretty(&doc).expect("a JSON value serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_quotes_the_groups() {
        let t = StaticToken {
            token: "abc".into(),
            user: "admin".into(),
            groups: vec!["system:masters".into(), "x".into()],
        };
        assert_eq!(token_file(&[t]), "abc,admin,admin,\"system:masters,x\"\n");
    }

    #[test]
    fn kubeconfig_names_one_context() {
        let k = kubeconfig(
            "https://127.0.0.1:1",
            Path::new("/ca.crt"),
            Credential::Token("t"),
        );
        let v: serde_json::Value = serde_json::from_str(&k).unwrap();
        assert_eq!(v["current-context"], "hearth-test");
        assert_eq!(v["users"][0]["user"]["token"], "t");
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority"],
            "/ca.crt"
        );
    }
}
