//! The entry points ([`read_str`], [`read_machine_config`]) with their size limits, what they
//! return ([`Manifests`]), and the [`Reader`] that carries one file's state through the objects
//! of its documents (its methods for each kind live beside this file, one file per kind).

use super::validation::FieldValidation;
use crate::de::{DecodeError, DecodeWarning};
use crate::diag::Diagnostic;
use crate::model::{
    DisruptionPolicies, MachineConfig, MachineConfigPool, NodeInfo, Origin, Sourced,
};
use crate::node::{parse_documents, Node};

/// The largest manifest file (or request body) read: the server's limit on an apply body.
pub const MAX_MANIFEST_BYTES: usize = 64 << 20;

/// The largest single MachineConfig read by [`read_machine_config`] (a rendered config, which
/// merges many manifests): room for the most contents a config may hold
/// ([`crate::validate::MAX_CONFIG_CONTENTS_BYTES`], 256 MiB) written percent-encoded (three
/// characters a byte) and the rest of the config.
pub const MAX_RENDERED_BYTES: usize = 1 << 30;

/// Everything read from a set of inputs.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// MachineConfigs.
    pub machine_configs: Vec<Sourced<MachineConfig>>,
    /// MachineConfigPools.
    pub pools: Vec<Sourced<MachineConfigPool>>,
    /// Nodes.
    pub nodes: Vec<Sourced<NodeInfo>>,
    /// Node-disruption policies (from `MachineConfiguration` objects).
    pub policies: Vec<Sourced<DisruptionPolicies>>,
}

impl Manifests {
    /// The disruption policies of all `MachineConfiguration` objects read, concatenated.
    pub fn disruption_policies(&self) -> DisruptionPolicies {
        let mut out = DisruptionPolicies::default();
        for p in &self.policies {
            out.files.extend(p.item.files.iter().cloned());
            out.units.extend(p.item.units.iter().cloned());
            if p.item.ssh_key.is_some() {
                out.ssh_key = p.item.ssh_key.clone();
            }
        }
        out
    }

    /// Adds everything from `other`.
    pub fn extend(&mut self, other: Manifests) {
        self.machine_configs.extend(other.machine_configs);
        self.pools.extend(other.pools);
        self.nodes.extend(other.nodes);
        self.policies.extend(other.policies);
    }
}

/// Reads every object in `text` (the contents of `file`). Objects with errors are left out and
/// reported in the returned diagnostics, together with warnings; an unknown field is a warning
/// ([`FieldValidation::Warn`]: for what was accepted before, a stored object or one a Kubernetes
/// API server holds). What an admin hands in is read with [`read_str_with`].
pub fn read_str(file: &str, text: &str) -> (Manifests, Vec<Diagnostic>) {
    read_str_with(file, text, FieldValidation::Warn)
}

/// [`read_str`], with what an unknown field is ([`FieldValidation::Strict`]: an error).
pub fn read_str_with(
    file: &str,
    text: &str,
    validation: FieldValidation,
) -> (Manifests, Vec<Diagnostic>) {
    read_str_limited(file, text, MAX_MANIFEST_BYTES, "manifests", validation)
}

pub(super) fn read_str_limited(
    file: &str,
    text: &str,
    max_bytes: usize,
    what: &str,
    validation: FieldValidation,
) -> (Manifests, Vec<Diagnostic>) {
    let mut out = Manifests::default();
    let mut diags = Vec::new();
    if text.len() > max_bytes {
        diags.push(Diagnostic::error(
            file,
            None,
            "",
            format!(
                "the file is {} bytes; hearth reads {what} of at most {} MiB: split it into several files",
                text.len(),
                max_bytes >> 20
            ),
        ));
        return (out, diags);
    }
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) if e.limit => {
            diags.push(Diagnostic::error(
                file,
                Some(e.line),
                "",
                format!("refused at column {}: {}", e.col, e.message),
            ));
            return (out, diags);
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                Some(e.line),
                "",
                format!(
                    "not valid YAML or JSON at column {}: {} (check the indentation of this line and the ones before it)",
                    e.col, e.message
                ),
            ));
            return (out, diags);
        }
    };
    for (i, doc) in docs.iter().enumerate() {
        let mut reader = Reader {
            file,
            document: i + 1,
            out: &mut out,
            diags: &mut diags,
            failed_paths: Vec::new(),
            validation,
        };
        reader.object(doc, "");
    }
    (out, diags)
}

/// Reads a single MachineConfig from `text` (a rendered config file, for example), refusing
/// anything else.
pub fn read_machine_config(
    file: &str,
    text: &str,
) -> Result<(MachineConfig, Vec<Diagnostic>), Vec<Diagnostic>> {
    let (m, diags) = read_str_limited(
        file,
        text,
        MAX_RENDERED_BYTES,
        "rendered configs",
        FieldValidation::Warn,
    );
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    let count = m.machine_configs.len();
    if count != 1 || !m.pools.is_empty() || !m.nodes.is_empty() {
        return Err(vec![Diagnostic::error(
            file,
            None,
            "",
            format!("expected exactly one MachineConfig, found {count} MachineConfig(s) and {} other object(s)", m.pools.len() + m.nodes.len() + m.policies.len()),
        )]);
    }
    let mc = m
        .machine_configs
        .into_iter()
        .next()
        .map(|s| s.item)
        .unwrap_or_default();
    Ok((mc, diags))
}

/// One file being read: where it is, what was read so far, what was found wrong.
pub(super) struct Reader<'a> {
    pub(super) file: &'a str,
    pub(super) document: usize,
    pub(super) out: &'a mut Manifests,
    pub(super) diags: &'a mut Vec<Diagnostic>,
    /// Field paths of the decoding errors of the object being read: validation findings there
    /// (about the placeholders decoding went on with) are not reported.
    pub(super) failed_paths: Vec<String>,
    /// What an unknown field is.
    pub(super) validation: FieldValidation,
}

/// Rewrites `DecodeError`s raised while decoding `base` into diagnostics.
fn decode_diag(file: &str, e: DecodeError) -> Diagnostic {
    Diagnostic::error(file, e.line, &e.path, e.message)
}

impl Reader<'_> {
    /// Reports every decoding error of an object, remembering where they are (see
    /// `Reader::failed_paths`).
    pub(super) fn decode_errors(&mut self, errors: Vec<DecodeError>, object: &Option<String>) {
        for e in errors {
            self.failed_paths.push(e.path.clone());
            self.diags
                .push(decode_diag(self.file, e).with_object(object.clone()));
        }
    }
}

impl Reader<'_> {
    pub(super) fn origin(&self, node: &Node) -> Origin {
        Origin {
            file: self.file.to_string(),
            document: self.document,
            line: node.line,
        }
    }

    pub(super) fn push_warnings(&mut self, object: &Option<String>, warnings: Vec<DecodeWarning>) {
        for w in warnings {
            // Ignition 2's `filesystem` in an Ignition 3 config: a field hearth knows, ignored.
            if w.path.ends_with(".filesystem") && w.path.contains(".storage.") {
                self.diags.push(
                    Diagnostic::warning(
                        self.file,
                        Some(w.line),
                        &w.path,
                        "`filesystem` is an Ignition 2.x field; Ignition 3 places files by their path alone. Ignored",
                    )
                    .with_object(object.clone()),
                );
                continue;
            }
            let hint = w
                .did_you_mean
                .map(|f| format!("; did you mean `{f}`?"))
                .unwrap_or_default();
            let diag = match self.validation {
                FieldValidation::Ignore => continue,
                FieldValidation::Warn => Diagnostic::warning(
                    self.file,
                    Some(w.line),
                    &w.path,
                    format!("{}{hint}", w.message),
                ),
                FieldValidation::Strict => Diagnostic::error(
                    self.file,
                    Some(w.line),
                    &w.path,
                    format!(
                        "unknown field: it is in none of the schemas hearth reads (the MCO's \
                         types, Ignition 2.2 to 3.x){hint} (to have unknown fields ignored \
                         with a warning: hearth --validate=warn, the API's \
                         ?fieldValidation=Warn)"
                    ),
                ),
            };
            self.diags.push(diag.with_object(object.clone()));
        }
    }
}
