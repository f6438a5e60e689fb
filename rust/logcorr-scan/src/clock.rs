//! Time: each line's full date-time from what its stamp has (a year, a date, a time of day, or
//! only a collector's zoned time), and its place in the timeline (the sort key).
//!
//! * Stamps without a year (glog, torch c10 `E1016 03:31:38`) take the year of the nearest
//!   fully dated line above them in their file (else the file's first, else the line's own
//!   zoned collector time, else the set's median), moved by a year when that puts them more
//!   than half a year away (Dec -> Jan); time-only stamps take the date the same way (within
//!   half a day).
//! * A line without a time of its own but a collector's zoned time takes that time in its
//!   file's local clock (the offset its first line with both shows, rounded to a quarter hour;
//!   else the set's one offset).
//! * A stamp that names no instant of years 1-9999 leaves the line without a time, with a note.
//! * The sort key is the running maximum of the (host-shifted) time within the file: a file's
//!   own order is never changed; its lines before its first time take that first time.

use rustc_hash::FxHashMap as HashMap;

pub const MICROS: i64 = 1_000_000;
pub const DAY: i64 = 86_400 * MICROS;
const HALF_YEAR: i64 = 183 * DAY;
const HALF_DAY: i64 = 12 * 3600 * MICROS;
const PLACEHOLDER_YEAR: i64 = 2000;
pub const OUT_OF_CALENDAR: &str = "stamp outside years 1-9999";
pub const NO_SUCH_DAY: &str = "no such day in the completed year";
/// The first instant of year 1 and of year 10000.
const YEAR_1: i64 = -62_135_596_800 * MICROS;
const YEAR_10000: i64 = 253_402_300_800 * MICROS;

/// What completing a stamp needs from the whole set.
#[derive(Debug, Default, Clone)]
pub struct Clock {
    /// file -> (its first fully dated time, its wrapper offset in seconds)
    pub files: HashMap<u32, (Option<i64>, Option<i64>)>,
    /// The set's median fully dated time.
    pub overall: Option<i64>,
    /// The wrapper offset (seconds) of files without their own.
    pub wrap_default: Option<i64>,
}

/// A line's stamp as the parse read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stamp {
    pub ts: Option<i64>,
    pub has_date: Option<bool>,
    pub has_year: Option<bool>,
    pub wrap_ts: Option<i64>,
}

pub fn in_calendar(t: i64) -> bool {
    (YEAR_1..YEAR_10000).contains(&t)
}

impl Stamp {
    /// The line's own stamp has a date and a year in the calendar.
    pub fn fully_dated(&self) -> bool {
        self.has_date == Some(true)
            && self.has_year == Some(true)
            && self.ts.is_some_and(in_calendar)
    }
}

/// (year, month, day) of days since 1970-01-01 (H. Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn valid_day(year: i64, month: i64, day: i64) -> bool {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let last = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    (1..=12).contains(&month) && day >= 1 && day <= last
}

fn split(t: i64) -> (i64, i64, i64, i64) {
    let days = t.div_euclid(DAY);
    let (y, m, d) = civil_from_days(days);
    (y, m, d, t.rem_euclid(DAY))
}

fn join(year: i64, month: i64, day: i64, time: i64) -> i64 {
    crate::stamp::days_from_civil(year, month, day) * DAY + time
}

/// A month-day stamp (placeholder year 2000) in the year that puts it nearest `reference`;
/// None when that year lacks the day (Feb 29), with the year tried.
fn year_fixed(ts: i64, reference: i64) -> (Option<i64>, i64) {
    let (ry, rm, rd, rtime) = split(reference);
    let reference_md = join(PLACEHOLDER_YEAR, rm, rd, rtime);
    let shift = if ts - reference_md > HALF_YEAR {
        -1
    } else if reference_md - ts > HALF_YEAR {
        1
    } else {
        0
    };
    let year = ry + shift;
    let (_, m, d, time) = split(ts);
    (valid_day(year, m, d).then(|| join(year, m, d, time)), year)
}

/// A time-of-day stamp on the day that puts it nearest `reference` (within half a day).
fn day_fixed(ts: i64, reference: i64) -> i64 {
    let guess = reference.div_euclid(DAY) * DAY + ts.rem_euclid(DAY);
    if reference - guess > HALF_DAY {
        guess + DAY
    } else {
        guess
    }
}

/// Where a file stands: its latest fully dated time and the running maximum of its sort key.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileTime {
    pub last_dated: Option<i64>,
    pub running: Option<i64>,
}

/// A line's full date-time and, when its stamp gave none, why.
pub fn complete(
    stamp: &Stamp,
    file_id: u32,
    state: &mut FileTime,
    clock: &Clock,
) -> (Option<i64>, Option<&'static str>) {
    if stamp.fully_dated() {
        // (its own time: no reference, and a wrapper's time is not needed)
        state.last_dated = stamp.ts;
        return (stamp.ts, None);
    }
    let of_file = clock.files.get(&file_id).copied().unwrap_or((None, None));
    let reference = state
        .last_dated
        .or(of_file.0)
        .or(stamp.wrap_ts)
        .or(clock.overall);
    let no_year = stamp.has_date == Some(true) && stamp.has_year != Some(true);
    let no_date = stamp.ts.is_some() && stamp.has_date != Some(true);
    let (mut ts_full, mut note) = (None, None);
    if stamp.has_date == Some(true) && stamp.has_year == Some(true) && stamp.ts.is_some() {
        note = Some(OUT_OF_CALENDAR);
    } else if let (Some(ts), Some(reference)) = (stamp.ts, reference) {
        if no_year {
            let (fixed, year) = year_fixed(ts, reference);
            match fixed {
                Some(t) if in_calendar(t) => ts_full = Some(t),
                Some(_) => note = Some(OUT_OF_CALENDAR),
                None if (1..=9999).contains(&year) => note = Some(NO_SUCH_DAY),
                None => note = Some(OUT_OF_CALENDAR),
            }
        } else if no_date {
            let t = day_fixed(ts, reference);
            if in_calendar(t) {
                ts_full = Some(t);
            } else {
                note = Some(OUT_OF_CALENDAR);
            }
        }
    }
    if let Some(wrap) = stamp.wrap_ts {
        if ts_full.is_none() {
            let offset = of_file.1.or(clock.wrap_default);
            if let Some(offset) = offset {
                let local = wrap.saturating_add(offset.saturating_mul(MICROS));
                if in_calendar(local) {
                    ts_full = Some(local);
                    note = None;
                } else {
                    note = Some(OUT_OF_CALENDAR);
                }
            }
        }
    }
    (ts_full, note)
}

/// The line's sort time before the running maximum: its full time, else a month-day stamp
/// left without a year (its order by month and day), shifted by its host's clock offset.
pub fn sort_time(stamp: &Stamp, ts_full: Option<i64>, shift: Option<i64>) -> Option<i64> {
    let key = ts_full.or_else(|| {
        (stamp.has_date == Some(true) && stamp.has_year != Some(true))
            .then_some(stamp.ts)
            .flatten()
    })?;
    match shift {
        None => Some(key),
        Some(shift) => Some(key.saturating_add(shift)).filter(|&k| in_calendar(k)),
    }
}

/// ISO 8601 text with the fraction the value has: none, milliseconds or microseconds.
pub fn iso(t: i64) -> String {
    let mut out = Vec::with_capacity(26);
    iso_into(t, &mut out);
    String::from_utf8(out).expect("ASCII digits")
}

/// `iso` written at the end of `out` (digits by hand: a column of times is written at once).
pub fn iso_into(t: i64, out: &mut Vec<u8>) {
    let (y, m, d, time) = split(t);
    let seconds = time / MICROS;
    let micros = time % MICROS;
    if !(0..=9999).contains(&y) {
        out.extend_from_slice(format!("{y:04}").as_bytes());
    } else {
        digits(out, y as u32, 4);
    }
    let fields = [
        (b'-', m as u32),
        (b'-', d as u32),
        (b'T', (seconds / 3600) as u32),
        (b':', (seconds / 60 % 60) as u32),
        (b':', (seconds % 60) as u32),
    ];
    for (sep, value) in fields {
        out.push(sep);
        digits(out, value, 2);
    }
    fraction_into(micros, out);
}

/// The fraction of a second `iso` writes after the seconds: `.mmm` for whole milliseconds,
/// `.uuuuuu` else, nothing for none (`micros` in 0..1,000,000).
pub fn fraction_into(micros: i64, out: &mut Vec<u8>) {
    if micros != 0 {
        out.push(b'.');
        if micros % 1000 == 0 {
            digits(out, (micros / 1000) as u32, 3);
        } else {
            digits(out, micros as u32, 6);
        }
    }
}

/// `value` in `width` decimal digits (zero-padded; `value` < 10^width).
fn digits(out: &mut Vec<u8>, value: u32, width: u32) {
    let mut place = 10u32.pow(width - 1);
    while place > 0 {
        out.push(b'0' + (value / place % 10) as u8);
        place /= 10;
    }
}

/// The seconds from a wrapper's zoned time to the line's own stamp, rounded to a quarter hour
/// (half to even).
pub fn wrapper_offset(ts: i64, wrap_ts: i64) -> i64 {
    let seconds = (ts - wrap_ts) / MICROS; // (toward zero)
    let quarters = seconds as f64 / 900.0;
    (quarters.round_ties_even() * 900.0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::days_from_civil;

    fn at(y: i64, m: i64, d: i64, h: i64) -> i64 {
        days_from_civil(y, m, d) * DAY + h * 3600 * MICROS
    }

    #[test]
    fn civil_round_trip() {
        for days in [-719_468, -1, 0, 1, 10_957, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn a_december_stamp_in_january_is_last_year() {
        let stamp = Stamp {
            ts: Some(at(2000, 12, 31, 23)),
            has_date: Some(true),
            has_year: Some(false),
            wrap_ts: None,
        };
        let mut state = FileTime {
            last_dated: Some(at(2026, 1, 1, 1)),
            running: None,
        };
        let (full, note) = complete(&stamp, 0, &mut state, &Clock::default());
        assert_eq!((full, note), (Some(at(2025, 12, 31, 23)), None));
    }

    #[test]
    fn feb_29_in_a_common_year_is_no_day() {
        let stamp = Stamp {
            ts: Some(at(2000, 2, 29, 0)),
            has_date: Some(true),
            has_year: Some(false),
            wrap_ts: None,
        };
        let mut state = FileTime {
            last_dated: Some(at(2026, 3, 1, 0)),
            running: None,
        };
        assert_eq!(
            complete(&stamp, 0, &mut state, &Clock::default()),
            (None, Some(NO_SUCH_DAY))
        );
    }

    #[test]
    fn iso_text_keeps_the_fraction_it_has() {
        assert_eq!(iso(at(2026, 11, 29, 10)), "2026-11-29T10:00:00");
        assert_eq!(
            iso(at(2026, 11, 29, 10) + 123_000),
            "2026-11-29T10:00:00.123"
        );
        assert_eq!(
            iso(at(2026, 11, 29, 10) + 123_456),
            "2026-11-29T10:00:00.123456"
        );
    }

    #[test]
    fn offsets_round_half_to_even() {
        assert_eq!(wrapper_offset(450 * MICROS, 0), 0);
        assert_eq!(wrapper_offset(1350 * MICROS, 0), 1800);
        assert_eq!(wrapper_offset(8 * 3600 * MICROS + 5 * MICROS, 0), 28_800);
    }
}
