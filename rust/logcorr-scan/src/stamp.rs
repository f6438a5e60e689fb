//! Timestamps: the formats log lines carry, read into microseconds since the epoch (naive local
//! time, or UTC for zoned stamps). A stamp in the usual fixed layout is read by hand; any other
//! text goes to chrono with the same format, so that odd stamps (a one-digit month, a leap
//! second, a fraction of another length) are read exactly as the format string says.

use chrono::{DateTime, NaiveDateTime};

/// The formats a stamp is read with (chrono syntax).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `%Y-%m-%d %H:%M:%S`
    Seconds,
    /// `%Y-%m-%d %H:%M:%S%.3f`
    Millis,
    /// `%Y-%m-%d %H:%M:%S%.f`
    AnyFraction,
    /// `%Y-%m-%d %H:%M:%S%.6f`
    Micros,
    /// `%Y-%m-%dT%H:%M:%S%.f%:z` (the instant, in UTC)
    IsoOffset,
    /// `%Y-%m-%dT%H:%M:%S%.fZ` (UTC)
    IsoZ,
}

impl Format {
    fn text(self) -> &'static str {
        match self {
            Format::Seconds => "%Y-%m-%d %H:%M:%S",
            Format::Millis => "%Y-%m-%d %H:%M:%S%.3f",
            Format::AnyFraction => "%Y-%m-%d %H:%M:%S%.f",
            Format::Micros => "%Y-%m-%d %H:%M:%S%.6f",
            Format::IsoOffset => "%Y-%m-%dT%H:%M:%S%.f%:z",
            Format::IsoZ => "%Y-%m-%dT%H:%M:%S%.fZ",
        }
    }
}

/// Microseconds since 1970-01-01 of `text` read with `format`; None when it does not parse.
pub fn parse(text: &str, format: Format) -> Option<i64> {
    if let Some(micros) = by_hand(text.as_bytes(), format) {
        return Some(micros);
    }
    if format == Format::IsoOffset {
        let zoned = DateTime::parse_from_str(text, format.text()).ok()?;
        return Some(zoned.naive_utc().and_utc().timestamp_micros());
    }
    let naive = NaiveDateTime::parse_from_str(text, format.text()).ok()?;
    Some(naive.and_utc().timestamp_micros())
}

/// The fixed layout `YYYY-MM-DD?HH:MM:SS` then what the format allows after it, ASCII digits,
/// valid fields; None sends the text to chrono (which decides).
fn by_hand(b: &[u8], format: Format) -> Option<i64> {
    if b.len() < 19 {
        return None;
    }
    let sep = if matches!(format, Format::IsoOffset | Format::IsoZ) {
        b'T'
    } else {
        b' '
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != sep || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let rest = &b[19..];
    let micros = match format {
        Format::Seconds if rest.is_empty() => 0,
        Format::Millis if rest.is_empty() => 0,
        Format::Millis if rest.len() == 4 && rest[0] == b'.' => digits(&rest[1..])? * 1000,
        Format::AnyFraction if rest.is_empty() => 0,
        Format::AnyFraction => fraction(rest)?,
        Format::Micros if rest.len() == 7 && rest[0] == b'.' => digits(&rest[1..])?,
        Format::IsoZ if rest == b"Z" => 0,
        Format::IsoZ if rest.last() == Some(&b'Z') => fraction(&rest[..rest.len() - 1])?,
        Format::IsoOffset => {
            // (`±HH:MM` after the fraction: the instant is the local time less the offset)
            let (frac, zone) = rest.split_at_checked(rest.len().checked_sub(6)?)?;
            let sign = match zone[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if zone[3] != b':' {
                return None;
            }
            let (hours, minutes) = (digits(&zone[1..3])?, digits(&zone[4..6])?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let micros = if frac.is_empty() { 0 } else { fraction(frac)? };
            micros - sign * (hours * 3600 + minutes * 60) * 1_000_000
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second) * 1_000_000 + micros)
}

/// `.d…` (1 to 9 digits) as microseconds (truncated).
fn fraction(b: &[u8]) -> Option<i64> {
    if b.len() < 2 || b.len() > 10 || b[0] != b'.' {
        return None;
    }
    let mut value = digits(&b[1..])?;
    for _ in b.len() - 1..9 {
        value *= 10;
    }
    Some(value / 1000)
}

fn digits(b: &[u8]) -> Option<i64> {
    let mut value = 0i64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(c - b'0');
    }
    Some(value)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A month-day stamp without a year (c10 `E1016 03:31:38.928019586`, glog, vLLM-style): in
/// the placeholder year 2000 (a leap year). The month is not zero-padded (`E210` is Feb 10),
/// the last two digits are the day; the fraction keeps microseconds (longer cut, shorter
/// padded).
pub fn month_day(mmdd: &str, hms: &str, fraction: Option<&str>) -> Option<i64> {
    let n = mmdd.chars().count();
    let split = mmdd
        .char_indices()
        .nth(n.saturating_sub(2))
        .map_or(0, |(at, _)| at);
    let (month, day) = mmdd.split_at(split);
    let month = if month.chars().count() < 2 {
        format!("{month:0>2}")
    } else {
        month.to_string()
    };
    let frac: String = fraction.unwrap_or("").chars().take(6).collect();
    let text = format!("2000-{month}-{day} {hms}.{frac:0<6}");
    parse(&text, Format::Micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
        (days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000
    }

    #[test]
    fn fixed_layouts_read_by_hand() {
        assert_eq!(
            parse("2026-11-29 10:00:00", Format::Seconds),
            Some(us(2026, 11, 29, 10, 0, 0))
        );
        assert_eq!(
            parse("2026-11-29 10:00:00.123", Format::Millis),
            Some(us(2026, 11, 29, 10, 0, 0) + 123_000)
        );
        assert_eq!(
            parse("2025-07-25T07:53:08.21748708Z", Format::IsoZ),
            Some(us(2025, 7, 25, 7, 53, 8) + 217_487)
        );
    }

    #[test]
    fn odd_stamps_read_as_the_format_says() {
        // (the values polars' `str.to_datetime` gives for these)
        assert_eq!(parse("2026-02-29 10:00:00", Format::Seconds), None);
        assert_eq!(
            parse("2026-11-29 23:59:60", Format::Seconds),
            Some(us(2026, 11, 30, 0, 0, 0))
        );
        assert_eq!(
            parse("2026-1-01 00:00:00", Format::Seconds),
            Some(us(2026, 1, 1, 0, 0, 0))
        );
        assert_eq!(parse("2026-01-01 00:00:00 ", Format::Seconds), None);
        assert_eq!(
            parse("2026-11-29 10:00:00", Format::Millis),
            Some(us(2026, 11, 29, 10, 0, 0))
        );
        assert_eq!(parse("2026-11-29 10:00:00.12", Format::Millis), None);
        assert_eq!(parse("2000-01-01 10:00:00.12345", Format::Micros), None);
        assert_eq!(
            parse("2025-07-25T07:53:08.21748708+08:00", Format::IsoOffset),
            Some(us(2025, 7, 24, 23, 53, 8) + 217_487)
        );
        assert_eq!(
            parse("0000-01-01 00:00:00", Format::Seconds),
            Some(-62_167_219_200_000_000)
        );
    }

    /// chrono's reading of a zoned stamp (what `parse` did for every one before reading the
    /// common layouts by hand).
    fn chrono_zoned(text: &str) -> Option<i64> {
        let zoned = DateTime::parse_from_str(text, Format::IsoOffset.text()).ok()?;
        Some(zoned.naive_utc().and_utc().timestamp_micros())
    }

    proptest::proptest! {
        #[test]
        fn zoned_stamps_read_by_hand_as_chrono_reads_them(
            year in 1900i64..2200, month in 0i64..14, day in 0i64..33, hour in 0i64..26,
            minute in 0i64..61, second in 0i64..61, digits in 0usize..11,
            fraction in 0u64..10_000_000_000, sign in proptest::sample::select(vec!['+', '-', '*']),
            zone_hours in 0i64..26, zone_minutes in 0i64..61, colon in proptest::bool::weighted(0.9),
        ) {
            let fraction = if digits == 0 {
                String::new()
            } else {
                format!(".{:0>10}", fraction)[..=digits].to_string()
            };
            let local = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}");
            let colon = if colon { ":" } else { "" };
            let zoned = format!("{local}{sign}{zone_hours:02}{colon}{zone_minutes:02}");
            proptest::prop_assert_eq!(parse(&zoned, Format::IsoOffset), chrono_zoned(&zoned), "{}", zoned);
            // (a `Z` stamp read as UTC is the instant `+00:00` names)
            proptest::prop_assert_eq!(
                parse(&format!("{local}Z"), Format::IsoZ),
                chrono_zoned(&format!("{local}+00:00")),
                "{}", local
            );
        }
    }

    #[test]
    fn month_day_stamps_take_the_placeholder_year() {
        assert_eq!(
            month_day("210", "03:31:38", Some("928019586")),
            Some(us(2000, 2, 10, 3, 31, 38) + 928_019)
        );
        assert_eq!(
            month_day("0229", "00:00:00", None),
            Some(us(2000, 2, 29, 0, 0, 0))
        );
        assert_eq!(month_day("1332", "00:00:00", None), None);
    }
}
