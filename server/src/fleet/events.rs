//! The fleet's events (`hearth get events`, `hearth describe`), kept by class so that the routine
//! events of a large fleet's nodes do not push out the rest.
//!
//! An apply to 10,000 nodes records 10,000 `DesiredChanged` events, then as many `Working` and
//! `Done`: with one list of the last 1,000, the pools' and the admins' events and the warnings
//! of a degraded node were gone a moment later. So each class keeps its own last
//! [`KEPT_PER_CLASS`]:
//!
//! | class | what | stored as |
//! |---|---|---|
//! | fleet | pools, configs, and every admin's change, also to a node (a pin, a label, a forced apply and its outcome) | `events/f<seq>` |
//! | node warnings | a node's own warnings and the rollout's about it (degraded, enrolled again, no config) | `events/w<seq>` |
//! | node | a node's own routine events and the rollout's about it (desired config, working, done, slots) | `events/n<seq>` |
//!
//! `<seq>` is one sequence for all classes (16 digits), so the classes merge back into one
//! timeline. Events stored before classes (names of digits only) count as fleet events until
//! newer ones push them out.
//!
//! The events recorded in a change are also kept aside ([`EventLog::take_recorded`]) for the log
//! (the journal), written once the change is committed: of each class at most [`KEPT_ASIDE`],
//! and how many more there were (the log takes no more nodes' events at once,
//! [`crate::telemetry::logging::NodeEventLog`], and an apply of 10,000 Node manifests is one line for the
//! rest, not 10,000).

use super::map::{diff_kind, put, Map, Rec};
use crate::store::records::EventRecord;
use crate::store::{Kind, Op, StoreError};
use std::sync::Arc;

/// How many events each class keeps.
pub const KEPT_PER_CLASS: usize = 1000;
/// How many events of each class of one change are kept aside for the log: as many as the log
/// writes at once ([`crate::telemetry::logging::NODE_EVENTS_BURST`]).
pub const KEPT_ASIDE: usize = 1000;

/// The events of a change, for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// In the order they were recorded: the first [`KEPT_ASIDE`] of each class.
    pub events: Vec<EventRecord>,
    /// How many of each class were not kept aside (by [`Class::index`]).
    left_out: [u64; 3],
    /// How many of each class are in `events`.
    aside: [usize; 3],
}

impl Recorded {
    /// How many events of `class` were not kept aside.
    pub fn left_out(&self, class: Class) -> u64 {
        self.left_out[class.index()]
    }

    fn keep(&mut self, e: EventRecord) {
        let i = Class::of(&e).index();
        if self.aside[i] >= KEPT_ASIDE {
            self.left_out[i] += 1;
        } else {
            self.aside[i] += 1;
            self.events.push(e);
        }
    }
}

/// The reasons of the events a node makes (its states, its enrollment, its reboot slots) and
/// the rollout makes about it (its desired config, its wait for a window, no pool for it):
/// many per apply to a large pool. Any other event about a node is an admin's change (a pin,
/// an exclusion, a label, a reset credential, a forced apply or a restored file) or its
/// outcome: audited, kept and logged as the fleet's.
pub const NODE_REASONS: [&str; 12] = [
    "Done",
    "Working",
    "Degraded",
    "Unreconcilable",
    "Rebooting",
    "Trial",
    "Enrolled",
    "DesiredChanged",
    "RebootSlotAcquired",
    "RebootSlotReleased",
    "WaitingForMaintenanceWindow",
    "NoConfig",
];

/// The classes of events, each kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Pools, configs, admins' changes: every object but a node.
    Fleet,
    /// A node's warnings.
    NodeWarning,
    /// A node's routine events.
    Node,
}

impl Class {
    const ALL: [Class; 3] = [Class::Fleet, Class::NodeWarning, Class::Node];

    /// The class of an event: a node's by what it is about (its object) and who made it (its
    /// reason: the node itself or the rollout, [`NODE_REASONS`]); the rest, the fleet's.
    pub fn of(e: &EventRecord) -> Class {
        let by_node = e.object.starts_with("Node/") && NODE_REASONS.contains(&e.reason.as_str());
        match (by_node, e.kind == "Warning") {
            (false, _) => Class::Fleet,
            (true, true) => Class::NodeWarning,
            (true, false) => Class::Node,
        }
    }

    /// The class of a stored name (digits only, from before classes: fleet).
    pub fn of_name(name: &str) -> Class {
        match name.as_bytes().first() {
            Some(b'w') => Class::NodeWarning,
            Some(b'n') => Class::Node,
            _ => Class::Fleet,
        }
    }

    fn prefix(self) -> char {
        match self {
            Class::Fleet => 'f',
            Class::NodeWarning => 'w',
            Class::Node => 'n',
        }
    }

    /// Its place in per-class arrays.
    pub fn index(self) -> usize {
        match self {
            Class::Fleet => 0,
            Class::NodeWarning => 1,
            Class::Node => 2,
        }
    }
}

/// The sequence number in a stored name (`n0000000000000042`, or `0000000000000042` from before
/// classes); 0 for a name that has none.
fn seq(name: &str) -> u64 {
    name.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0)
}

/// The events, by class.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    classes: [Map<EventRecord>; 3],
    /// Recorded in the change under way (a copy of a snapshot; empty in a snapshot).
    recorded: Recorded,
}

impl EventLog {
    /// The events read from the store (name, event, revisions).
    pub fn from_stored(stored: impl IntoIterator<Item = (String, Rec<EventRecord>)>) -> Self {
        let mut log = EventLog::default();
        for (name, rec) in stored {
            log.classes[Class::of_name(&name).index()].insert(name, Arc::new(rec));
        }
        log
    }

    /// Appends events; each class keeps its last [`KEPT_PER_CLASS`]. Of more than that many of
    /// one class at once (an apply to a large pool), only the last are stored.
    pub fn record(&mut self, events: Vec<EventRecord>) {
        if events.is_empty() {
            return;
        }
        let mut seq = self.last_seq();
        let mut count = [0usize; 3];
        for e in &events {
            count[Class::of(e).index()] += 1;
        }
        let mut skip = count.map(|n| n.saturating_sub(KEPT_PER_CLASS));
        for e in events {
            seq += 1;
            let class = Class::of(&e);
            let i = class.index();
            if skip[i] > 0 {
                skip[i] -= 1;
            } else {
                put(
                    &mut self.classes[i],
                    &format!("{}{seq:016}", class.prefix()),
                    e.clone(),
                );
            }
            self.recorded.keep(e);
        }
        for map in &mut self.classes {
            while map.len() > KEPT_PER_CLASS {
                let Some(oldest) = map.keys().next().cloned() else {
                    break;
                };
                map.remove(&oldest);
            }
        }
    }

    /// The highest sequence number stored.
    fn last_seq(&self) -> u64 {
        self.classes
            .iter()
            .filter_map(|m| m.keys().next_back().map(|k| seq(k)))
            .max()
            .unwrap_or(0)
    }

    /// The events recorded since this copy was made (to be logged once committed), and no
    /// longer kept here.
    pub fn take_recorded(&mut self) -> Recorded {
        std::mem::take(&mut self.recorded)
    }

    /// Every event, newest first (the classes merged by sequence).
    pub fn newest_first(&self) -> impl Iterator<Item = &EventRecord> + '_ {
        let mut its = self.classes.each_ref().map(|m| m.iter().rev().peekable());
        std::iter::from_fn(move || {
            let (_, it) = its
                .iter_mut()
                .filter_map(|it| it.peek().map(|(k, _)| seq(k)).map(|s| (s, it)))
                .max_by_key(|(s, _)| *s)?;
            it.next().map(|(_, r)| &r.value)
        })
    }

    /// How many events are kept.
    pub fn len(&self) -> usize {
        self.classes.iter().map(|m| m.len()).sum()
    }

    /// No event is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map that holds (or would hold) the stored name.
    pub fn map_mut(&mut self, name: &str) -> &mut Map<EventRecord> {
        &mut self.classes[Class::of_name(name).index()]
    }

    /// The store ops that turn `old` into `self` (see [`crate::fleet::Fleet::diff`]). Class by
    /// class: a stored name's class follows from the name ([`Class::of_name`]), so no name is
    /// in two classes and no commit puts and deletes the same key.
    pub fn diff(&self, old: &EventLog, ops: &mut Vec<Op>) -> Result<(), StoreError> {
        for class in Class::ALL {
            let i = class.index();
            diff_kind(Kind::Event, &old.classes[i], &self.classes[i], ops)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a commit's ops put.
    fn put_names(ops: &[Op]) -> Vec<&str> {
        ops.iter()
            .filter_map(|op| match op {
                Op::Put { name, .. } => Some(name.as_str()),
                Op::Delete { .. } => None,
            })
            .collect()
    }

    fn node(i: usize, reason: &str) -> EventRecord {
        EventRecord::normal(i as u64, format!("Node/n{i}"), reason, format!("{i}"))
    }

    fn pool(i: usize) -> EventRecord {
        EventRecord::normal(
            i as u64,
            "MachineConfigPool/worker".into(),
            "Paused",
            format!("{i}"),
        )
    }

    fn degraded(i: usize) -> EventRecord {
        EventRecord::warning(i as u64, format!("Node/n{i}"), "Degraded", format!("{i}"))
    }

    /// The pools' events and a node's warning outlive any number of routine node events, and
    /// the three lists read back as one timeline, newest first.
    #[test]
    fn routine_node_events_do_not_push_out_the_fleets_or_the_warnings() {
        let mut log = EventLog::default();
        log.record(vec![pool(1), degraded(2)]);
        for round in 0..5 {
            log.record((0..3 * KEPT_PER_CLASS).map(|i| node(i, "Done")).collect());
            assert_eq!(log.len(), 2 + KEPT_PER_CLASS, "round {round}");
        }
        let all: Vec<&EventRecord> = log.newest_first().collect();
        assert_eq!(all.len(), KEPT_PER_CLASS + 2);
        assert_eq!(
            all[0].message,
            format!("{}", 3 * KEPT_PER_CLASS - 1),
            "newest first"
        );
        assert_eq!(all[KEPT_PER_CLASS].reason, "Degraded");
        assert_eq!(all[KEPT_PER_CLASS + 1].reason, "Paused");
        // Each class keeps its last ones, in order: a pool's 1,001st event pushes out its first.
        log.record((2..=KEPT_PER_CLASS + 1).map(pool).collect());
        let pools: Vec<&str> = log
            .newest_first()
            .filter(|e| e.reason == "Paused")
            .map(|e| e.message.as_str())
            .collect();
        assert_eq!(pools.len(), KEPT_PER_CLASS);
        assert_eq!(pools[0], format!("{}", KEPT_PER_CLASS + 1));
        assert_eq!(*pools.last().unwrap(), "2");
        // For the log: the first of each class, stored or not, and how many more.
        let aside = log.take_recorded();
        assert_eq!(aside.events.len(), 1 + 2 * KEPT_ASIDE);
        assert_eq!(aside.events[0].reason, "Paused");
        assert_eq!(aside.events[1].reason, "Degraded");
        assert_eq!(aside.events[2].message, "0", "the first routine ones");
        assert_eq!(
            aside.left_out(Class::Node),
            (5 * 3 * KEPT_PER_CLASS - KEPT_ASIDE) as u64
        );
        assert_eq!(aside.left_out(Class::NodeWarning), 0);
        assert_eq!(aside.left_out(Class::Fleet), 1, "1 + 1,000 pools' events");
        assert_eq!(log.take_recorded(), Recorded::default());
        log.record(vec![node(1, "Done")]);
        assert_eq!(
            log.take_recorded().events.len(),
            1,
            "a new count per change"
        );
    }

    /// An admin's change to a node (and its outcome) is the fleet's: kept and logged as such;
    /// a node's states and the rollout's events about it are the node's; every state counts.
    #[test]
    fn an_admins_change_to_a_node_is_the_fleets() {
        let on = |reason: &str, warning: bool| {
            let e = EventRecord::normal(1, "Node/n1".into(), reason, String::new());
            Class::of(&if warning {
                EventRecord {
                    kind: "Warning".into(),
                    ..e
                }
            } else {
                e
            })
        };
        for admin in [
            "Pinned",
            "Labeled",
            "ForceRequested",
            "ForceDone",
            "Deleted",
        ] {
            assert_eq!(on(admin, false), Class::Fleet, "{admin}");
        }
        for admin in ["Excluded", "CredentialReset"] {
            assert_eq!(on(admin, true), Class::Fleet, "{admin}");
        }
        assert_eq!(on("DesiredChanged", false), Class::Node);
        assert_eq!(on("Degraded", true), Class::NodeWarning);
        assert_eq!(on("Enrolled", true), Class::NodeWarning, "enrolled again");
        for s in crate::api::NodeState::ALL {
            assert!(NODE_REASONS.contains(&s.as_str()), "{s:?}");
        }
    }

    /// An interleaved batch keeps the global order; events stored before classes (digits
    /// only) are read back with the rest and, as fleet events, go first when that class is
    /// full; the sequence goes on from the highest stored number.
    #[test]
    fn names_carry_one_sequence_and_old_names_are_read() {
        let old = |i: u64, e: EventRecord| {
            (
                format!("{i:016}"),
                Rec {
                    value: e,
                    create_revision: i,
                    mod_revision: i,
                },
            )
        };
        let mut log = EventLog::from_stored([old(7, node(7, "Done")), old(8, pool(8))]);
        log.record(vec![degraded(9), pool(10), node(11, "Working")]);
        let reasons: Vec<&str> = log.newest_first().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["Working", "Paused", "Degraded", "Paused", "Done"]);
        let mut ops = Vec::new();
        log.diff(
            &EventLog::from_stored([old(7, node(7, "Done")), old(8, pool(8))]),
            &mut ops,
        )
        .unwrap();
        assert_eq!(
            put_names(&ops),
            [
                "f0000000000000010",
                "w0000000000000009",
                "n0000000000000011"
            ]
        );
        // The fleet class fills: the two old events go first.
        log.record((100..100 + KEPT_PER_CLASS - 1).map(pool).collect());
        assert_eq!(log.classes[Class::Fleet.index()].len(), KEPT_PER_CLASS);
        assert!(!log.classes[0].contains_key("0000000000000007"));
        assert!(!log.classes[0].contains_key("0000000000000008"));
        assert!(log.classes[0].contains_key("f0000000000000010"));
        assert_eq!(seq("n0000000000000011"), 11);
        assert_eq!(log.last_seq(), 11 + KEPT_PER_CLASS as u64 - 1);
    }
}
