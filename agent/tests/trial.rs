//! Changes on trial in the agent's journal (`apply/trial.rs`), on an offline image root: a
//! network change ends in `Trial` with a journalled deadline that a restart keeps; past the
//! deadline the restarted agent undoes it (`Degraded`, why) and does not apply it again; a
//! confirmation keeps it; a change the policy does not cover ends `Done` at once. The network
//! round trip itself is `server/tests/trial_e2e.rs`.

use hearth_agent::apply::{trial_deadline, unix_now, Agent, Options, Outcome};
use hearth_agent::journal::{Journal, NamedConfig};
use hearth_agent::state::State;
use hearth_config::model::DisruptionPolicies;
use hearth_config::trial::{TrialMode, TrialPolicy};
use hearth_hostops::fs::Root;
use std::path::Path;

/// A config with `/etc/req/a.conf` and the extra files given (`path`, `data:` content).
fn config(name: &str, extra: &[(&str, &str)]) -> NamedConfig {
    let mut files = String::from(
        "      - path: /etc/req/a.conf\n        mode: 0644\n        contents:\n          source: \"data:,a\"\n",
    );
    for (path, data) in extra {
        files.push_str(&format!(
            "      - path: {path}\n        mode: 0644\n        contents:\n          source: \"data:,{data}\"\n"
        ));
    }
    let text = format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n{files}");
    hearth_agent::source::parse_bytes("test.yaml", text.into_bytes()).unwrap()
}

fn exists(root: &Path, path: &str) -> bool {
    root.join(path.trim_start_matches('/')).exists()
}

fn working(j: &Journal) -> usize {
    j.history
        .iter()
        .filter(|h| h.state == State::Working)
        .count()
}

fn on_trial(seconds: u32) -> Options {
    Options {
        trial: Some(TrialPolicy {
            mode: TrialMode::Network,
            seconds,
        }),
        ..Options::default()
    }
}

#[tokio::test]
async fn a_network_change_on_trial_keeps_its_deadline_and_is_undone_past_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let handle = Root::open(root).unwrap();
    let agent = Agent::new(root, None).await.unwrap();
    let opts = on_trial(60);
    let policies = DisruptionPolicies::default();

    // Not a network path: Done at once, no trial.
    let base = config("rendered-worker-1", &[]);
    let out = agent.sync(base.clone(), policies.clone(), &opts).await;
    assert_eq!(out.unwrap(), Outcome::Done);

    // /etc/hosts: on trial, the deadline journalled.
    let cut = config(
        "rendered-worker-2",
        &[("/etc/hosts", "10.0.0.9%20server%0A")],
    );
    let before = unix_now();
    let out = agent
        .sync(cut.clone(), policies.clone(), &opts)
        .await
        .unwrap();
    assert!(
        matches!(&out, Outcome::Trial(r) if r.contains("on trial: rendered-worker-2") && r.contains("(60 s)")),
        "{out:?}"
    );
    let j = Journal::load(&handle).unwrap();
    assert_eq!(j.state, State::Trial);
    assert_eq!(
        j.current.as_ref().map(|c| c.name.as_str()),
        Some("rendered-worker-1")
    );
    let deadline = trial_deadline(&j).unwrap();
    assert!(
        deadline >= before + 60 && deadline <= unix_now() + 60,
        "{deadline}"
    );
    assert!(exists(root, "/etc/hosts"));
    let applies = working(&j);

    // A restart (a crash) keeps the deadline; the same config again applies nothing meanwhile.
    let agent = Agent::new(root, None).await.unwrap();
    let out = agent.resume(&mut Journal::default(), &opts).await.unwrap();
    assert!(matches!(out, Some(Outcome::Trial(_))), "{out:?}");
    let out = agent
        .sync(cut.clone(), policies.clone(), &opts)
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Trial(_)), "{out:?}");
    let j = Journal::load(&handle).unwrap();
    assert_eq!(trial_deadline(&j), Some(deadline));
    assert_eq!(working(&j), applies);

    // Past the deadline (as a long outage or power cut leaves it): the restarted agent undoes
    // the change by itself.
    let mut j = Journal::load(&handle).unwrap();
    j.progress.as_mut().unwrap().deadline = Some(unix_now() - 1);
    j.save(&handle).unwrap();
    let agent = Agent::new(root, None).await.unwrap();
    let out = agent.resume(&mut Journal::default(), &opts).await.unwrap();
    let Some(Outcome::Degraded(reason)) = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        reason,
        "trial of rendered-worker-2 failed: no answer from the server within 60 s after applying; rolled back; every change was undone"
    );
    assert!(!exists(root, "/etc/hosts"), "the trial's file is gone");
    let j = Journal::load(&handle).unwrap();
    assert_eq!(j.state, State::Degraded);
    assert_eq!(
        j.current.as_ref().map(|c| c.name.as_str()),
        Some("rendered-worker-1")
    );
    assert_eq!(j.failed_trial.as_deref(), Some("rendered-worker-2"));

    // Not applied again (no loop) ...
    let out = agent
        .sync(cut.clone(), policies.clone(), &opts)
        .await
        .unwrap();
    assert_eq!(out, Outcome::Degraded(reason));
    assert!(!exists(root, "/etc/hosts"));
    assert_eq!(working(&Journal::load(&handle).unwrap()), applies);

    // ... but a newer config is, and a confirmation keeps it.
    let fixed = config(
        "rendered-worker-3",
        &[("/etc/hosts", "127.0.0.1%20server%0A")],
    );
    let out = agent.sync(fixed, policies.clone(), &opts).await.unwrap();
    assert!(matches!(out, Outcome::Trial(_)), "{out:?}");
    assert_eq!(agent.confirm_trial().unwrap(), Some(Outcome::Done));
    let j = Journal::load(&handle).unwrap();
    assert_eq!(j.state, State::Done);
    assert_eq!(
        j.current.as_ref().map(|c| c.name.as_str()),
        Some("rendered-worker-3")
    );
    assert_eq!(j.failed_trial, None);
    assert!(trial_deadline(&j).is_none());
    assert_eq!(agent.confirm_trial().unwrap(), None, "confirmed once");
}

#[tokio::test]
async fn an_apply_on_trial_interrupted_by_a_crash_is_still_on_trial_when_resumed() {
    use hearth_agent::journal::{Phase, Progress};
    use hearth_agent::state::Event;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let handle = Root::open(root).unwrap();
    let agent = Agent::new(root, None).await.unwrap();
    let policies = DisruptionPolicies::default();
    let base = config("rendered-worker-1", &[]);
    let out = agent.sync(base, policies.clone(), &on_trial(60)).await;
    assert_eq!(out.unwrap(), Outcome::Done);

    // What the network change's sync writes before its first step, with the pool's trial
    // policy, and then the crash (kill -9, power cut).
    let mut j = Journal::load(&handle).unwrap();
    j.desired = Some(config(
        "rendered-worker-2",
        &[("/etc/hosts", "10.0.0.9%20server%0A")],
    ));
    j.policies = policies;
    j.transition(Event::Start, None).unwrap();
    j.progress = Some(Progress {
        phase: Phase::Applying,
        step: 0,
        total: 0,
        failure: None,
        boot_id: None,
        reboot_requests: 0,
        os: None,
        trial_seconds: None,
        deadline: None,
        trial_policy: on_trial(60).trial,
    });
    j.save(&handle).unwrap();

    // The restarted daemon knows no policy until the server answers (its options have none):
    // the journal's keeps the change on trial, never Done unconfirmed.
    let agent = Agent::new(root, None).await.unwrap();
    let out = agent
        .resume(&mut Journal::default(), &Options::default())
        .await
        .unwrap();
    assert!(matches!(out, Some(Outcome::Trial(_))), "{out:?}");
    let j = Journal::load(&handle).unwrap();
    assert_eq!(j.state, State::Trial);
    assert!(trial_deadline(&j).is_some());
    assert!(exists(root, "/etc/hosts"));
}
