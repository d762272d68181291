//! What hearth-server writes into a first-boot Ignition config for the agent to read: the
//! files are part of the protocol between the two, so their paths are defined once, here.

/// The agent's settings: server URL, CA path, pool, bootstrap token, node name (an
/// environment file read by `hearth-agent.service`).
pub const AGENT_ENV_PATH: &str = "/etc/hearth/agent.env";
/// The fleet CA (PEM).
pub const CA_PATH: &str = "/etc/hearth/ca.crt";
/// The name of the rendered config the first-boot config was made from: the agent's first
/// sync verifies the host against it and adopts it without rewriting what Ignition wrote.
pub const STAMP_PATH: &str = "/etc/hearth/firstboot-config";
