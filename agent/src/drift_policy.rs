//! Drift policies per path (`--drift-policy`, `--drift PATH=POLICY`) and what they mean for an
//! apply: a managed path that differs from its config and that the apply did not write is
//! *drift*, not a failed step. Under `ignore` it is exempt; under `report` (and `revert`, which
//! the daemon's monitor puts back) it is listed as drift and never fails unrelated work.
//! Everything else that differs after an apply is a failure. Pure logic.

use hearth_config::plan::{Action, Plan};
use hearth_hostops::drift::{self, DriftMonitor, DriftPolicy, ManagedPath};
use hearth_hostops::fs::Root;
use hearth_hostops::verify::Mismatch;
use std::collections::BTreeSet;

/// Drift policies: a default and per-path overrides (the longest path match wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftPolicies {
    default: DriftPolicy,
    overrides: Vec<(String, DriftPolicy)>,
}

/// A parsed policy name.
pub fn parse_policy(name: &str) -> Option<DriftPolicy> {
    match name {
        "report" => Some(DriftPolicy::Report),
        "revert" => Some(DriftPolicy::Revert),
        "ignore" => Some(DriftPolicy::Ignore),
        _ => None,
    }
}

impl DriftPolicies {
    /// `default` for every path but those of `specs` (`PATH=report|revert|ignore`).
    pub fn parse(default: DriftPolicy, specs: &[String]) -> anyhow::Result<DriftPolicies> {
        let mut overrides = Vec::new();
        for spec in specs {
            let (path, policy) = spec.rsplit_once('=').ok_or_else(|| {
                anyhow::anyhow!("--drift {spec:?}: expected PATH=report|revert|ignore")
            })?;
            let policy = parse_policy(policy).ok_or_else(|| {
                anyhow::anyhow!(
                    "--drift {spec:?}: unknown policy {policy:?}; expected report, revert or ignore"
                )
            })?;
            if !path.starts_with('/') {
                anyhow::bail!("--drift {spec:?}: the path must be absolute");
            }
            overrides.push((path.trim_end_matches('/').to_string(), policy));
        }
        Ok(DriftPolicies { default, overrides })
    }

    /// The policy of `path`.
    pub fn policy(&self, path: &str) -> DriftPolicy {
        self.overrides
            .iter()
            .filter(|(p, _)| p.is_empty() || path == p || path.starts_with(&format!("{p}/")))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, pol)| *pol)
            .unwrap_or(self.default)
    }

    /// The managed paths of `config` to watch, each with its policy (ignored ones left out).
    pub fn managed(
        &self,
        root: &Root,
        config: &hearth_config::ignition::Config,
    ) -> Vec<ManagedPath> {
        match drift::managed_paths(root, config, self.default) {
            Ok(paths) => paths
                .into_iter()
                .map(|mut m| {
                    m.policy = self.policy(&m.path);
                    // The expected bytes are needed only to put a file back.
                    if m.policy != DriftPolicy::Revert {
                        m.content = None;
                    }
                    m
                })
                .filter(|m| m.policy != DriftPolicy::Ignore)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot compute the paths to watch for drift");
                Vec::new()
            }
        }
    }

    /// Puts back the managed paths of `config` under `revert` that differ (what the daemon's
    /// drift monitor does, once); whether any was put back.
    pub fn revert(&self, root: &Root, config: &hearth_config::ignition::Config) -> bool {
        let managed: Vec<ManagedPath> = self
            .managed(root, config)
            .into_iter()
            .filter(|m| m.policy == DriftPolicy::Revert)
            .collect();
        if managed.is_empty() {
            return false;
        }
        match DriftMonitor::new(root, managed) {
            Ok(mut monitor) => {
                let events = monitor.check_all();
                for ev in &events {
                    tracing::warn!(path = %ev.path, "drift: {}: {}", ev.path, ev.what);
                }
                events.iter().any(|e| e.reverted)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the paths under the revert policy");
                false
            }
        }
    }

    /// Splits what verification found into failures and drift. A mismatch is drift when it is
    /// about a path the apply did not write (`touched`): under `ignore` it is dropped, otherwise
    /// it becomes a drift line. Mismatches of paths the apply wrote, and those not about a path
    /// (enablement, SSH keys, password), are failures.
    pub fn split(
        &self,
        mismatches: Vec<Mismatch>,
        touched: &BTreeSet<String>,
    ) -> (Vec<Mismatch>, Vec<String>) {
        let mut failures = Vec::new();
        let mut drifted = Vec::new();
        for m in mismatches {
            let is_path = m.subject.starts_with('/');
            if !is_path || touched.contains(&m.subject) {
                failures.push(m);
                continue;
            }
            match self.policy(&m.subject) {
                DriftPolicy::Ignore => {}
                DriftPolicy::Report | DriftPolicy::Revert => drifted.push(format!(
                    "{} (drift policy {})",
                    m,
                    name(self.policy(&m.subject))
                )),
            }
        }
        (failures, drifted)
    }
}

/// The policy's name as the command line spells it.
pub fn name(p: DriftPolicy) -> &'static str {
    match p {
        DriftPolicy::Report => "report",
        DriftPolicy::Revert => "revert",
        DriftPolicy::Ignore => "ignore",
    }
}

/// The paths a plan writes or removes (files, unit files, drop-ins, masks): what verification
/// after it holds it to. A managed path outside this set that differs is drift.
pub fn touched_paths(p: &Plan) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for a in &p.actions {
        match a {
            Action::WriteFile { file } => {
                out.insert(file.path.clone());
            }
            Action::DeleteFile { path } => {
                out.insert(path.clone());
            }
            Action::WriteUnit { name, .. }
            | Action::DeleteUnit { name }
            | Action::MaskUnit { name }
            | Action::UnmaskUnit { name } => {
                out.insert(hearth_config::paths::unit_path(name));
            }
            Action::WriteDropin { unit, name, .. } | Action::DeleteDropin { unit, name } => {
                out.insert(hearth_config::paths::dropin_path(unit, name));
            }
            _ => {}
        }
    }
    out
}

/// The reason of a `Done` state with drift: how many managed paths differ (each is in the
/// drift list); `None` without drift.
pub fn drift_reason(drift: &[String]) -> Option<String> {
    match drift.len() {
        0 => None,
        1 => Some(format!(
            "1 managed path differs from the config (drift): {}",
            drift[0]
        )),
        n => Some(format!(
            "{n} managed paths differ from the config (drift): {}",
            drift.join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_hostops::verify::MismatchKind;

    fn mismatch(subject: &str) -> Mismatch {
        Mismatch {
            kind: MismatchKind::FileContent,
            subject: subject.into(),
            expected: None,
            found: None,
            message: format!("content mismatch for file \"{subject}\""),
        }
    }

    #[test]
    fn the_longest_match_wins() {
        let p = DriftPolicies::parse(
            DriftPolicy::Report,
            &["/etc=ignore".into(), "/etc/keep/=revert".into()],
        )
        .unwrap();
        assert_eq!(p.policy("/etc/a"), DriftPolicy::Ignore);
        assert_eq!(p.policy("/etc/keep/b"), DriftPolicy::Revert);
        assert_eq!(p.policy("/etcetera"), DriftPolicy::Report);
        assert!(DriftPolicies::parse(DriftPolicy::Report, &["etc=ignore".into()]).is_err());
        assert!(DriftPolicies::parse(DriftPolicy::Report, &["/etc=maybe".into()]).is_err());
    }

    #[test]
    fn untouched_paths_are_drift_touched_ones_and_units_are_failures() {
        let p = DriftPolicies::parse(DriftPolicy::Report, &["/etc/ign=ignore".into()]).unwrap();
        let touched: BTreeSet<String> = ["/etc/written".to_string()].into();
        let mut unit = mismatch("a.service");
        unit.kind = MismatchKind::UnitEnablement;
        let (failures, drift) = p.split(
            vec![
                mismatch("/etc/written"),
                mismatch("/etc/ign/x"),
                mismatch("/etc/other"),
                unit,
            ],
            &touched,
        );
        let failed: Vec<&str> = failures.iter().map(|m| m.subject.as_str()).collect();
        assert_eq!(failed, ["/etc/written", "a.service"]);
        assert_eq!(drift.len(), 1);
        assert!(
            drift[0].contains("/etc/other") && drift[0].contains("report"),
            "{drift:?}"
        );
    }
}
