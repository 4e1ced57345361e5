//! Date parsing for sitemaps and feeds: W3C Datetime (sitemaps, Atom) and RFC 822/1123 (RSS),
//! both to Unix milliseconds, without a date library.

/// Earliest year accepted; older claims are junk for a crawler deciding what changed.
const MIN_YEAR: u32 = 1970;
/// Latest year accepted; four-digit years are all either format can express sensibly.
const MAX_YEAR: u32 = 9999;

use recrawl_schemas::time::days_from_civil;

const MS_PER_SECOND: i64 = 1000;
const SECONDS_PER_DAY: i64 = 86_400;

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Broken-down time as read from text, before validation.
#[derive(Debug, Default)]
struct Fields {
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
    /// East of UTC, in minutes.
    offset_minutes: i64,
}

impl Fields {
    /// Validates every field and converts to Unix milliseconds.
    fn to_unix_ms(&self) -> Option<i64> {
        let valid = (MIN_YEAR..=MAX_YEAR).contains(&self.year)
            && (1..=12).contains(&self.month)
            && (1..=days_in_month(self.year, self.month)).contains(&self.day)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60
            && self.millis < 1000
            && self.offset_minutes.checked_abs()? < 24 * 60;
        if !valid {
            return None;
        }
        let days = days_from_civil(i64::from(self.year), i64::from(self.month), i64::from(self.day))?;
        let seconds = days
            .checked_mul(SECONDS_PER_DAY)?
            .checked_add(i64::from(self.hour).checked_mul(3600)?)?
            .checked_add(i64::from(self.minute).checked_mul(60)?)?
            .checked_add(i64::from(self.second))?
            .checked_sub(self.offset_minutes.checked_mul(60)?)?;
        seconds.checked_mul(MS_PER_SECOND)?.checked_add(i64::from(self.millis))
    }
}

fn digit_value(byte: u8) -> Option<u32> {
    char::from(byte).to_digit(10)
}

/// A byte cursor over ASCII date text.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor { rest: text.as_bytes() }
    }

    fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn bump(&mut self) {
        self.rest = self.rest.get(1..).unwrap_or_default();
    }

    /// Consumes `byte` if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Exactly `count` ASCII digits (count is at most 4, so u32 cannot overflow, but stay checked).
    fn digits(&mut self, count: usize) -> Option<u32> {
        let mut value: u32 = 0;
        for _ in 0..count {
            let digit = self.peek().and_then(digit_value)?;
            value = value.checked_mul(10)?.checked_add(digit)?;
            self.bump();
        }
        Some(value)
    }

    fn is_done(&self) -> bool {
        self.rest.is_empty()
    }
}

/// Parses a W3C Datetime (the ISO 8601 profile sitemaps and Atom use) to Unix milliseconds.
///
/// Accepts `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, and `YYYY-MM-DDThh:mm[:ss[.s…]][TZD]` with TZD `Z` or
/// `±hh:mm`; a date-time without TZD is taken as UTC. A space in place of `T` is tolerated since
/// some generators write one. Returns `None` for anything else or any out-of-range field.
pub fn w3c_datetime_ms(text: &str) -> Option<i64> {
    let mut cur = Cursor::new(text.trim());
    let mut fields = Fields { year: cur.digits(4)?, month: 1, day: 1, ..Fields::default() };
    if cur.eat(b'-') {
        fields.month = cur.digits(2)?;
        if cur.eat(b'-') {
            fields.day = cur.digits(2)?;
            if cur.eat(b'T') || cur.eat(b't') || cur.eat(b' ') {
                read_w3c_time(&mut cur, &mut fields)?;
            }
        }
    }
    if !cur.is_done() {
        return None;
    }
    fields.to_unix_ms()
}

fn read_w3c_time(cur: &mut Cursor<'_>, fields: &mut Fields) -> Option<()> {
    fields.hour = cur.digits(2)?;
    if !cur.eat(b':') {
        return None;
    }
    fields.minute = cur.digits(2)?;
    if cur.eat(b':') {
        fields.second = cur.digits(2)?;
        if cur.eat(b'.') {
            fields.millis = read_fraction_ms(cur)?;
        }
    }
    if cur.eat(b'Z') || cur.eat(b'z') {
        return Some(());
    }
    let sign = match cur.peek() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        // No zone designator: UTC, as the brief for this crawler says.
        _ => return Some(()),
    };
    cur.bump();
    let hours = cur.digits(2)?;
    // The colon is required by W3C but often omitted; accepting both costs nothing.
    cur.eat(b':');
    let minutes = cur.digits(2)?;
    if hours >= 24 || minutes >= 60 {
        return None;
    }
    fields.offset_minutes = i64::from(hours.checked_mul(60)?.checked_add(minutes)?).checked_mul(sign)?;
    Some(())
}

/// Reads one or more fraction digits, keeping millisecond precision and ignoring the rest.
fn read_fraction_ms(cur: &mut Cursor<'_>) -> Option<u32> {
    let mut millis: u32 = 0;
    let mut scale: u32 = 100;
    let mut any = false;
    while let Some(digit) = cur.peek().and_then(digit_value) {
        millis = millis.checked_add(digit.checked_mul(scale)?)?;
        scale /= 10;
        any = true;
        cur.bump();
    }
    any.then_some(millis)
}

/// Parses an RFC 822 / RFC 1123 date as RSS uses it (`Sat, 07 Sep 2002 09:42:31 GMT`) to Unix
/// milliseconds.
///
/// Tolerates: a missing day name, a 1- or 2-digit day, full month or day names, 2-digit years
/// (≥ 50 → 19xx, else 20xx), missing seconds, a missing zone (UTC), and a trailing parenthesised
/// comment. Zones: `±hhmm`, UT, GMT, Z, the US zones, and single military letters (taken as UTC,
/// as RFC 1123 advises since RFC 822 defined their signs backwards).
pub fn rfc822_ms(text: &str) -> Option<i64> {
    let mut tokens = text.split(|c: char| c.is_ascii_whitespace() || c == ',').filter(|t| !t.is_empty());
    let mut token = tokens.next()?;
    if token.bytes().all(|b| b.is_ascii_alphabetic()) {
        if !is_day_name(token) {
            return None;
        }
        token = tokens.next()?;
    }
    let mut fields = Fields { day: number(token, 1, 2)?, ..Fields::default() };
    fields.month = month_number(tokens.next()?)?;
    let year_token = tokens.next()?;
    fields.year = match year_token.len() {
        4 => number(year_token, 4, 4)?,
        2 => {
            let short = number(year_token, 2, 2)?;
            if short >= 50 {
                short.checked_add(1900)?
            } else {
                short.checked_add(2000)?
            }
        }
        _ => return None,
    };
    let mut clock = tokens.next()?.split(':');
    fields.hour = number(clock.next()?, 1, 2)?;
    fields.minute = number(clock.next()?, 1, 2)?;
    if let Some(second) = clock.next() {
        fields.second = number(second, 1, 2)?;
    }
    if clock.next().is_some() {
        return None;
    }
    if let Some(zone) = tokens.next() {
        fields.offset_minutes = zone_offset_minutes(zone)?;
    }
    // Some feeds append "(UTC)" or similar; anything else after the zone means we misread.
    if tokens.next().is_some_and(|t| !t.starts_with('(')) {
        return None;
    }
    fields.to_unix_ms()
}

/// A decimal number of `min..=max` ASCII digits.
fn number(token: &str, min: usize, max: usize) -> Option<u32> {
    if !(min..=max).contains(&token.len()) {
        return None;
    }
    Cursor::new(token).digits(token.len())
}

fn is_day_name(token: &str) -> bool {
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    token.get(..3).is_some_and(|prefix| DAYS.iter().any(|day| day.eq_ignore_ascii_case(prefix)))
}

fn month_number(token: &str) -> Option<u32> {
    const MONTHS: [&str; 12] =
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    if !token.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let prefix = token.get(..3)?;
    let index = MONTHS.iter().position(|month| month.eq_ignore_ascii_case(prefix))?;
    u32::try_from(index).ok()?.checked_add(1)
}

fn zone_offset_minutes(zone: &str) -> Option<i64> {
    let hours = |h: i64| h.checked_mul(60);
    let upper = zone.to_ascii_uppercase();
    match upper.as_str() {
        "UT" | "UTC" | "GMT" | "Z" => hours(0),
        "EST" => hours(-5),
        "EDT" | "AST" => hours(-4),
        "CST" => hours(-6),
        "CDT" => hours(-5),
        "MST" => hours(-7),
        "MDT" => hours(-6),
        "PST" => hours(-8),
        "PDT" => hours(-7),
        military
            if military.len() == 1
                && military != "J"
                && military.bytes().all(|b| b.is_ascii_alphabetic()) =>
        {
            hours(0)
        }
        _ => {
            let mut cur = Cursor::new(zone);
            let sign = match cur.peek() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            cur.bump();
            let hh = cur.digits(2)?;
            let mm = cur.digits(2)?;
            if !cur.is_done() || hh >= 24 || mm >= 60 {
                return None;
            }
            i64::from(hh.checked_mul(60)?.checked_add(mm)?).checked_mul(sign)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: i64 = 86_400_000;

    #[test]
    fn w3c_all_precisions() {
        assert_eq!(w3c_datetime_ms("1970"), Some(0));
        assert_eq!(w3c_datetime_ms("1970-02"), Some(31 * DAY_MS));
        assert_eq!(w3c_datetime_ms("1970-01-02"), Some(DAY_MS));
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00Z"), Some(1_104_537_600_000));
        assert_eq!(w3c_datetime_ms(" 2005-01-01T00:00:01Z\n"), Some(1_104_537_601_000));
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00:01.5Z"), Some(1_104_537_601_500));
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00:01.123456789Z"), Some(1_104_537_601_123));
        // No zone on a date-time: UTC.
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00:01"), Some(1_104_537_601_000));
    }

    #[test]
    fn w3c_time_zones() {
        let utc = w3c_datetime_ms("2004-12-31T23:00:00Z");
        assert_eq!(w3c_datetime_ms("2005-01-01T01:00:00+02:00"), utc);
        assert_eq!(w3c_datetime_ms("2004-12-31T18:00:00-05:00"), utc);
        assert_eq!(w3c_datetime_ms("2004-12-31T18:00:00-0500"), utc);
        assert_eq!(w3c_datetime_ms("2005-01-01T01:00+02:00"), utc);
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00:00+24:00"), None);
        assert_eq!(w3c_datetime_ms("2005-01-01T00:00:00+01:60"), None);
    }

    #[test]
    fn w3c_rejects_out_of_range_and_junk() {
        for bad in [
            "",
            "yesterday",
            "2005-13-01",
            "2005-00-10",
            "2005-01-32",
            "2005-04-31",
            "2005-01-01T24:00:00Z",
            "2005-01-01T10:60Z",
            "2005-01-01T10:00:60Z",
            "1969-12-31",
            "10000-01-01",
            "2005-1-01",
            "2005-01-01T10Z",
            "2005-01-01T10:00:00.Z",
            "2005-01-01T10:00:00Zjunk",
            "2005-01-01junk",
        ] {
            assert_eq!(w3c_datetime_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn leap_days() {
        assert_eq!(w3c_datetime_ms("2024-02-29"), Some(19_782 * DAY_MS));
        assert_eq!(w3c_datetime_ms("2023-02-29"), None);
        assert!(w3c_datetime_ms("2000-02-29").is_some());
        assert_eq!(w3c_datetime_ms("2100-02-29"), None);
        assert_eq!(rfc822_ms("Thu, 29 Feb 2024 00:00:00 GMT"), Some(19_782 * DAY_MS));
        assert_eq!(rfc822_ms("29 Feb 2023 00:00:00 GMT"), None);
    }

    #[test]
    fn rfc822_forms() {
        let expected = w3c_datetime_ms("2002-09-07T09:42:31Z");
        assert!(expected.is_some());
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 09:42:31 GMT"), expected);
        assert_eq!(rfc822_ms("07 Sep 2002 09:42:31 GMT"), expected);
        assert_eq!(rfc822_ms("Saturday, 7 September 2002 09:42:31 UT"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 02 09:42:31 Z"), expected);
        assert_eq!(rfc822_ms("sat,07 sep 2002 09:42:31 +0000 (UTC)"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 09:42:31"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 09:42:31 A"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 09:42 GMT"), w3c_datetime_ms("2002-09-07T09:42Z"));
        assert_eq!(rfc822_ms("Sat, 07 Sep 1999 09:42:31 GMT"), rfc822_ms("Sat, 07 Sep 99 09:42:31 GMT"));
    }

    #[test]
    fn rfc822_zones() {
        let expected = w3c_datetime_ms("2002-09-07T09:42:31Z");
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 11:42:31 +0200"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 04:42:31 EST"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 05:42:31 EDT"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 03:42:31 CST"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 02:42:31 MST"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 01:42:31 PST"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 02:42:31 PDT"), expected);
        assert_eq!(rfc822_ms("Sat, 07 Sep 2002 01:12:31 -0830"), expected);
    }

    #[test]
    fn rfc822_rejects() {
        for bad in [
            "",
            "Sat, 07 Sep 2002",
            "Sat, 32 Sep 2002 09:42:31 GMT",
            "Sat, 07 Foo 2002 09:42:31 GMT",
            "Sat, 07 Sep 2002 24:00:00 GMT",
            "Sat, 07 Sep 2002 09:42:31 XYZ",
            "Sat, 07 Sep 2002 09:42:31 +2400",
            "Sat, 07 Sep 1969 09:42:31 GMT",
            "Sat, 07 Sep 202 09:42:31 GMT",
            "Sat, 07 Sep 2002 09:42:31:00 GMT",
            "Sat, 07 Sep 2002 09:42:31 GMT extra",
            "Caturday, 07 Sep 2002 09:42:31 GMT",
            "2002-09-07T09:42:31Z",
        ] {
            assert_eq!(rfc822_ms(bad), None, "{bad:?}");
        }
    }
}
