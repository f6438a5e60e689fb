//! Pass 1's findings as bytes, for a set read by several machines (`logcorr analyze --engine
//! ray`): each task surveys a group of whole files and sends its `Survey` as a `SurveyPart`;
//! the driver merges the parts in file order (`Survey::merge`, so that key rows are numbered as
//! one reader numbers them) and sends the merged key rows (`keys_to_bytes`) to the tasks of
//! pass 2, which find each line's key number in them.
//!
//! The encoding is postcard (serde); the bytes only travel within one run, between one build of
//! logcorr, so they carry no version. Bytes that do not decode are an error, never a panic.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::{Deserialize, Serialize};

use crate::keys::{KeyId, Keys};
use crate::model::Columns;
use crate::survey::Survey;

/// The key rows: each one's columns, line count and first line, in number order (the index
/// that finds a key's number is made again from the rows).
#[derive(Serialize, Deserialize, Default)]
struct KeyRows {
    rows: Columns,
    counts: Vec<u64>,
    first_line: Vec<u32>,
}

impl KeyRows {
    fn of(keys: &Keys) -> KeyRows {
        KeyRows {
            rows: keys.rows.clone(),
            counts: keys.counts.clone(),
            first_line: keys.first_line.clone(),
        }
    }

    /// The key rows as `Keys` (numbered as they were); None when the rows are not distinct
    /// keys with a count each.
    fn into_keys(self) -> Option<Keys> {
        let n = self.counts.len();
        if self.first_line.len() != n || self.rows.len() != n {
            return None;
        }
        let rows = self.rows;
        // (rows that do not index their columns are damaged bytes: no panic escapes here)
        let keys = catch_unwind(AssertUnwindSafe(|| {
            let mut keys = Keys::default();
            for id in 0..n {
                keys.add(rows.file_id[id], rows.line[id], &rows.fields(id));
            }
            keys
        }))
        .ok()?;
        if keys.len() != n {
            return None;
        }
        let mut keys = keys;
        keys.counts = self.counts;
        keys.first_line = self.first_line;
        Some(keys)
    }
}

/// What pass 1 found in a group of whole files, with its lines and its read warnings.
#[derive(Serialize, Deserialize, Default)]
pub struct SurveyPart {
    keys: KeyRows,
    server_args: Vec<(u32, u32, String)>,
    headers: Vec<(i64, KeyId)>,
    first_dated: Vec<(u32, Option<i64>, Option<i64>)>,
    dated: Vec<(i64, u64)>,
    rank_spans: Vec<(KeyId, i64, i64)>,
    pub lines: u64,
    pub warnings: Vec<String>,
}

impl SurveyPart {
    pub fn of(survey: &Survey, lines: u64, warnings: Vec<String>) -> SurveyPart {
        let mut headers: Vec<(i64, KeyId)> = survey.headers.iter().copied().collect();
        headers.sort_unstable();
        let mut rank_spans: Vec<(KeyId, i64, i64)> = survey
            .rank_spans
            .iter()
            .map(|(&key, &(first, last))| (key, first, last))
            .collect();
        rank_spans.sort_unstable();
        SurveyPart {
            keys: KeyRows::of(&survey.keys),
            server_args: survey.server_args.clone(),
            headers,
            first_dated: survey.first_dated.clone(),
            dated: survey.dated.iter().map(|(&ts, &n)| (ts, n)).collect(),
            rank_spans,
            lines,
            warnings,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_allocvec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<SurveyPart, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("a survey part does not decode: {e}"))
    }

    /// The part as a survey, to be merged into the survey of the files before it.
    pub fn into_survey(self) -> Result<Survey, String> {
        let keys = self
            .keys
            .into_keys()
            .ok_or_else(|| "a survey part's key rows are damaged".to_string())?;
        let n = keys.len() as KeyId;
        if self.headers.iter().any(|h| h.1 >= n) || self.rank_spans.iter().any(|s| s.0 >= n) {
            return Err("a survey part names a key row it does not have".to_string());
        }
        // (merged into an empty survey: the files' first times, and their index, made as a
        // reader makes them)
        let mut survey = Survey::default();
        survey.keys = keys;
        survey.server_args = self.server_args;
        survey.headers = self.headers.into_iter().collect();
        survey.first_dated = self.first_dated;
        survey.dated = self.dated.into_iter().collect::<BTreeMap<_, _>>();
        survey.rank_spans = self
            .rank_spans
            .into_iter()
            .map(|(key, first, last)| (key, (first, last)))
            .collect();
        let mut whole = Survey::default();
        whole.merge(survey);
        Ok(whole)
    }
}

/// The key rows of the whole set, as pass 2's tasks receive them.
pub fn keys_to_bytes(keys: &Keys) -> Vec<u8> {
    postcard::to_allocvec(&KeyRows::of(keys)).unwrap_or_default()
}

pub fn keys_from_bytes(bytes: &[u8]) -> Result<Keys, String> {
    let rows: KeyRows =
        postcard::from_bytes(bytes).map_err(|e| format!("the key rows do not decode: {e}"))?;
    rows.into_keys()
        .ok_or_else(|| "the key rows are damaged".to_string())
}

/// At most `ranges - 1` times that cut the set's fully dated lines into ranges of about equal
/// counts (distinct, increasing): where the timeline is cut into partitions. Each bound is the
/// time of the first line at or after a cut (the lines of one time are never split). A bound
/// only balances the partitions; any bounds give the same rows in the same order.
///
/// With lines dated 1, 1, 2, 3, 3, 3, 4, 5 (8 lines) and 4 ranges, the cuts fall before the
/// 3rd, 5th and 7th line: bounds 2 (the 3rd line's time) and 4 (the 3s span the 4th to the
/// 6th line, so the first time that starts at or after the 5th is 4; the 7th's is 4 too).
pub fn bounds(survey: &Survey, ranges: usize) -> Vec<i64> {
    let total: u64 = survey.dated.values().sum();
    let ranges = ranges.max(1) as u64;
    let mut out: Vec<i64> = Vec::new();
    let mut seen = 0u64;
    let mut next = 1u64;
    for (&ts, &n) in &survey.dated {
        while next < ranges && seen >= next * total / ranges {
            if out.last().is_none_or(|&b| b < ts) {
                out.push(ts);
            }
            next += 1;
        }
        seen += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_into, Line, Scratch};

    fn survey_of(file_id: u32, texts: &[&str]) -> Survey {
        let lines = Line::numbered(file_id, texts);
        let mut survey = Survey::default();
        parse_into(&lines, &[], &mut survey, &mut Scratch::default());
        survey
    }

    const A: [&str; 3] = [
        "[2026-11-29 10:00:00 TP0] server_args=ServerArgs(tp_size=2)",
        "[2026-11-29 10:00:01 TP0] Load weight begin.",
        "[2026-11-29 10:00:02 TP1] Traceback (most recent call last):",
    ];
    const B: [&str; 2] = [
        "[2026-11-29 10:00:03 TP1] Load weight begin.",
        "[rank1]:[E1129 10:00:04.000000000 ProcessGroupNCCL.cpp:1] x",
    ];

    fn tables(s: &Survey) -> String {
        let mut headers: Vec<_> = s.headers.iter().collect();
        headers.sort();
        let mut spans: Vec<_> = s.rank_spans.iter().collect();
        spans.sort();
        format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            s.keys.counts,
            s.keys.first_line,
            s.keys.rows.file_id,
            s.server_args,
            headers,
            s.first_dated,
            s.dated,
            spans
        )
    }

    #[test]
    fn parts_sent_as_bytes_merge_as_the_surveys_do() {
        let mut direct = survey_of(0, &A);
        direct.merge(survey_of(1, &B));
        let mut sent = Survey::default();
        for part in [survey_of(0, &A), survey_of(1, &B)] {
            let bytes = SurveyPart::of(&part, 0, Vec::new()).to_bytes();
            let part = SurveyPart::from_bytes(&bytes).unwrap();
            sent.merge(part.into_survey().unwrap());
        }
        assert_eq!(tables(&sent), tables(&direct));
        assert_eq!(sent.median(), direct.median());
    }

    #[test]
    fn key_rows_sent_as_bytes_find_the_same_numbers() {
        let survey = survey_of(0, &A);
        let keys = keys_from_bytes(&keys_to_bytes(&survey.keys)).unwrap();
        let mut last = crate::keys::Last::default();
        for id in 0..survey.keys.len() {
            let f = survey.keys.rows.fields(id);
            assert_eq!(keys.find(0, &f, &mut last), Some(id as KeyId));
        }
    }

    #[test]
    fn damaged_bytes_are_an_error() {
        let bytes = SurveyPart::of(&survey_of(0, &A), 3, Vec::new()).to_bytes();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(SurveyPart::from_bytes(&bytes[..cut])
                .and_then(SurveyPart::into_survey)
                .is_err());
        }
        assert!(keys_from_bytes(b"\xff\xff\xff").is_err());
    }

    #[test]
    fn bounds_cut_the_dated_lines_into_equal_counts() {
        let mut survey = Survey::default();
        for ts in [1, 1, 2, 3, 3, 3, 4, 5] {
            *survey.dated.entry(ts).or_default() += 1;
        }
        assert_eq!(bounds(&survey, 4), vec![2, 4]);
        assert_eq!(bounds(&survey, 2), vec![4]);
        assert_eq!(bounds(&survey, 1), Vec::<i64>::new());
        assert_eq!(bounds(&Survey::default(), 8), Vec::<i64>::new());
    }
}
