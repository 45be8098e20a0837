//! Time as integers: milliseconds since the host's epoch, and spans of milliseconds.
//!
//! Pure crates never read a clock; the host stamps every input with a [`Time`]. Integer
//! milliseconds keep arithmetic exact and runs reproducible.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time: milliseconds since the host's epoch (0 in a simulation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Time(pub u64);

/// A span of time in milliseconds. Written in files as `250ms`, `90s`, `15m`, `2h`, `1d`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// The span since `earlier`, zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}", Duration(self.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(1000))
    }

    pub fn from_millis(ms: u64) -> Duration {
        Duration(ms)
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// For people, not files: the two largest units, rounded (`3d 4h`, `2h 5m`, `4m 10s`,
    /// `12.3s`, `250ms`). `Display` is exact instead, so files round-trip.
    pub fn human(self) -> String {
        let ms = self.0;
        let units = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
        for (i, &(scale, unit)) in units.iter().enumerate().take(3) {
            if ms >= scale {
                let (next, next_unit) = units[i + 1];
                let (big, small) = (ms / scale, (ms % scale + next / 2) / next);
                // Rounding the smaller unit can carry into the bigger one.
                let (big, small) = if small * next >= scale { (big + 1, 0) } else { (big, small) };
                return if small == 0 {
                    format!("{big}{unit}")
                } else {
                    format!("{big}{unit} {small}{next_unit}")
                };
            }
        }
        if ms >= 1_000 {
            let s = format!("{:.1}", ms as f64 / 1000.0);
            format!("{}s", s.trim_end_matches(".0"))
        } else if ms == 0 {
            "0s".to_string()
        } else {
            format!("{ms}ms")
        }
    }
}

/// Why a duration string was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a duration: write whole numbers with units, e.g. 500ms, 90s, 15m, 2h30m or 1d")]
pub struct DurationParseError {
    pub input: String,
}

impl FromStr for Duration {
    type Err = DurationParseError;

    /// A whole number with a unit, or several from the largest unit down: `90s`, `2h30m`, `1d12h`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || DurationParseError { input: s.to_string() };
        let mut rest = s.trim();
        if rest.is_empty() {
            return Err(err());
        }
        let mut total: u64 = 0;
        let mut last_scale = u64::MAX;
        while !rest.is_empty() {
            let split = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
            let (num, tail) = rest.split_at(split);
            let n: u64 = num.parse().map_err(|_| err())?;
            let unit_len = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let scale = match unit.trim() {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(err()),
            };
            // Units must fall from left to right: `2h30m`, not `30m2h` or `1h1h`.
            if scale >= last_scale {
                return Err(err());
            }
            last_scale = scale;
            total = n.checked_mul(scale).and_then(|v| total.checked_add(v)).ok_or_else(err)?;
            rest = tail;
        }
        Ok(Duration(total))
    }
}

impl fmt::Display for Duration {
    /// The largest unit that divides the span exactly, so `parse(display(d)) == d`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        for (scale, unit) in [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")] {
            if ms != 0 && ms.is_multiple_of(scale) {
                return write!(f, "{}{}", ms / scale, unit);
            }
        }
        if ms == 0 {
            write!(f, "0s")
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        for (s, ms) in [
            ("500ms", 500),
            ("90s", 90_000),
            ("15m", 900_000),
            ("2h", 7_200_000),
            ("1d", 86_400_000),
            ("0s", 0),
            ("2h30m", 9_000_000),
            ("1d12h", 129_600_000),
            ("1m30s500ms", 90_500),
        ] {
            assert_eq!(s.parse::<Duration>().unwrap(), Duration(ms), "{s}");
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for s in ["", "15", "s", "1.5h", "-3s", "3 weeks", "99999999999999999999d", "30m2h", "1h1h", "2h30"] {
            assert!(s.parse::<Duration>().is_err(), "{s} should not parse");
        }
    }

    #[test]
    fn human_durations_keep_two_units() {
        for (ms, want) in [
            (0, "0s"),
            (250, "250ms"),
            (12_340, "12.3s"),
            (60_000, "1m"),
            (250_000, "4m 10s"),
            (7_500_000, "2h 5m"),
            (7_199_999, "2h"),
            (273_600_000, "3d 4h"),
            (17_585_525_000, "203d 13h"),
        ] {
            assert_eq!(Duration(ms).human(), want, "{ms}");
        }
    }

    #[test]
    fn display_round_trips() {
        for ms in [0, 1, 999, 1000, 90_000, 3_600_000, 86_400_000, 90_061_001] {
            let d = Duration(ms);
            assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }
        assert_eq!(Duration(90_000).to_string(), "90s");
        assert_eq!(Duration(7_200_000).to_string(), "2h");
    }
}
