//! The `Actions:` part of `hearth describe node`: each run-once action the node reported, with
//! its config, when it ran, how it ended, its exit status and duration; then the end of the
//! output of each run that did not succeed. Everything here comes from the node: escaped.

use super::table::{indent_table, opt, text};
use crate::term::escape;
use hearth_api::{ActionOutcome, ActionRun};

/// Output lines shown per failed run (the last ones; the node sent at most 4 KiB).
pub const OUTPUT_LINES: usize = 20;

/// The `Actions:` table and the output of the runs that did not succeed.
pub fn actions(runs: &[ActionRun]) -> String {
    let mut out = String::from("Actions:\n");
    let mut rows = vec![vec![
        "NAME".to_string(),
        "CONFIG".into(),
        "WHEN".into(),
        "STARTED".into(),
        "OUTCOME".into(),
        "EXIT".into(),
        "DURATION".into(),
        "ON FAILURE".into(),
    ]];
    for r in runs {
        let exit = match (r.exit_status, r.signal) {
            (Some(code), _) => code.to_string(),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "-".into(),
        };
        rows.push(vec![
            text(&r.name),
            text(&r.config),
            format!("{:?}", r.when),
            opt(Some(&r.started_at)),
            r.outcome.to_string(),
            exit,
            r.duration_ms
                .map(|ms| format!("{}.{:03}s", ms / 1000, ms % 1000))
                .unwrap_or_else(|| "-".into()),
            format!("{:?}", r.failure),
        ]);
    }
    out.push_str(&indent_table(&rows));
    for r in runs.iter().filter(|r| {
        !matches!(r.outcome, ActionOutcome::Succeeded | ActionOutcome::Running)
            && !r.output_tail.trim().is_empty()
    }) {
        out.push_str(&format!(
            "Output of {} ({}, end):\n",
            text(&r.name),
            text(&r.config)
        ));
        let lines: Vec<&str> = r.output_tail.lines().collect();
        for line in &lines[lines.len().saturating_sub(OUTPUT_LINES)..] {
            out.push_str(&format!("  | {}\n", escape(line)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_api::{ActionFailurePolicy, ActionWhen};

    #[test]
    fn a_failed_run_shows_its_exit_status_and_escaped_output() {
        let run = ActionRun {
            name: "enroll".into(),
            config: "rendered-worker-1".into(),
            script_digest: "ab".into(),
            when: ActionWhen::AfterFiles,
            failure: ActionFailurePolicy::Degrade,
            started_at: "2026-11-24T16:00:00Z".into(),
            outcome: ActionOutcome::Failed,
            exit_status: Some(3),
            signal: None,
            duration_ms: Some(1500),
            output_tail: "line one\n\u{1b}[2Jcleared\r\n".into(),
        };
        let out = actions(&[run]);
        assert!(!out.contains('\u{1b}') && !out.contains('\r'), "{out:?}");
        let row = out.lines().nth(2).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "enroll",
                "rendered-worker-1",
                "AfterFiles",
                "2026-11-24T16:00:00Z",
                "Failed",
                "3",
                "1.500s",
                "Degrade"
            ]
        );
        assert!(
            out.contains(
                "Output of enroll (rendered-worker-1, end):\n  | line one\n  | \\x1b[2Jcleared"
            ),
            "{out}"
        );
    }
}
