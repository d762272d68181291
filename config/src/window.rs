//! Maintenance windows: when a pool's nodes may reboot.
//!
//! A pool opts in with the annotation `hearth.io/maintenance-windows` (an annotation, so the
//! MCO's MachineConfigPool YAML stays valid and unchanged):
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     hearth.io/maintenance-windows: "Sat 02:00-06:00 UTC; Sun 02:00-04:00 UTC; Mon-Fri 23:00-01:00 +01:00"
//! ```
//!
//! One window is `DAYS START-END [ZONE]`, windows are separated by `;`:
//!
//! - `DAYS`: `Mon`..`Sun` (or full names, any case), a range `Mon-Fri`, a list `Sat,Sun`, or
//!   `daily` / `*`; the day is the day the window **starts**;
//! - `START-END`: `HH:MM-HH:MM`; an end before (or at) the start crosses midnight
//!   (`Fri 22:00-02:00` ends Saturday 02:00); `24:00` ends at midnight;
//! - `ZONE`: `UTC` (the default, also `Z`/`GMT`), a fixed offset `+01:00`, `-05:30`, `UTC+2`,
//!   or a named IANA time zone (`Europe/Berlin`, `America/New_York`) from the system's zoneinfo
//!   (`/usr/share/zoneinfo`, Debian's `tzdata`, read through `jiff`), which follows daylight
//!   saving time. Times are wall-clock times in the zone: on the day clocks spring forward, a
//!   time in the skipped hour is read as if the clocks had not moved yet (`02:30` in Berlin on
//!   2026-03-29 is 03:30 CEST, 01:30 UTC), so a window that lies wholly in the skipped hour does
//!   not open that day; on the day they fall back, a time that occurs twice is its first
//!   occurrence. This is RFC 5545's ("compatible") reading.
//!
//! Reading the annotation (the manifest reader refuses a pool whose windows cannot be read, so
//! `hearth validate` and `hearth apply` say the same) and the window arithmetic; the only I/O is
//! the zoneinfo lookup of a named zone. hearth-server's `window::gate` decides with it, by its
//! clock.

use jiff::civil::{Date, DateTime};
use jiff::tz::{Offset, TimeZone};
use jiff::{Span, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The pool annotation with the maintenance windows.
pub const ANNOTATION: &str = "hearth.io/maintenance-windows";

/// The field name used in diagnostics.
pub const FIELD: &str = "metadata.annotations[hearth.io/maintenance-windows]";

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const FULL_DAY_NAMES: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
const EXAMPLE: &str = "e.g. \"Sat 02:00-06:00 Europe/Berlin; Mon-Fri 22:00-02:00 +01:00\"";

/// A maintenance-window text that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("window {index} ({text:?}): {message}; windows are `DAYS HH:MM-HH:MM [ZONE]` separated by `;`, {EXAMPLE}")]
pub struct WindowError {
    /// 1-based position of the window in the list.
    pub index: usize,
    /// The window's text.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

/// One weekly window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Days it starts on, Monday first.
    days: [bool; 7],
    /// Start, minutes after local midnight.
    start: u32,
    /// Length in minutes (1..=1440), in the zone's wall-clock time.
    length: u32,
    /// The zone: a fixed offset or a named zone from the system's zoneinfo.
    zone: TimeZone,
    /// Normalized text, e.g. `Sat 02:00-06:00 UTC`.
    text: String,
}

/// A pool's windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Windows(Vec<Window>);

/// Whether a pool may reboot nodes now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// Inside a window, until `closes_at`.
    Open {
        /// The window.
        window: String,
        /// When it closes (Unix seconds).
        closes_at: u64,
    },
    /// Outside every window.
    Closed(WindowWait),
}

/// Why a pool's disruptive updates wait, stored in pool and node status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowWait {
    /// The window that opens next (or the annotation's text when it cannot be read).
    pub window: String,
    /// When it opens (Unix seconds); none: never (the annotation cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<u64>,
    /// Why the annotation cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl WindowWait {
    /// For people: `waiting for the maintenance window Sat 02:00-06:00 UTC, opens in 3h12m`.
    pub fn message(&self, now: u64) -> String {
        match (self.opens_at, &self.error) {
            (Some(at), _) => format!(
                "waiting for the maintenance window {}, opens in {}",
                self.window,
                human(at.saturating_sub(now))
            ),
            (None, e) => format!(
                "waiting: the pool's {ANNOTATION} annotation cannot be read ({}); no reboots until it is fixed",
                e.as_deref().unwrap_or("invalid")
            ),
        }
    }
}

/// `3h12m`, `2d4h`, `45m`, `30s`.
pub fn human(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{s}s")
    }
}

impl Windows {
    /// Reads `Sat 02:00-06:00 UTC; Sun 02:00-04:00 +01:00`.
    pub fn parse(text: &str) -> Result<Windows, WindowError> {
        let parts: Vec<&str> = text.split(';').map(str::trim).collect();
        let mut out = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() && parts.len() > 1 && i == parts.len() - 1 {
                continue; // a trailing `;`
            }
            let err = |message: String| WindowError {
                index: i + 1,
                text: part.to_string(),
                message,
            };
            out.push(Window::parse(part).map_err(err)?);
        }
        Ok(Windows(out))
    }

    /// The windows of a pool's annotations: none when the pool has no windows.
    pub fn of(annotations: &BTreeMap<String, String>) -> Option<Result<Windows, WindowError>> {
        annotations
            .get(ANNOTATION)
            .map(String::as_str)
            .map(Windows::parse)
    }

    /// Open or closed at `now` (Unix seconds).
    pub fn state(&self, now: u64) -> WindowState {
        let now_i = now as i64;
        let mut open: Option<(&Window, i64)> = None;
        let mut next: Option<(&Window, i64)> = None;
        for w in &self.0 {
            for (s, e) in w.occurrences(now_i) {
                if s <= now_i && now_i < e {
                    if open.is_none_or(|(_, c)| e > c) {
                        open = Some((w, e));
                    }
                } else if s > now_i && next.is_none_or(|(_, n)| s < n) {
                    next = Some((w, s));
                }
            }
        }
        match (open, next) {
            (Some((w, c)), _) => WindowState::Open {
                window: w.text.clone(),
                closes_at: c.max(0) as u64,
            },
            (None, Some((w, s))) => WindowState::Closed(WindowWait {
                window: w.text.clone(),
                opens_at: Some(s.max(0) as u64),
                error: None,
            }),
            // Every window has a day, so one starts within a week: unreachable, but closed.
            (None, None) => WindowState::Closed(WindowWait {
                window: self.to_string(),
                opens_at: None,
                error: Some("no window ever opens".into()),
            }),
        }
    }
}

impl std::fmt::Display for Windows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let texts: Vec<&str> = self.0.iter().map(|w| w.text.as_str()).collect();
        f.write_str(&texts.join("; "))
    }
}

impl Window {
    fn parse(text: &str) -> Result<Window, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (days, times, zone) = match words.as_slice() {
            [] => return Err("empty window".into()),
            [d, t] => (*d, *t, None),
            [d, t, z] => (*d, *t, Some(*z)),
            _ => {
                return Err(format!(
                    "expected 2 or 3 words (days, times, zone), found {}",
                    words.len()
                ))
            }
        };
        let day_set = parse_days(days)?;
        let (start, end) = times
            .split_once('-')
            .ok_or_else(|| format!("{times:?} is not a time range HH:MM-HH:MM"))?;
        let start_m = parse_time(start, false)?;
        let end_m = parse_time(end, true)?;
        let length = if end_m > start_m {
            end_m - start_m
        } else if end_m == start_m {
            return Err(format!(
                "{times:?} starts and ends at the same time (a whole day is 00:00-24:00)"
            ));
        } else {
            end_m + 1440 - start_m
        };
        let (zone, zone_text) = match zone {
            None => (TimeZone::UTC, "UTC".to_string()),
            Some(z) => parse_zone(z)?,
        };
        let norm_days = normalize_days(&day_set);
        Ok(Window {
            days: day_set,
            start: start_m,
            length,
            zone,
            text: format!(
                "{norm_days} {}-{} {zone_text}",
                fmt_time(start_m),
                fmt_time(end_m)
            ),
        })
    }

    /// Occurrences `(start, end)` in Unix seconds from the local day before `now` to a week
    /// after. Start and end are wall-clock times in the zone, each turned into an instant the
    /// RFC 5545 way (see the module doc); an occurrence that is empty that day (wholly in a
    /// skipped hour) is left out.
    fn occurrences(&self, now: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        let today = Timestamp::from_second(now)
            .ok()
            .map(|t| self.zone.to_datetime(t).date());
        let instant = |dt: DateTime| {
            self.zone
                .to_ambiguous_timestamp(dt)
                .compatible()
                .ok()
                .map(Timestamp::as_second)
        };
        (-1i64..=7).filter_map(move |k| {
            let day: Date = today?.checked_add(Span::new().days(k)).ok()?;
            let weekday = usize::try_from(day.weekday().to_monday_zero_offset()).ok()?;
            if !self.days[weekday] {
                return None;
            }
            let start = day
                .to_datetime(jiff::civil::Time::midnight())
                .checked_add(Span::new().minutes(i64::from(self.start)))
                .ok()?;
            let end = start
                .checked_add(Span::new().minutes(i64::from(self.length)))
                .ok()?;
            let (s, e) = (instant(start)?, instant(end)?);
            (e > s).then_some((s, e))
        })
    }
}

fn day_index(s: &str) -> Option<usize> {
    let l = s.to_ascii_lowercase();
    (0..7).find(|&i| DAY_NAMES[i].to_ascii_lowercase() == l || FULL_DAY_NAMES[i] == l)
}

fn parse_days(s: &str) -> Result<[bool; 7], String> {
    let mut days = [false; 7];
    if s.eq_ignore_ascii_case("daily") || s == "*" {
        return Ok([true; 7]);
    }
    let unknown = |d: &str| {
        format!("{d:?} is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range Mon-Fri, a list Sat,Sun, or daily)")
    };
    for item in s.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let a = day_index(a).ok_or_else(|| unknown(a))?;
                let b = day_index(b).ok_or_else(|| unknown(b))?;
                let mut i = a;
                loop {
                    days[i] = true;
                    if i == b {
                        break;
                    }
                    i = (i + 1) % 7;
                }
            }
            None => days[day_index(item).ok_or_else(|| unknown(item))?] = true,
        }
    }
    Ok(days)
}

fn normalize_days(days: &[bool; 7]) -> String {
    if days.iter().all(|d| *d) {
        return "daily".into();
    }
    let names: Vec<&str> = (0..7).filter(|&i| days[i]).map(|i| DAY_NAMES[i]).collect();
    // A contiguous run of three or more (Monday first) reads better as a range.
    let first = (0..7).find(|&i| days[i]).unwrap_or(0);
    let last = (0..7).rev().find(|&i| days[i]).unwrap_or(0);
    if names.len() >= 3 && (first..=last).all(|i| days[i]) {
        format!("{}-{}", DAY_NAMES[first], DAY_NAMES[last])
    } else {
        names.join(",")
    }
}

fn parse_time(s: &str, end: bool) -> Result<u32, String> {
    let bad = || format!("{s:?} is not a time HH:MM (00:00 to 23:59, or 24:00 as an end)");
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: u32 = h.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    if m > 59 || h > 24 || (h == 24 && (m != 0 || !end)) {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn fmt_time(m: u32) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

/// At most this many bytes in a zone name (the longest IANA name is 32).
const MAX_ZONE_NAME: usize = 64;

fn parse_zone(z: &str) -> Result<(TimeZone, String), String> {
    let upper = z.to_ascii_uppercase();
    if matches!(upper.as_str(), "UTC" | "Z" | "GMT") {
        return Ok((TimeZone::UTC, "UTC".into()));
    }
    let rest = upper
        .strip_prefix("UTC")
        .or_else(|| upper.strip_prefix("GMT"))
        .unwrap_or(&upper);
    let (sign, digits) = match rest.chars().next() {
        Some('+') => (1, &rest[1..]),
        Some('-') => (-1, &rest[1..]),
        // Not an offset: a name (`Europe/Berlin`, and `GMT0`, `EST5EDT`, which zoneinfo has).
        _ => return named_zone(z),
    };
    let (h, m) = match digits.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits.len() == 4 => (&digits[..2], &digits[2..]),
        None => (digits, "0"),
    };
    let h: i32 = h.parse().map_err(|_| not_a_zone(z))?;
    let m: i32 = m.parse().map_err(|_| not_a_zone(z))?;
    if !(0..=14).contains(&h) || !(0..60).contains(&m) {
        return Err(format!(
            "{z:?}: an offset is at most 14 hours (and minutes below 60)"
        ));
    }
    let offset = sign * (h * 60 + m);
    if offset == 0 {
        return Ok((TimeZone::UTC, "UTC".into()));
    }
    let fixed = Offset::from_seconds(offset * 60).map_err(|e| format!("{z:?}: {e}"))?;
    Ok((
        TimeZone::fixed(fixed),
        format!("UTC{}{:02}:{:02}", if sign > 0 { '+' } else { '-' }, h, m),
    ))
}

fn not_a_zone(z: &str) -> String {
    format!("{z:?} is not a zone: give UTC, an offset such as +01:00, -05:30, UTC+2, or an IANA name such as Europe/Berlin")
}

/// A named zone from the system's zoneinfo; its text is the IANA name as the database spells it.
fn named_zone(z: &str) -> Result<(TimeZone, String), String> {
    let plausible = z.len() <= MAX_ZONE_NAME
        && z.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && z.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'))
        && !z.split('/').any(|part| part.is_empty() || part == "..");
    if !plausible {
        return Err(not_a_zone(z));
    }
    let tz = jiff::tz::db().get(z).map_err(|_| {
        format!("{z:?} is not a time zone of this system's zoneinfo (/usr/share/zoneinfo, the tzdata package): check the IANA name (Europe/Berlin, America/New_York) or install tzdata")
    })?;
    let name = tz.iana_name().unwrap_or(z).to_string();
    Ok((tz, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-03 was a Saturday; this is its 00:00 UTC.
    const SAT: u64 = 1_767_398_400;
    const H: u64 = 3600;

    #[test]
    fn the_epoch_day_arithmetic_is_right() {
        // 2026-01-03T00:00:00Z, a Saturday.
        assert_eq!(crate::time::rfc3339(SAT), "2026-01-03T00:00:00Z");
        let w = Windows::parse("Sat 00:00-01:00").unwrap();
        assert!(matches!(w.state(SAT), WindowState::Open { .. }));
        assert!(matches!(w.state(SAT - 1), WindowState::Closed(_)));
    }

    #[test]
    fn open_inside_closed_outside_with_the_next_opening() {
        let w = Windows::parse("Sat 02:00-06:00 UTC").unwrap();
        assert_eq!(w.to_string(), "Sat 02:00-06:00 UTC");
        assert_eq!(
            w.state(SAT + 2 * H),
            WindowState::Open {
                window: "Sat 02:00-06:00 UTC".into(),
                closes_at: SAT + 6 * H
            }
        );
        assert!(matches!(w.state(SAT + 6 * H - 1), WindowState::Open { .. }));
        // At the end it is closed, and opens a week later.
        let WindowState::Closed(wait) = w.state(SAT + 6 * H) else {
            panic!()
        };
        assert_eq!(wait.opens_at, Some(SAT + 7 * 24 * H + 2 * H));
        // Before: opens today.
        let WindowState::Closed(wait) = w.state(SAT - 10 * 60) else {
            panic!()
        };
        assert_eq!(wait.opens_at, Some(SAT + 2 * H));
        assert_eq!(
            wait.message(SAT - 10 * 60),
            "waiting for the maintenance window Sat 02:00-06:00 UTC, opens in 2h10m"
        );
    }

    #[test]
    fn windows_crossing_midnight_belong_to_their_start_day() {
        let w = Windows::parse("Fri 22:00-02:00").unwrap();
        let fri = SAT - 24 * H;
        assert!(matches!(w.state(fri + 23 * H), WindowState::Open { .. }));
        assert_eq!(
            w.state(SAT + H),
            WindowState::Open {
                window: "Fri 22:00-02:00 UTC".into(),
                closes_at: SAT + 2 * H
            }
        );
        assert!(matches!(w.state(SAT + 2 * H), WindowState::Closed(_)));
        // Saturday 23:00 is not in it (it starts on Fridays only).
        assert!(matches!(w.state(SAT + 23 * H), WindowState::Closed(_)));
        // Sunday 01:00 neither.
        assert!(matches!(w.state(SAT + 25 * H), WindowState::Closed(_)));
        // A Sunday-to-Monday window wraps the week.
        let w = Windows::parse("Sun 23:00-01:00").unwrap();
        let mon = SAT + 2 * 24 * H;
        assert!(matches!(w.state(mon), WindowState::Open { .. }));
        assert!(matches!(w.state(mon + H), WindowState::Closed(_)));
    }

    #[test]
    fn offsets_shift_the_window() {
        // 02:00-06:00 at +02:00 is 00:00-04:00 UTC.
        let w = Windows::parse("Sat 02:00-06:00 +02:00").unwrap();
        assert_eq!(w.to_string(), "Sat 02:00-06:00 UTC+02:00");
        assert!(matches!(w.state(SAT), WindowState::Open { .. }));
        assert!(matches!(w.state(SAT + 4 * H), WindowState::Closed(_)));
        // Negative offsets move it into the next UTC day: Fri 22:00 at -05:00 is Sat 03:00 UTC.
        let w = Windows::parse("Fri 22:00-23:00 UTC-5").unwrap();
        assert_eq!(w.to_string(), "Fri 22:00-23:00 UTC-05:00");
        assert!(matches!(w.state(SAT + 3 * H), WindowState::Open { .. }));
        assert!(matches!(w.state(SAT - 2 * H), WindowState::Closed(_)));
        for (z, norm) in [
            ("+0530", "UTC+05:30"),
            ("gmt", "UTC"),
            ("Z", "UTC"),
            ("+00:00", "UTC"),
        ] {
            let w = Windows::parse(&format!("Mon 01:00-02:00 {z}")).unwrap();
            assert!(w.to_string().ends_with(norm), "{z}: {w}");
        }
    }

    #[test]
    fn several_windows_the_next_one_is_named() {
        let w = Windows::parse("Sat 02:00-06:00 UTC; Sun 02:00-04:00 UTC; Mon-Fri 23:00-24:00")
            .unwrap();
        assert_eq!(
            w.to_string(),
            "Sat 02:00-06:00 UTC; Sun 02:00-04:00 UTC; Mon-Fri 23:00-24:00 UTC"
        );
        let WindowState::Closed(wait) = w.state(SAT + 7 * H) else {
            panic!()
        };
        assert_eq!(wait.window, "Sun 02:00-04:00 UTC");
        assert_eq!(wait.opens_at, Some(SAT + 26 * H));
        assert!(matches!(w.state(SAT + 27 * H), WindowState::Open { .. }));
        // Monday 23:30 is in the weekday window; Saturday 23:30 is not.
        assert!(matches!(
            w.state(SAT + 2 * 24 * H + 23 * H + 1800),
            WindowState::Open { .. }
        ));
        assert!(matches!(
            w.state(SAT + 23 * H + 1800),
            WindowState::Closed(_)
        ));
    }

    #[test]
    fn day_forms() {
        for (days, norm) in [
            ("daily", "daily"),
            ("*", "daily"),
            ("Mon-Sun", "daily"),
            ("sat,SUN", "Sat,Sun"),
            ("Saturday", "Sat"),
            ("Fri-Mon", "Mon,Fri,Sat,Sun"),
            ("Mon-Wed", "Mon-Wed"),
        ] {
            let w = Windows::parse(&format!("{days} 01:00-02:00")).unwrap();
            assert_eq!(w.to_string(), format!("{norm} 01:00-02:00 UTC"), "{days}");
        }
        let w = Windows::parse("daily 00:00-24:00").unwrap();
        assert!(matches!(w.state(SAT + 5 * H), WindowState::Open { .. }));
        // A trailing separator is fine.
        assert!(Windows::parse("Sat 02:00-06:00;").is_ok());
    }

    #[test]
    fn bad_windows_say_which_and_why() {
        let cases = [
            ("", "empty window"),
            ("Sat", "expected 2 or 3 words"),
            ("Sta 02:00-06:00", "\"Sta\" is not a day"),
            ("Sat 02:00", "is not a time range"),
            ("Sat 2-6", "is not a time HH:MM"),
            ("Sat 25:00-26:00", "\"25:00\" is not a time"),
            ("Sat 02:60-03:00", "\"02:60\" is not a time"),
            ("Sat 24:00-02:00", "\"24:00\" is not a time"),
            ("Sat 02:00-02:00", "starts and ends at the same time"),
            (
                "Sat 02:00-06:00 Mars/Olympus_Mons",
                "is not a time zone of this system's zoneinfo",
            ),
            (
                "Sat 02:00-06:00 CEST",
                "is not a time zone of this system's zoneinfo",
            ),
            ("Sat 02:00-06:00 ../../etc/passwd", "is not a zone"),
            ("Sat 02:00-06:00 Europe//Berlin", "is not a zone"),
            ("Sat 02:00-06:00 +15:00", "at most 14 hours"),
            ("Sat 02:00-06:00 +1x", "is not a zone"),
            ("Sat 02:00-06:00 UTC extra", "expected 2 or 3 words"),
        ];
        for (text, want) in cases {
            let e = Windows::parse(text).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
            assert!(e.to_string().contains("window 1"), "{e}");
        }
        let e = Windows::parse("Sat 02:00-06:00; Sun 3:00-99:00").unwrap_err();
        assert_eq!(e.index, 2);
        assert_eq!(e.text, "Sun 3:00-99:00");
    }

    /// 2026-03-29, a Sunday, 00:00 UTC: Europe/Berlin springs forward at 01:00 UTC (02:00 CET
    /// becomes 03:00 CEST).
    const SPRING: u64 = 1_774_742_400;
    /// 2026-10-25, a Sunday, 00:00 UTC: Europe/Berlin falls back at 01:00 UTC (03:00 CEST
    /// becomes 02:00 CET).
    const FALL: u64 = 1_792_886_400;
    /// 2026-01-04 (winter) and 2026-07-05 (summer), Sundays, 00:00 UTC.
    const WINTER_SUN: u64 = 1_767_484_800;
    const SUMMER_SUN: u64 = 1_783_209_600;

    fn opens_at(w: &Windows, now: u64) -> u64 {
        match w.state(now) {
            WindowState::Closed(wait) => wait.opens_at.unwrap(),
            other => panic!("open at {now}: {other:?}"),
        }
    }

    fn closes_at(w: &Windows, now: u64) -> u64 {
        match w.state(now) {
            WindowState::Open { closes_at, .. } => closes_at,
            other => panic!("closed at {now}: {other:?}"),
        }
    }

    #[test]
    fn named_zones_follow_daylight_saving_time() {
        let w = Windows::parse("Sun 02:00-06:00 Europe/Berlin").unwrap();
        assert_eq!(w.to_string(), "Sun 02:00-06:00 Europe/Berlin");
        // 02:00 local is 01:00 UTC in winter (CET) and 00:00 UTC in summer (CEST).
        assert_eq!(opens_at(&w, WINTER_SUN), WINTER_SUN + H);
        assert_eq!(closes_at(&w, WINTER_SUN + H), WINTER_SUN + 5 * H);
        assert_eq!(opens_at(&w, SUMMER_SUN - H), SUMMER_SUN);
        assert_eq!(closes_at(&w, SUMMER_SUN), SUMMER_SUN + 4 * H);
        // The name is read as the database spells it; a fixed offset does not move.
        let w = Windows::parse("Sun 02:00-06:00 europe/berlin").unwrap();
        assert_eq!(w.to_string(), "Sun 02:00-06:00 Europe/Berlin");
        let w = Windows::parse("Sun 02:00-06:00 GMT0").unwrap();
        assert_eq!(opens_at(&w, SUMMER_SUN - H), SUMMER_SUN + 2 * H);
        let fixed = Windows::parse("Sun 02:00-06:00 +01:00").unwrap();
        assert_eq!(opens_at(&fixed, SUMMER_SUN - H), SUMMER_SUN + H);
    }

    #[test]
    fn a_window_in_the_skipped_hour_opens_as_if_the_clocks_had_not_moved() {
        // 02:30 does not exist in Berlin on 2026-03-29: read as 02:30 CET = 01:30 UTC (03:30
        // CEST); 04:00 is CEST = 02:00 UTC. Half an hour of wall-clock window is left.
        let w = Windows::parse("Sun 02:30-04:00 Europe/Berlin").unwrap();
        assert_eq!(opens_at(&w, SPRING), SPRING + H + 30 * 60);
        assert_eq!(closes_at(&w, SPRING + H + 30 * 60), SPRING + 2 * H);
        // Just before the shifted start it is closed, and it does not open twice that day.
        assert_eq!(opens_at(&w, SPRING + H + 29 * 60), SPRING + H + 30 * 60);
        assert_eq!(opens_at(&w, SPRING + 2 * H), SPRING + 7 * 24 * H + 30 * 60);
        // A window wholly inside the skipped hour does not open that day: the next one is a
        // week later (02:00 CEST then = 00:00 UTC).
        let w = Windows::parse("Sun 02:00-03:00 Europe/Berlin").unwrap();
        assert_eq!(opens_at(&w, SPRING), SPRING + 7 * 24 * H);
        // On an ordinary day the same window opens at 02:00 local.
        assert_eq!(opens_at(&w, WINTER_SUN), WINTER_SUN + H);
    }

    #[test]
    fn a_time_that_occurs_twice_is_its_first_occurrence() {
        // 02:30 happens twice in Berlin on 2026-10-25: first at 00:30 UTC (CEST), again at 01:30
        // UTC (CET). The window starts at the first; 03:30 CET is 02:30 UTC.
        let w = Windows::parse("Sun 02:30-03:30 Europe/Berlin").unwrap();
        assert_eq!(opens_at(&w, FALL), FALL + 30 * 60);
        assert_eq!(closes_at(&w, FALL + 30 * 60), FALL + 2 * H + 30 * 60);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(3 * 3600 + 12 * 60 + 5), "3h12m");
        assert_eq!(human(2 * 86400 + 4 * 3600), "2d4h");
        assert_eq!(human(45 * 60), "45m");
        assert_eq!(human(30), "30s");
    }
}
