//! A booted container ([`SystemdHost`]) as a node of a [`KubeCluster`]: the API server reached
//! from the container's own loopback through a relay the test process runs, and the node's
//! credentials and kubeconfig installed inside.

use std::net::SocketAddr;

use anyhow::{Context, Result};

use super::{pki, KubeCluster, HOST_KUBECONFIG};
use crate::relay_into;
use crate::SystemdHost;

impl KubeCluster {
    /// Makes `host` node `name` of this cluster: a relay from its loopback to the API server,
    /// and node `name`'s client certificate, key, the cluster's CA and a kubeconfig naming the
    /// relay under `/etc/hearth/kube/` inside. Returns the kubeconfig's path inside
    /// ([`HOST_KUBECONFIG`]) and the relay's port there (a reboot of the container needs the
    /// relay again: [`relay_into`] with that port and [`KubeCluster::server_addr`]).
    pub fn connect_host(&self, host: &SystemdHost, name: &str) -> Result<(String, u16)> {
        let port = relay_into(host, self.server_addr()?, 0)?;
        let (crt, key) = {
            super::check_node_name(name)?;
            self.pki.client_cert(
                &format!("node-{name}"),
                &format!("system:node:{name}"),
                &[super::NODES_GROUP],
            )?
        };
        let put = |path: &str, from: &std::path::Path| -> Result<()> {
            let p = host.path(path);
            std::fs::create_dir_all(p.parent().context("a path with a parent")?)?;
            std::fs::copy(from, &p).with_context(|| format!("writing {path} into the host"))?;
            Ok(())
        };
        put("/etc/hearth/kube/ca.crt", &self.pki.ca_cert())?;
        put("/etc/hearth/kube/node.crt", &crt)?;
        put("/etc/hearth/kube/node.key", &key)?;
        let inside = pki::kubeconfig(
            &format!("https://127.0.0.1:{port}"),
            std::path::Path::new("/etc/hearth/kube/ca.crt"),
            pki::Credential::Cert(
                std::path::Path::new("/etc/hearth/kube/node.crt"),
                std::path::Path::new("/etc/hearth/kube/node.key"),
            ),
        );
        std::fs::write(host.path(HOST_KUBECONFIG), inside)
            .context("writing the kubeconfig into the host")?;
        Ok((HOST_KUBECONFIG.to_string(), port))
    }

    /// The API server's address on the test machine's loopback.
    pub fn server_addr(&self) -> Result<SocketAddr> {
        self.server()
            .trim_start_matches("https://")
            .parse()
            .context("the API server's address")
    }
}
