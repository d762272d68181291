//! The agent's state machine: the states a node reports and the only transitions allowed between
//! them. Pure logic; `docs/agent.md` draws the same machine.
//!
//! ```text
//!                 new desired config / force
//!   ┌──────┐  ───────────────────────────────►  ┌─────────┐  plan has unreconcilable fields  ┌────────────────┐
//!   │ Done │                                     │ Working │ ───────────────────────────────► │ Unreconcilable │
//!   └──────┘  ◄───────────────────────────────  └─────────┘                                   └────────────────┘
//!      ▲          applied and verified             │   │  a step failed: undone                      │ new desired
//!      │                                           │   └─────────────────────────► ┌──────────┐      │ config
//!      │ booted and verified     plan needs reboot │                               │ Degraded │ ◄────┘ (via Working)
//!      │                                           ▼                               └──────────┘
//!   ┌───────────┐ ◄──────────────────────────  (applied)        booted, verification failed ▲
//!   │ Rebooting │ ─────────────────────────────────────────────────────────────────────────┘
//!   └───────────┘
//! ```
//!
//! `Degraded` and `Unreconcilable` leave only through `Working` (a new desired config, a retry, or
//! the force file). A new desired config also supersedes a pending reboot (`Rebooting` → `Working`):
//! the reboot the earlier config needed stays pending and happens once, at the end. `Done` is entered only after the host was verified against the config, so a
//! half-applied host is never reported as `Done`.
//!
//! A change on trial (`hearth.io/trial`, following a server) goes from `Working` (or, after its
//! boot, from `Rebooting`) to `Trial` once it is applied and verified; a status report the server
//! accepts confirms it (`Trial` → `Done`); no answer before the deadline undoes it
//! (`Trial` → `Degraded`). Nothing else leaves `Trial`: a new config waits for the outcome.

use serde::{Deserialize, Serialize};

/// The state a node reports: the wire type `hearth_api::NodeState` (the server reads the same
/// type from the agent's status reports, the CLI from the node views).
pub use hearth_api::NodeState as State;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A new desired config arrived, a retry is due, or the force file asks for a re-apply.
    Start,
    /// The plan holds unreconcilable fields.
    FoundUnreconcilable,
    /// All steps applied, the host verified, no reboot needed.
    Applied,
    /// All steps applied; the plan needs a reboot.
    NeedsReboot,
    /// A step failed; its changes were undone.
    Failed,
    /// After the reboot the host is in the desired config.
    BootVerified,
    /// After the reboot the host is not what the config says.
    BootVerificationFailed,
    /// The agent restarted in the middle of an apply (crash, power loss) and resumes it.
    Resume,
    /// Applied and verified (after its boot, if it needed one), and on trial: the server must
    /// answer before the deadline.
    TrialStarted,
    /// The server accepted a status report during the trial: the change is kept.
    TrialConfirmed,
    /// No answer from the server before the deadline: the change was undone.
    TrialFailed,
}

/// A transition that the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid state transition: {event:?} in state {from}")]
pub struct InvalidTransition {
    /// The state.
    pub from: State,
    /// The event.
    pub event: Event,
}

/// The next state after `event` in state `from`, or an error for a transition the machine does
/// not have.
pub fn transition(from: State, event: Event) -> Result<State, InvalidTransition> {
    use Event::*;
    use State::*;
    let to = match (from, event) {
        (Done | Degraded | Unreconcilable | Working | Rebooting, Start) => Working,
        (Working, FoundUnreconcilable) => Unreconcilable,
        (Working, Applied) => Done,
        (Working, NeedsReboot) => Rebooting,
        (Working, Failed) => Degraded,
        (Rebooting, BootVerified) => Done,
        (Rebooting, BootVerificationFailed) => Degraded,
        (Working | Rebooting | Trial, Resume) => from,
        (Working | Rebooting, TrialStarted) => Trial,
        (Trial, TrialConfirmed) => Done,
        (Trial, TrialFailed) => Degraded,
        _ => return Err(InvalidTransition { from, event }),
    };
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [State; 6] = [
        State::Done,
        State::Working,
        State::Degraded,
        State::Unreconcilable,
        State::Rebooting,
        State::Trial,
    ];
    const EVENTS: [Event; 11] = [
        Event::Start,
        Event::FoundUnreconcilable,
        Event::Applied,
        Event::NeedsReboot,
        Event::Failed,
        Event::BootVerified,
        Event::BootVerificationFailed,
        Event::Resume,
        Event::TrialStarted,
        Event::TrialConfirmed,
        Event::TrialFailed,
    ];

    #[test]
    fn done_is_reached_only_by_verification() {
        for s in STATES {
            for e in EVENTS {
                if transition(s, e) == Ok(State::Done) {
                    assert!(
                        matches!(
                            (s, e),
                            (State::Working, Event::Applied)
                                | (State::Rebooting, Event::BootVerified)
                                | (State::Trial, Event::TrialConfirmed)
                        ),
                        "{s} --{e:?}--> Done"
                    );
                }
            }
        }
    }

    #[test]
    fn failure_states_leave_only_through_working() {
        for s in [State::Degraded, State::Unreconcilable] {
            for e in EVENTS {
                if let Ok(next) = transition(s, e) {
                    assert_eq!(next, State::Working, "{s} --{e:?}--> {next}");
                }
            }
        }
    }

    #[test]
    fn a_trial_ends_only_confirmed_or_undone() {
        for e in EVENTS {
            if let Ok(next) = transition(State::Trial, e) {
                assert!(
                    matches!(
                        (e, next),
                        (Event::TrialConfirmed, State::Done)
                            | (Event::TrialFailed, State::Degraded)
                            | (Event::Resume, State::Trial)
                    ),
                    "Trial --{e:?}--> {next}"
                );
            }
        }
        assert!(transition(State::Done, Event::TrialStarted).is_err());
    }

    #[test]
    fn a_typical_update_with_reboot() {
        let mut s = State::Done;
        for e in [Event::Start, Event::NeedsReboot, Event::BootVerified] {
            s = transition(s, e).unwrap();
        }
        assert_eq!(s, State::Done);
        assert!(transition(State::Done, Event::Applied).is_err());
        assert!(transition(State::Rebooting, Event::Applied).is_err());
    }
}
