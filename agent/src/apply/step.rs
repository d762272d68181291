//! Why one step of an apply failed: the step, the object it acted on, and the cause — the three
//! things a node's reason and `hearth describe node` show.
//!
//! Every operation inside an apply phase (a step of the plan, a service step of its disruption,
//! staging the OS change, the boot check after it) fails with a [`StepError`]; the phase that
//! runs it numbers the step and turns it into the node's reason ([`StepError::numbered`]).

use hearth_config::plan::Action;
use std::fmt;

/// A failed step of an apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {cause}")]
pub struct StepError {
    /// The step as people read it: the plan's action (`write file /etc/x (mode 0644, 3 bytes)`),
    /// a service step (`restart unit crio.service`), `stage the OS change: …`, `check the boot`.
    pub step: String,
    /// What it acted on: a path, a unit, a user, an OS change or deployment.
    pub object: String,
    /// The cause, as the layer below reported it.
    pub cause: String,
}

impl StepError {
    /// A failure of `step` on `object`.
    pub fn new(
        step: impl Into<String>,
        object: impl Into<String>,
        cause: impl fmt::Display,
    ) -> Self {
        StepError {
            step: step.into(),
            object: object.into(),
            cause: cause.to_string(),
        }
    }

    /// The same failure, as a failure of the plan's `action`.
    pub(super) fn in_action(mut self, action: &Action) -> Self {
        self.step = action.to_string();
        self
    }

    /// The node's reason for step `n` (1-based) of `total`:
    /// `step 3 of 7 (write file /etc/x (…)) failed: cause`.
    pub fn numbered(&self, n: usize, total: usize) -> String {
        format!("step {n} of {total} ({}) failed: {}", self.step, self.cause)
    }
}

/// Attaches the object to a failure of the layer below (the step is named by whoever runs it).
pub(super) trait OnObject<T> {
    /// `Err(e)` becomes a [`StepError`] on `object` with `e` as its cause.
    fn on(self, object: &str) -> Result<T, StepError>;
}

impl<T, E: fmt::Display> OnObject<T> for Result<T, E> {
    fn on(self, object: &str) -> Result<T, StepError> {
        self.map_err(|e| StepError::new(String::new(), object, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_reason_names_the_step_and_the_cause() {
        let action = Action::EnableUnit {
            name: "a.service".into(),
        };
        let e: Result<(), _> = Err::<(), _>("no such unit").on("a.service");
        let e = e.unwrap_err().in_action(&action);
        assert_eq!(e.object, "a.service");
        assert_eq!(
            e.numbered(2, 5),
            "step 2 of 5 (enable unit a.service) failed: no such unit"
        );
        assert_eq!(e.to_string(), "enable unit a.service: no such unit");
    }
}
