//! An admin's requests as the agent acts on them (`apply/request.rs`), on an offline image root:
//! a force request whose apply a crash interrupted is resumed forced and finished once; a
//! restore request puts one file back and is never acted on again; a path the config does not
//! write is refused, naming it.

use hearth_agent::apply::{new_requests, Agent, Options, Outcome};
use hearth_agent::journal::{Journal, Phase, Progress};
use hearth_agent::state::{Event, State};
use hearth_api::{NodeRequest, RequestAction};
use hearth_config::model::DisruptionPolicies;
use hearth_hostops::fs::Root;
use std::path::Path;

fn config() -> hearth_agent::journal::NamedConfig {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: rendered-worker-1\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/req/a.conf\n        mode: 0644\n        contents:\n          source: \"data:,a\"\n      - path: /etc/req/b.conf\n        mode: 0600\n        contents:\n          source: \"data:,b\"\n";
    hearth_agent::source::parse_bytes("test.yaml", text.as_bytes().to_vec()).unwrap()
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/'))).unwrap_or_default()
}

fn edit(root: &Path, path: &str, content: &str) {
    std::fs::write(root.join(path.trim_start_matches('/')), content).unwrap();
}

fn working(j: &Journal) -> usize {
    j.history
        .iter()
        .filter(|h| h.state == State::Working)
        .count()
}

fn force(id: u64) -> NodeRequest {
    NodeRequest {
        id,
        action: RequestAction::Force,
        path: None,
    }
}

#[tokio::test]
async fn a_force_interrupted_by_a_crash_resumes_forced_and_finishes_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let agent = Agent::new(root, None).await.unwrap();
    let opts = Options::default();
    let out = agent
        .sync(config(), DisruptionPolicies::default(), &opts)
        .await
        .unwrap();
    assert_eq!(out, Outcome::Done);
    edit(root, "/etc/req/a.conf", "by hand");

    // What the force's sync writes before its first step (the journal's Start with the
    // request's id), and then the crash.
    let handle = Root::open(root).unwrap();
    let mut j = Journal::load(&handle).unwrap();
    j.desired = Some(config());
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
        trial_policy: None,
    });
    j.forcing = Some(5);
    j.save(&handle).unwrap();
    // Taken as under way: the request is not acted on again.
    assert!(new_requests(&j, vec![force(5)]).is_empty());

    // The restarted agent resumes the apply forced: the drifted file is written back although
    // current and desired are the same config.
    let agent = Agent::new(root, None).await.unwrap();
    let mut j = Journal::default();
    let out = agent.resume(&mut j, &opts).await.unwrap();
    assert_eq!(out, Some(Outcome::Done));
    assert_eq!(read(root, "/etc/req/a.conf"), "a");
    agent.settle_requests().unwrap();
    let j = Journal::load(&handle).unwrap();
    assert_eq!((j.requests_done, j.forcing), (5, None));
    let r = j.request_results.last().unwrap();
    assert!(r.id == 5 && r.ok, "{r:?}");
    // Settled once: again changes nothing.
    agent.settle_requests().unwrap();
    assert_eq!(Journal::load(&handle).unwrap().request_results.len(), 1);
    assert!(new_requests(&j, vec![force(5)]).is_empty());
    assert_eq!(new_requests(&j, vec![force(6)]).len(), 1);

    // A force request through the agent's own path: one apply, finished with its outcome.
    edit(root, "/etc/req/b.conf", "by hand");
    let before = working(&j);
    let out = agent
        .force(6, config(), DisruptionPolicies::default(), &opts)
        .await
        .unwrap();
    assert_eq!(out, Outcome::Done);
    assert_eq!(read(root, "/etc/req/b.conf"), "b");
    let j = Journal::load(&handle).unwrap();
    assert_eq!(working(&j), before + 1);
    assert_eq!((j.requests_done, j.forcing), (6, None));
}

#[tokio::test]
async fn a_restore_request_puts_one_file_back_once_and_refuses_what_the_config_does_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let agent = Agent::new(root, None).await.unwrap();
    agent
        .sync(config(), DisruptionPolicies::default(), &Options::default())
        .await
        .unwrap();
    let handle = Root::open(root).unwrap();
    edit(root, "/etc/req/a.conf", "by hand");
    edit(root, "/etc/req/b.conf", "by hand");
    let before = working(&Journal::load(&handle).unwrap());

    agent.restore_file(3, "/etc/req/a.conf").unwrap();
    assert_eq!(read(root, "/etc/req/a.conf"), "a");
    // Only that file, and no apply.
    assert_eq!(read(root, "/etc/req/b.conf"), "by hand");
    let j = Journal::load(&handle).unwrap();
    assert_eq!(working(&j), before);
    assert_eq!(j.requests_done, 3);
    assert!(j.request_results.last().unwrap().ok);

    // The same id again (a report lost, the server sends it again): not acted on.
    edit(root, "/etc/req/a.conf", "by hand again");
    agent.restore_file(3, "/etc/req/a.conf").unwrap();
    assert_eq!(read(root, "/etc/req/a.conf"), "by hand again");
    assert_eq!(Journal::load(&handle).unwrap().request_results.len(), 1);

    // A path the config does not write: refused, named, recorded as failed.
    agent.restore_file(4, "/etc/hostname").unwrap();
    let j = Journal::load(&handle).unwrap();
    let r = j.request_results.last().unwrap();
    assert!(
        r.id == 4 && !r.ok && r.message.contains("/etc/hostname"),
        "{r:?}"
    );
    assert_eq!(j.requests_done, 4);
}
