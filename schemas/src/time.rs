//! Instants as analysts' tools read them: RFC 3339 strings in UTC with milliseconds
//! (`2026-05-28T20:26:40.000Z`), beside the epoch milliseconds the stages compute with.

use std::{borrow::Cow, fmt, str::FromStr};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

const MS_PER_DAY: i64 = 86_400_000;
/// Days from 0000-03-01 to 1970-01-01 in the proleptic Gregorian calendar.
const EPOCH_DAYS_FROM_MARCH_0000: i64 = 719_468;
const DAYS_PER_ERA: i64 = 146_097;

/// A UTC instant with millisecond precision. JSON: an RFC 3339 string; a message that
/// carries one also carries the same instant as `<name>_ms`, and validation checks that
/// the two agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UtcTime(i64);

#[derive(Debug, Error, PartialEq, Eq)]
#[error("{0:?} is not an RFC 3339 date-time (e.g. 2026-05-28T20:26:40.000Z) in years 0000 to 9999")]
pub struct UtcTimeError(String);

/// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the instants RFC 3339's
/// four-digit years can write.
const RFC_3339_MS: std::ops::RangeInclusive<i64> = -62_167_219_200_000..=253_402_300_799_999;

impl UtcTime {
    pub const fn from_ms(ms: i64) -> Self {
        Self(ms)
    }

    pub const fn ms(self) -> i64 {
        self.0
    }
}

/// Civil date of a day number counted from 1970-01-01 (H. Hinnant's `civil_from_days`).
#[allow(clippy::arithmetic_side_effects)] // |days| ≤ i64::MAX / 86,400,000 ≈ 1.1e11: far from overflow
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + EPOCH_DAYS_FROM_MARCH_0000;
    let era = z.div_euclid(DAYS_PER_ERA);
    let day_of_era = z.rem_euclid(DAYS_PER_ERA);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Day number from 1970-01-01 of a civil date (H. Hinnant's `days_from_civil`); `None`
/// where the arithmetic would overflow (a year read from a remote document may be any
/// number).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    // Counting years from March puts the leap day at the end of the year.
    let year = if month <= 2 { year.checked_sub(1)? } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.checked_sub(era.checked_mul(400)?)?;
    let shifted_month = if month > 2 { month.checked_sub(3)? } else { month.checked_add(9)? };
    let day_of_year =
        shifted_month.checked_mul(153)?.checked_add(2)?.checked_div(5)?.checked_add(day)?.checked_sub(1)?;
    let day_of_era = year_of_era
        .checked_mul(365)?
        .checked_add(year_of_era.checked_div(4)?)?
        .checked_sub(year_of_era.checked_div(100)?)?
        .checked_add(day_of_year)?;
    era.checked_mul(DAYS_PER_ERA)?.checked_add(day_of_era)?.checked_sub(EPOCH_DAYS_FROM_MARCH_0000)
}

#[allow(clippy::arithmetic_side_effects)] // remainders by non-zero constants
fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl fmt::Display for UtcTime {
    #[allow(clippy::arithmetic_side_effects)] // div_euclid and rem_euclid of an i64 by constants
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (days, ms_of_day) = (self.0.div_euclid(MS_PER_DAY), self.0.rem_euclid(MS_PER_DAY));
        let (year, month, day) = civil_from_days(days);
        let (seconds, ms) = (ms_of_day / 1000, ms_of_day % 1000);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        )
    }
}

impl FromStr for UtcTime {
    type Err = UtcTimeError;

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `T` and `Z` in either case; fractions
    /// beyond milliseconds are truncated, a leap second is refused.
    #[allow(clippy::arithmetic_side_effects)] // every operand is bounded by the digits read
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || UtcTimeError(text.chars().take(64).collect());
        let bytes = text.as_bytes();
        let number = |range: std::ops::Range<usize>| -> Option<i64> {
            let digits = bytes.get(range)?;
            digits.iter().try_fold(0_i64, |n, &b| b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0')))
        };
        let at = |index: usize, expected: &[u8]| bytes.get(index).is_some_and(|b| expected.contains(b));
        if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt") && at(13, b":") && at(16, b":")) {
            return Err(error());
        }
        let fields = [0..4, 5..7, 8..10, 11..13, 14..16, 17..19].map(number);
        let [Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)] = fields else {
            return Err(error());
        };
        if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
            return Err(error());
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(error());
        }
        let mut index = 19;
        let mut ms = 0;
        if at(index, b".") {
            let digits = bytes[index + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return Err(error());
            }
            let millis = number(index + 1..index + 1 + digits.min(3)).ok_or_else(error)?;
            ms = millis * [100, 10, 1][digits.min(3) - 1];
            index += 1 + digits;
        }
        let offset_minutes = match bytes.get(index..) {
            Some(b"Z" | b"z") => 0,
            Some([sign @ (b'+' | b'-'), _, _, b':', _, _]) => {
                let (hours, minutes) = (
                    number(index + 1..index + 3).ok_or_else(error)?,
                    number(index + 4..index + 6).ok_or_else(error)?,
                );
                if hours > 23 || minutes > 59 {
                    return Err(error());
                }
                let offset = hours * 60 + minutes;
                if *sign == b'-' {
                    -offset
                } else {
                    offset
                }
            }
            _ => return Err(error()),
        };
        let days = days_from_civil(year, month, day).ok_or_else(error)?;
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
        Ok(Self(seconds * 1000 + ms))
    }
}

impl Serialize for UtcTime {
    /// Refuses an instant outside years 0000 to 9999, which `Display` would write with a
    /// sign or a fifth digit: not RFC 3339, and not read back.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !RFC_3339_MS.contains(&self.0) {
            return Err(serde::ser::Error::custom(format!(
                "{} ms since 1970 is outside the years 0000 to 9999 of RFC 3339",
                self.0
            )));
        }
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UtcTime {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for UtcTime {
    fn schema_name() -> Cow<'static, str> {
        "UtcTime".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An instant in UTC with milliseconds, RFC 3339 (`2026-05-28T20:26:40.000Z`); no leap second (:60) is written or read.",
            "type": "string",
            "format": "date-time",
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn days_from_civil_known_points_and_overflow() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2024, 2, 29), Some(19_782));
        assert_eq!(days_from_civil(i64::MAX, 12, 31), None);
    }

    use super::*;

    #[test]
    fn formats_as_rfc_3339_in_utc_with_milliseconds() {
        // Values from Python's datetime.fromtimestamp(s, timezone.utc).
        assert_eq!(UtcTime::from_ms(1_780_000_000_000).to_string(), "2026-05-28T20:26:40.000Z");
        assert_eq!(UtcTime::from_ms(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(UtcTime::from_ms(951_782_400_123).to_string(), "2000-02-29T00:00:00.123Z");
        assert_eq!(UtcTime::from_ms(-1).to_string(), "1969-12-31T23:59:59.999Z");
        assert_eq!(UtcTime::from_ms(253_402_300_799_999).to_string(), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn only_instants_of_four_digit_years_are_written() {
        let json = |ms: i64| serde_json::to_string(&UtcTime::from_ms(ms));
        assert_eq!(json(*RFC_3339_MS.start()).unwrap(), r#""0000-01-01T00:00:00.000Z""#);
        assert_eq!(json(*RFC_3339_MS.end()).unwrap(), r#""9999-12-31T23:59:59.999Z""#);
        for outside in [RFC_3339_MS.start() - 1, RFC_3339_MS.end() + 1, i64::MIN, i64::MAX] {
            assert!(json(outside).is_err(), "{outside}");
        }
    }

    #[test]
    fn parses_what_it_writes_and_other_rfc_3339_forms() {
        for ms in [0, 1, 999, 951_782_400_123, 1_780_000_000_000, 4_102_444_800_000, -86_400_001] {
            let time = UtcTime::from_ms(ms);
            assert_eq!(time.to_string().parse(), Ok(time), "{time}");
        }
        let parse = |text: &str| text.parse::<UtcTime>().map(UtcTime::ms);
        assert_eq!(parse("2026-05-28T22:26:40+02:00"), Ok(1_780_000_000_000));
        assert_eq!(parse("2026-05-28t20:26:40z"), Ok(1_780_000_000_000));
        assert_eq!(parse("2026-05-28T20:26:40.5Z"), Ok(1_780_000_000_500));
        assert_eq!(parse("2026-05-28T20:26:40.123456Z"), Ok(1_780_000_000_123));
        assert_eq!(parse("2026-05-28T19:56:40-00:30"), Ok(1_780_000_000_000));
        for bad in [
            "",
            "2026-05-28",
            "2026-05-28T20:26:40",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-05-28T24:00:00Z",
            "2026-05-28T20:26:60Z",
            "2026-05-28T20:26:40.Z",
            "2026-05-28T20:26:40+2:00",
            "2026-05-28T20:26:40Z trailing",
            "+026-05-28T20:26:40Z",
            "2026-05-28T20:26:40.1é",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
