//! Pass 1: what the whole set must know before any line is attributed, gathered chunk by
//! chunk in small tables: the distinct key rows (with their line counts and first line), the
//! server_args lines, the seconds in which exception headers stand (per key row: a traceback
//! per request is not a row each), each file's first fully dated time and wrapper offset, and
//! the fully dated times' counts (for the set's exact median).

use std::collections::{BTreeMap, HashMap, HashSet};

use rustc_hash::FxHashMap;

use crate::clock::{self, Stamp};
use crate::keys::{KeyId, Keys};
use crate::model::Fields;
use crate::parse::Sink;

#[derive(Default)]
pub struct Survey {
    pub keys: Keys,
    /// (file, line, message) of each server_args line.
    pub server_args: Vec<(u32, u32, String)>,
    /// (second, key row) of each exception header with a time.
    pub headers: HashSet<(i64, KeyId)>,
    /// file -> (first fully dated time, first wrapper offset), in the order files were met.
    pub first_dated: Vec<(u32, Option<i64>, Option<i64>)>,
    /// file -> its entry in `first_dated` (looked up for every dated line)
    first_at: FxHashMap<u32, usize>,
    /// fully dated time -> lines (but the run in `dated_run`, until `settle`)
    pub dated: BTreeMap<i64, u64>,
    /// the last fully dated time added and how many lines in a row had it (a file's lines
    /// mostly share their second with the line before: one count, not a search of `dated`,
    /// a line)
    dated_run: Option<(i64, u64)>,
    /// the last file looked up in `first_at`, and its entry there
    last_first: Option<(u32, usize)>,
    /// key row -> (earliest, latest) stamp of its lines that name a torch rank (`[rankN]:`,
    /// a PG's `Rank N`), as torch and glog print them (month and day, no year): whether two
    /// processes that claim one rank did so at the same time.
    pub rank_spans: HashMap<KeyId, (i64, i64)>,
}

impl Sink for Survey {
    fn push(&mut self, file_id: u32, line: u32, f: &Fields<'_>, _at: Option<(u32, u32)>) {
        self.add(file_id, line, f);
    }

    fn finish(&mut self) {
        self.settle();
    }
}

impl Survey {
    /// Survey one part; its key row's number (in this survey).
    pub fn add(&mut self, file_id: u32, line: u32, f: &Fields<'_>) -> KeyId {
        let key = self.keys.add(file_id, line, f);
        if f.server_args == Some(true) {
            let text = f.msg.as_deref().unwrap_or(&f.text);
            self.server_args.push((file_id, line, text.to_string()));
        }
        if f.exc {
            if let Some(ts) = f.ts {
                let second = ts.div_euclid(clock::MICROS) * clock::MICROS;
                self.headers.insert((second, key));
            }
        }
        if let (Some(ts), Some(false)) = (f.ts, f.ts_has_year) {
            if f.torch_rank.is_some() || f.pg_rank.is_some() {
                let span = self.rank_spans.entry(key).or_insert((ts, ts));
                *span = (span.0.min(ts), span.1.max(ts));
            }
        }
        let stamp = Stamp {
            ts: f.ts,
            has_date: f.ts_has_date,
            has_year: f.ts_has_year,
            wrap_ts: f.wrap_ts,
        };
        if stamp.fully_dated() {
            let ts = stamp.ts.expect("dated");
            match &mut self.dated_run {
                Some((run_ts, lines)) if *run_ts == ts => *lines += 1,
                _ => {
                    self.settle();
                    self.dated_run = Some((ts, 1));
                }
            }
            let at = match self.last_first {
                Some((file, at)) if file == file_id => at,
                _ => {
                    let at = *self.first_at.entry(file_id).or_insert_with(|| {
                        self.first_dated.push((file_id, None, None));
                        self.first_dated.len() - 1
                    });
                    self.last_first = Some((file_id, at));
                    at
                }
            };
            let entry = &mut self.first_dated[at];
            if entry.1.is_none() {
                entry.1 = Some(ts);
            }
            if entry.2.is_none() {
                entry.2 = stamp.wrap_ts.map(|wrap| clock::wrapper_offset(ts, wrap));
            }
        }
        key
    }

    /// Count the last run of lines with one fully dated time in `dated` (a survey is read, or
    /// merged, settled).
    pub fn settle(&mut self) {
        if let Some((ts, lines)) = self.dated_run.take() {
            *self.dated.entry(ts).or_default() += lines;
        }
    }

    /// Add what a later part of the set found; the number here of each of its key rows.
    pub fn merge(&mut self, mut other: Survey) -> Vec<KeyId> {
        self.settle();
        other.settle();
        let mapping = self.keys.merge(&other.keys);
        self.server_args.extend(other.server_args);
        self.headers.extend(
            other
                .headers
                .into_iter()
                .map(|(second, key)| (second, mapping[key as usize])),
        );
        for (file_id, first, offset) in other.first_dated {
            let at = *self.first_at.entry(file_id).or_insert_with(|| {
                self.first_dated.push((file_id, None, None));
                self.first_dated.len() - 1
            });
            let entry = &mut self.first_dated[at];
            entry.1 = entry.1.or(first);
            entry.2 = entry.2.or(offset);
        }
        for (ts, n) in other.dated {
            *self.dated.entry(ts).or_default() += n;
        }
        for (key, (first, last)) in other.rank_spans {
            let span = self
                .rank_spans
                .entry(mapping[key as usize])
                .or_insert((first, last));
            *span = (span.0.min(first), span.1.max(last));
        }
        mapping
    }

    /// The wrapper offset (seconds) of files without one of their own: the set's one offset
    /// when the files that have one agree; UTC (0) when no line of the set has a date of its
    /// own; else none (no guess).
    pub fn wrap_default(&self) -> Option<i64> {
        let mut offsets: Vec<i64> = self.first_dated.iter().filter_map(|f| f.2).collect();
        offsets.sort_unstable();
        offsets.dedup();
        match offsets.as_slice() {
            [one] => Some(*one),
            [] if self.dated.is_empty() => Some(0),
            _ => None,
        }
    }

    /// The median fully dated time (the mean of the two middle ones, toward zero).
    pub fn median(&self) -> Option<i64> {
        let total: u64 = self.dated.values().sum();
        if total == 0 {
            return None;
        }
        let nth = |n: u64| -> i64 {
            let mut seen = 0;
            for (&value, &count) in &self.dated {
                seen += count;
                if seen > n {
                    return value;
                }
            }
            unreachable!("n < total")
        };
        if total % 2 == 1 {
            Some(nth(total / 2))
        } else {
            let (a, b) = (i128::from(nth(total / 2 - 1)), i128::from(nth(total / 2)));
            Some(((a + b) / 2) as i64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_into, Line, Scratch};

    #[test]
    fn every_fully_dated_line_is_counted_under_its_time_runs_and_merges_included() {
        let second = |s: i64| {
            crate::stamp::parse("2026-11-29 10:00:00", crate::stamp::Format::Seconds)
                .expect("a time")
                + s * clock::MICROS
        };
        let a = [
            "[2026-11-29 10:00:00 TP0] a",
            "[2026-11-29 10:00:00 TP1] b",
            "[2026-11-29 10:00:01 TP0] c",
            "[2026-11-29 10:00:00 TP0] d",
            "no time",
            "[2026-11-29 10:00:02 TP0] e",
            "[2026-11-29 10:00:02 TP0] f",
        ];
        let b = ["[2026-11-29 10:00:02 TP1] g", "[2026-11-29 10:00:03 TP1] h"];
        let surveyed = |file_id: u32, texts: &[&str]| {
            let mut survey = Survey::default();
            let lines = Line::numbered(file_id, texts);
            parse_into(&lines, &[], &mut survey, &mut Scratch::default());
            survey
        };
        let mut first = surveyed(0, &a);
        let counts = |s: &Survey| s.dated.iter().map(|(&t, &n)| (t, n)).collect::<Vec<_>>();
        // (the last run, two lines at 10:00:02, counted once the chunk is parsed)
        assert_eq!(
            counts(&first),
            [(second(0), 3), (second(1), 1), (second(2), 2)]
        );
        assert_eq!(first.first_dated, [(0, Some(second(0)), None)]);
        first.merge(surveyed(1, &b));
        assert_eq!(
            counts(&first),
            [
                (second(0), 3),
                (second(1), 1),
                (second(2), 3),
                (second(3), 1)
            ]
        );
        assert_eq!(
            first.first_dated,
            [(0, Some(second(0)), None), (1, Some(second(2)), None)]
        );
    }

    #[test]
    fn rank_spans_hold_each_key_rows_first_and_last_torch_stamp() {
        let texts = [
            "[rank3]:[W1129 10:00:01.000000000 ProcessGroupNCCL.cpp:1] a",
            "[rank3]: Traceback (most recent call last):",
            "[rank3]:[E1129 10:00:09.500000000 ProcessGroupNCCL.cpp:1] b",
            "[2026-11-29 10:00:00 TP0] Load weight begin.",
        ];
        let lines = Line::numbered(0, &texts);
        let mut survey = Survey::default();
        parse_into(&lines, &[], &mut survey, &mut Scratch::default());
        let spans: Vec<(i64, i64)> = survey.rank_spans.values().copied().collect();
        assert_eq!(
            spans.len(),
            1,
            "one key row of stamped torch lines: {spans:?}"
        );
        let (first, last) = spans[0];
        assert_eq!(last - first, 8_500_000);
    }
}
