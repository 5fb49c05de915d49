//! The JSON text of Kubernetes' time types, written and read without a calendar library on the
//! hot path.

use std::fmt::Write;

use crate::{Error, wire::Reader};

/// Days from 0000-03-01 to 1970-01-01 in the proleptic Gregorian calendar.
const DAYS_FROM_CIVIL_EPOCH: i64 = 719_468;

/// `seconds` since the Unix epoch as RFC 3339 in UTC: whole seconds for `metav1.Time`
/// (`2026-01-02T03:04:05Z`), microseconds when `nanos` is given, for `metav1.MicroTime`
/// (`2026-01-02T03:04:05.000006Z`), as Go's `time.Format` writes them.
#[cfg(test)]
pub(crate) fn format_rfc3339(seconds: i64, nanos: Option<i32>) -> String {
    let mut buffer = [0u8; 32];
    let len = write_rfc3339(&mut buffer, seconds, nanos);
    String::from_utf8_lossy(&buffer[..len]).into_owned()
}

/// [`format_rfc3339`] into a stack buffer (decoding formats a dozen times per Pod); returns the
/// length written.
pub(crate) fn write_rfc3339(buffer: &mut [u8; 32], seconds: i64, nanos: Option<i32>) -> usize {
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let mut at = 0;
    // Years outside 0..=9999 are not RFC 3339 ([`from_wire`] refuses them); they are clamped
    // rather than overflow the buffer.
    put_digits(buffer, &mut at, year.clamp(0, 9999).unsigned_abs(), 4);
    for (separator, value, width) in [
        (b'-', u64::from(month), 2),
        (b'-', u64::from(day), 2),
        (b'T', (second_of_day / 3600).unsigned_abs(), 2),
        (b':', (second_of_day / 60 % 60).unsigned_abs(), 2),
        (b':', (second_of_day % 60).unsigned_abs(), 2),
    ] {
        buffer[at] = separator;
        at += 1;
        put_digits(buffer, &mut at, value, width);
    }
    if let Some(nanos) = nanos {
        buffer[at] = b'.';
        at += 1;
        put_digits(
            buffer,
            &mut at,
            (nanos.clamp(0, 999_999_999) / 1000).unsigned_abs().into(),
            6,
        );
    }
    buffer[at] = b'Z';
    at + 1
}

fn put_digits(buffer: &mut [u8; 32], at: &mut usize, mut value: u64, width: usize) {
    for slot in buffer[*at..*at + width].iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
    *at += width;
}

/// Howard Hinnant's `civil_from_days`: the Gregorian date `days` after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + DAYS_FROM_CIVIL_EPOCH;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// 0000-01-01T00:00:00Z, the first instant Go's JSON writes a time for.
const FIRST_SECOND: i64 = -62_167_219_200;
/// 9999-12-30T22:00:00Z, the last instant k8s-openapi's times (jiff's `Timestamp::MAX`) hold;
/// Go's JSON writes times up to 9999-12-31T23:59:59Z.
const LAST_SECOND: i64 = 253_402_207_200;
/// What a time out of that range is told as.
pub(crate) const OUT_OF_RANGE: &str = "a time outside 0000-01-01T00:00:00Z to 9999-12-30T22:00:00Z";

/// The instant a `Timestamp` message (`seconds = 1`, `nanos = 2`) holds once Go has decoded it
/// into a `metav1.Time` (`micro` false) or `metav1.MicroTime` (`micro` true), as seconds and
/// nanoseconds since the Unix epoch.
///
/// Each field's last occurrence wins and every occurrence must have an integer's wire type, as
/// in Go's generated decoder. A `Time` keeps whole seconds (Go's `Time.Unmarshal` drops the
/// nanoseconds); a `MicroTime` folds nanoseconds outside `0..1e9` into the seconds, as
/// `time.Unix` does. An instant before the year 0000 is an error (Go decodes it but cannot
/// write it as JSON, and RFC 3339 has no text for it), and so is one after the last that
/// k8s-openapi's time types hold ([`LAST_SECOND`]).
pub(crate) fn from_wire(bytes: &[u8], micro: bool) -> Result<(i64, i32), Error> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        match number {
            1 => seconds = value.integer("seconds")? as i64,
            // An int32 on the wire: a negative one is sign-extended, truncation decodes it.
            2 => nanos = value.integer("nanos")? as i32,
            _ => {}
        }
    }
    let (seconds, nanos) = if micro {
        let carried = seconds.checked_add(i64::from(nanos.div_euclid(1_000_000_000)));
        (carried, nanos.rem_euclid(1_000_000_000))
    } else {
        (Some(seconds), 0)
    };
    match seconds {
        Some(seconds) if (FIRST_SECOND..=LAST_SECOND).contains(&seconds) => Ok((seconds, nanos)),
        _ => Err(Error::Malformed(OUT_OF_RANGE)),
    }
}

/// Seconds and nanoseconds since the Unix epoch of an RFC 3339 timestamp.
pub(crate) fn parse_rfc3339(text: &str) -> Result<(i64, i32), Error> {
    let timestamp: jiff::Timestamp = text
        .parse()
        .map_err(|error| Error::custom(format_args!("invalid time {text:?}: {error}")))?;
    let (seconds, nanos) = (timestamp.as_second(), timestamp.subsec_nanosecond());
    // jiff truncates towards zero; protobuf's Timestamp floors, keeping nanos non-negative.
    Ok(if nanos < 0 {
        (seconds - 1, nanos + 1_000_000_000)
    } else {
        (seconds, nanos)
    })
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub(crate) fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let mut text = String::new();
    if nanos < 0 {
        text.push('-');
    }
    let magnitude = nanos.unsigned_abs();
    if magnitude < 1_000 {
        let _ = write!(text, "{magnitude}ns");
    } else if magnitude < 1_000_000 {
        write_fraction(&mut text, magnitude, 3);
        text.push_str("µs");
    } else if magnitude < 1_000_000_000 {
        write_fraction(&mut text, magnitude, 6);
        text.push_str("ms");
    } else {
        let seconds = magnitude / 1_000_000_000;
        let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
        if hours > 0 {
            let _ = write!(text, "{hours}h");
        }
        if hours > 0 || minutes > 0 {
            let _ = write!(text, "{minutes}m");
        }
        write_fraction(&mut text, magnitude % 60_000_000_000, 9);
        text.push('s');
    }
    text
}

/// `value / 10^digits` with its fraction, trailing zeros dropped.
fn write_fraction(text: &mut String, value: u64, digits: u32) {
    let scale = 10u64.pow(digits);
    let _ = write!(text, "{}", value / scale);
    let fraction = value % scale;
    if fraction != 0 {
        let mut fraction_text = format!("{fraction:0width$}", width = digits as usize);
        while fraction_text.ends_with('0') {
            fraction_text.pop();
        }
        text.push('.');
        text.push_str(&fraction_text);
    }
}

/// Nanoseconds of a Go duration string (`1h2m3.5s`, `300ms`, `-1.5h`).
pub(crate) fn parse_go_duration(text: &str) -> Result<i64, Error> {
    let invalid = || Error::custom(format_args!("invalid duration {text:?}"));
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(invalid()),
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    let nanos = total.round() as i64;
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_go_does() {
        assert_eq!(format_rfc3339(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339(1_767_323_045, Some(6_789_000)),
            "2026-01-02T03:04:05.006789Z"
        );
        assert_eq!(format_rfc3339(951_782_400, None), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(-1, None), "1969-12-31T23:59:59Z");
    }

    fn timestamp(seconds: i64, nanos: i32) -> Vec<u8> {
        let mut message = crate::wire::Writer::default();
        message.varint_field(1, seconds as u64);
        message.varint_field(2, i64::from(nanos) as u64);
        message.buf
    }

    #[test]
    fn times_from_the_wire_are_what_go_holds_and_can_write() {
        // Time drops the nanoseconds; MicroTime folds them into the seconds as time.Unix does.
        assert_eq!(from_wire(&timestamp(10, 7), false), Ok((10, 0)));
        assert_eq!(from_wire(&timestamp(10, 7), true), Ok((10, 7)));
        assert_eq!(from_wire(&timestamp(10, -1), true), Ok((9, 999_999_999)));
        assert_eq!(from_wire(&timestamp(10, 2_000_000_001), true), Ok((12, 1)));
        assert_eq!(from_wire(&[], false), Ok((0, 0)));
        // The first and last second Go's JSON writes, and one beyond each.
        assert_eq!(
            from_wire(&timestamp(FIRST_SECOND, 0), false),
            Ok((FIRST_SECOND, 0))
        );
        assert_eq!(
            from_wire(&timestamp(LAST_SECOND, 0), false),
            Ok((LAST_SECOND, 0))
        );
        assert_eq!(format_rfc3339(LAST_SECOND, None), "9999-12-30T22:00:00Z");
        assert_eq!(LAST_SECOND, jiff::Timestamp::MAX.as_second());
        assert_eq!(format_rfc3339(FIRST_SECOND, None), "0000-01-01T00:00:00Z");
        for seconds in [
            FIRST_SECOND - 1,
            LAST_SECOND + 1,
            1_000_000_000_000,
            i64::MIN,
        ] {
            assert_eq!(
                from_wire(&timestamp(seconds, 0), false),
                Err(Error::Malformed(OUT_OF_RANGE)),
                "{seconds}"
            );
        }
        assert!(from_wire(&timestamp(i64::MAX, 1_999_999_999), true).is_err());
        // A seconds field that is not an integer is refused even when a later one is.
        let mut bad = vec![0x0a, 0x00];
        bad.extend(timestamp(10, 0));
        assert!(from_wire(&bad, false).is_err());
    }

    #[test]
    fn every_day_of_four_centuries_round_trips_through_the_parser() {
        for day in (-200_000i64..200_000).step_by(7) {
            let seconds = day * 86_400 + 3_723;
            let text = format_rfc3339(seconds, Some(123_456_000));
            assert_eq!(
                parse_rfc3339(&text).expect("parses"),
                (seconds, 123_456_000)
            );
        }
    }

    #[test]
    fn durations_format_and_parse_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (1_000_000_000, "1s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-2_000_000_000, "-2s"),
        ] {
            assert_eq!(format_go_duration(nanos), text);
            assert_eq!(parse_go_duration(text).expect("parses"), nanos, "{text}");
        }
        assert!(parse_go_duration("5 parsecs").is_err());
        assert!(parse_go_duration("").is_err());
    }
}
