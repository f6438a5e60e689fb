//! What the scanner's property tests (`tests/any_bytes.rs`) and its fuzz target (`rust/fuzz`)
//! check of a set of files: no panic, every physical line once, and the same answers (parts,
//! pass 1's survey, pass 2's attribution, event rows and counts) in one chunk, in chunks of
//! any size, and on two threads.

#![allow(dead_code)] // (each user takes what it needs)

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use logcorr_scan::attribute::{Attributed, Whole};
use logcorr_scan::clock::Clock;
use logcorr_scan::gather::{Gather, Selection};
use logcorr_scan::kept::Kept;
use logcorr_scan::keys::Keys;
use logcorr_scan::model::Columns;
use logcorr_scan::pipeline::{runs, AttributeRun, Plan, SurveyRun};
use logcorr_scan::scan::{FileSpec, Scanner};

/// One part as (file, line, part, every field).
pub type Part = (u32, u32, u16, String);

static CASE: AtomicUsize = AtomicUsize::new(0);

/// A folder of files, removed when dropped.
pub struct Set {
    folder: PathBuf,
    pub files: Vec<FileSpec>,
}

impl Set {
    /// A folder of its own beside the files (not made yet).
    pub fn beside(&self, name: &str) -> PathBuf {
        self.folder.join(name)
    }

    pub fn write(contents: &[Vec<u8>]) -> Set {
        let folder = std::env::temp_dir().join(format!(
            "logcorr-any-bytes-{}-{}",
            std::process::id(),
            CASE.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&folder).expect("folder");
        let files = contents
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let path = folder.join(format!("f{i}.log"));
                std::fs::write(&path, bytes).expect("write");
                FileSpec {
                    file_id: i as u32,
                    path,
                    display: format!("f{i}.log"),
                }
            })
            .collect();
        Set { folder, files }
    }
}

impl Drop for Set {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// Each part as (file, line, part, all its fields), and the warnings.
pub fn parts(files: &[FileSpec], plan: Plan) -> (Vec<Part>, Vec<String>) {
    let mut scanner = Scanner::new(files.to_vec(), plan.chunk_bytes, plan.max_rows);
    let mut rows = Vec::new();
    while let Some(parsed) = scanner.next_chunk() {
        let c = &parsed.columns;
        for row in 0..c.len() {
            rows.push((
                c.file_id[row],
                c.line[row],
                c.part[row],
                format!("{:?}", c.fields(row)),
            ));
        }
    }
    (rows, scanner.reader.warnings)
}

/// What pass 1 found, written out (hash sets sorted), its keys and its chunks' spans.
pub struct Surveyed {
    pub shown: Vec<String>,
    keys: Keys,
    clock: Clock,
    spans: Vec<(u32, u32)>,
    kept: Arc<Kept>,
}

pub fn survey(files: &[FileSpec], plan: Plan) -> Result<Surveyed, String> {
    survey_keeping(files, plan, None)
}

/// `survey`, with the parse past `plan.keep_parsed` bytes kept in files in `folder`.
pub fn survey_keeping(
    files: &[FileSpec],
    plan: Plan,
    folder: Option<PathBuf>,
) -> Result<Surveyed, String> {
    let mut pass = SurveyRun::start_keeping(files.to_vec(), plan, folder);
    while pass.step()?.is_some() {}
    let s = &pass.survey;
    let keys: Vec<String> = (0..s.keys.len())
        .map(|k| {
            format!(
                "{:?} {} {}",
                s.keys.rows.fields(k),
                s.keys.counts[k],
                s.keys.first_line[k]
            )
        })
        .collect();
    let mut headers: Vec<_> = s.headers.iter().collect();
    headers.sort_unstable();
    let mut spans: Vec<_> = s.rank_spans.iter().collect();
    spans.sort_unstable();
    let mut warnings = pass.warnings.lock().expect("warnings").clone();
    warnings.sort_unstable();
    let shown = vec![
        format!("lines {}", pass.lines),
        format!("keys {keys:#?}"),
        format!("server_args {:?}", s.server_args),
        format!("headers {headers:?}"),
        format!("first_dated {:?}", s.first_dated),
        format!("dated {:?}", s.dated),
        format!("rank_spans {spans:?}"),
        format!("median {:?} wrap {:?}", s.median(), s.wrap_default()),
        format!("warnings {warnings:?}"),
    ];
    let clock = Clock {
        files: s
            .first_dated
            .iter()
            .map(|&(f, first, offset)| (f, (first, offset)))
            .collect(),
        overall: s.median(),
        wrap_default: s.wrap_default(),
    };
    let spans = std::mem::take(&mut pass.spans);
    let keys = std::mem::take(&mut pass.survey.keys);
    Ok(Surveyed {
        shown,
        keys,
        clock,
        spans,
        kept: pass.kept.clone(),
    })
}

/// Pass 2 with what pass 1 found: each row's attribution written out, its events, the counts.
pub fn attribute(
    files: &[FileSpec],
    plan: Plan,
    surveyed: Surveyed,
) -> Result<Vec<String>, String> {
    attribute_counted(files, plan, surveyed).map(|(rows, _)| rows)
}

/// `attribute`, with how many chunks pass 1 kept for pass 2 and how many pass 2 took.
pub fn attribute_counted(
    files: &[FileSpec],
    plan: Plan,
    surveyed: Surveyed,
) -> Result<(Vec<String>, (usize, usize)), String> {
    // (even files: several processes write them; odd ones: one process each)
    let whole = Whole {
        shared: files
            .iter()
            .map(|f| f.file_id)
            .filter(|f| f % 2 == 0)
            .collect(),
        file_procs: files
            .iter()
            .map(|f| f.file_id)
            .filter(|f| f % 2 == 1)
            .map(|f| (f, f / 2))
            .collect(),
        processes: (0..files.len() as i32)
            .map(|p| std::array::from_fn(|i| Some(p + i as i32)))
            .collect(),
        file_names: files
            .iter()
            .map(|f| (f.file_id, f.display.clone()))
            .collect(),
        clock: surveyed.clock,
        ..Whole::default()
    };
    let stems: Vec<String> = [
        "Traceback (most recent call last)",
        "hit an exception",
        "Watchdog caught collective operation timeout",
        "Pyspy dump for PID",
        "NCCL WARN",
        "Init COMPLETE",
        "Fatal Python error",
        "terminate called",
    ]
    .map(String::from)
    .to_vec();
    let progress = ["] Decode batch", "] Prefill batch"]
        .map(String::from)
        .to_vec();
    let selection = Selection::new(
        &stems,
        r"(?:^|[\s)\]])child process \d+ died",
        r"(?:^|\]:)\s*\[F\d{3,4} \d\d:\d\d:\d\d",
        &progress,
        60,
    )
    .expect("selection");
    let whole = Arc::new(whole);
    let names = whole.clone();
    let convert = Arc::new(
        move |c: &mut Columns, a: &Attributed, _: &mut rustc_hash::FxHashMap<u32, usize>| {
            let whole = &names;
            (0..c.len())
                .map(|r| {
                    let coordinates = a.coordinates(c, whole, r).to_vec();
                    let shown = format!(
                        "{:?} {:?} {:?} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                        whole.file_names.get(&c.file_id[r]),
                        a.role[r],
                        a.host(whole, r),
                        a.evidence[r],
                        a.record[r],
                        a.proc[r],
                        a.why[r],
                        a.ts_full[r],
                        a.ts_note[r],
                        a.stream(c, whole, r),
                        a.next.get(r),
                        coordinates,
                    );
                    (c.file_id[r], c.line[r], c.part[r], a.sk[r], shown)
                })
                .collect::<Vec<_>>()
        },
    );
    let kept = surveyed.kept.clone();
    let (_, kept_chunks) = kept.held();
    let mut pass = AttributeRun::start(
        files.to_vec(),
        runs(&surveyed.spans),
        plan,
        (whole, Arc::new(surveyed.keys)),
        Gather::new(selection),
        convert,
        surveyed.kept,
    );
    let mut rows = Vec::new();
    let mut events = Vec::new();
    let mut settled = rustc_hash::FxHashMap::default();
    while let Some(done) = pass.step()? {
        rows.extend(done.output);
        events.extend(done.events);
        settled.extend(done.settled);
    }
    // (the rows of a file that waited for its first time take the key it was settled with,
    // as the caller stores them; the events too)
    let key =
        |file_id: u32, sk: Option<i64>| sk.or_else(|| settled.get(&file_id).copied().flatten());
    let mut rows: Vec<String> = rows
        .into_iter()
        .map(|(file_id, line, part, sk, shown)| {
            format!(
                "{file_id:>6} {line:>6} {part:>3} | {:?} {shown}",
                key(file_id, sk)
            )
        })
        .collect();
    rows.sort_unstable();
    let mut events: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
    events.sort_unstable();
    // (pass 2 looked up every chunk pass 1 kept; one it read otherwise was parsed again)
    let (left, _) = kept.held();
    if left != 0 || kept.taken() > kept_chunks {
        return Err(format!(
            "pass 2 left {left} bytes of the {kept_chunks} chunks pass 1 kept, took {}",
            kept.taken()
        ));
    }
    let tally = pass.tally();
    let mut why: Vec<_> = tally.why.iter().collect();
    why.sort_unstable();
    let mut notes: Vec<_> = tally.notes.iter().collect();
    notes.sort_unstable();
    let mut people: Vec<_> = tally.people.iter().map(|p| format!("{p:?}")).collect();
    people.sort_unstable();
    let mut last: Vec<_> = tally.last.iter().map(|p| format!("{p:?}")).collect();
    last.sort_unstable();
    let mut file_procs: Vec<_> = tally.file_procs.iter().collect();
    file_procs.sort_unstable();
    rows.push(format!("events {events:#?}"));
    rows.push(format!(
        "lines {} capped {} procs {:?} why {why:?} notes {notes:?}",
        tally.lines, tally.capped, tally.procs
    ));
    rows.push(format!(
        "people {people:?} last {last:?} file_procs {file_procs:?}"
    ));
    Ok((rows, (kept_chunks, kept.taken())))
}

/// The lines of a file as read: LF ends a line, one CR before it goes, the last line keeps a
/// lone CR; bytes that are not UTF-8 become U+FFFD (each gzip member decoded).
pub fn expected_lines(data: &[u8]) -> Vec<String> {
    if data.is_empty() {
        return Vec::new();
    }
    let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.ends_with(b"\n") {
        pieces.pop();
    }
    let last = pieces.len().saturating_sub(1);
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let piece = if i < last || data.ends_with(b"\n") {
                piece.strip_suffix(b"\r").unwrap_or(piece)
            } else {
                piece
            };
            String::from_utf8_lossy(piece).into_owned()
        })
        .collect()
}

/// The texts of each physical line's parts, joined.
fn lines_of(columns: &[Columns]) -> Vec<(u32, u32, String)> {
    let mut out: Vec<(u32, u32, String)> = Vec::new();
    for c in columns {
        for row in 0..c.len() {
            let (file_id, line) = (c.file_id[row], c.line[row]);
            match out.last_mut() {
                Some(last) if last.0 == file_id && last.1 == line && c.part[row] > 0 => {
                    last.2.push_str(c.text.get(row));
                }
                _ => out.push((file_id, line, c.text.get(row).to_string())),
            }
        }
    }
    out
}

pub fn texts(files: &[FileSpec], plan: Plan) -> Vec<(u32, u32, String)> {
    let mut scanner = Scanner::new(files.to_vec(), plan.chunk_bytes, plan.max_rows);
    let mut columns = Vec::new();
    while let Some(parsed) = scanner.next_chunk() {
        columns.push(parsed.columns);
    }
    lines_of(&columns)
}

/// The first place two answers differ (`what`: which answer), if they do.
pub fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    whole: &[T],
) -> Result<(), String> {
    match (0..got.len().max(whole.len())).find(|&i| got.get(i) != whole.get(i)) {
        Some(i) => Err(format!(
            "{what} differ at {i}:\n  got:   {:?}\n  whole: {:?}",
            got.get(i),
            whole.get(i)
        )),
        None => Ok(()),
    }
}

pub const WHOLE: Plan = Plan {
    chunk_bytes: 1 << 20,
    max_rows: 1 << 20,
    threads: 1,
    keep_parsed: 0,
};

/// Every physical line of the files comes out once, its parts' texts making it up (plain
/// files, and gzip files that decode whole).
pub fn every_line_once(contents: &[Vec<u8>], files: &[FileSpec], plan: Plan) -> Result<(), String> {
    let read = texts(files, plan);
    for (file_id, bytes) in contents.iter().enumerate() {
        let plain = !bytes.starts_with(&[0x1f, 0x8b]);
        let Some(decoded) = (if plain {
            Some(bytes.clone())
        } else {
            decode(bytes)
        }) else {
            continue;
        };
        let got: Vec<String> = read
            .iter()
            .filter(|(f, _, _)| *f == file_id as u32)
            .map(|(_, _, text)| text.clone())
            .collect();
        same(
            &format!("lines of file {file_id}"),
            &got,
            &expected_lines(&decoded),
        )?;
    }
    Ok(())
}

/// An NCCL header (`host:pid:tid [dev] NCCL `).
static NCCL_HEADER: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"[\w.\-]+:\d+:\d+ \[\d+\] NCCL ").expect("pattern"));

/// Whether an NCCL header stands past the line's start (glued into it, or behind a wrapper).
pub fn glued_nccl(text: &str) -> bool {
    NCCL_HEADER.find_iter(text).any(|m| m.start() > 0)
}

/// Whether every host the parse reads is the line's own. The parse reads the host of an NCCL
/// header glued into a line (or behind a wrapper) with the hosts of the NCCL lines it is parsed
/// with, and mends a host token another host ends (`…timinggpu-node-0`) by how often each
/// stands in its chunk: a statistic of the chunk, which may differ when the chunks differ.
pub fn hosts_alone(lines: &[(u32, u32, String)], parts: &[&[Part]]) -> bool {
    if lines.iter().any(|(_, _, text)| glued_nccl(text)) {
        return false;
    }
    let mut hosts: Vec<&str> = Vec::new();
    for rows in parts {
        hosts.extend(rows.iter().filter_map(|(_, _, _, fields)| host_of(fields)));
    }
    hosts.sort_unstable();
    hosts.dedup();
    !hosts
        .iter()
        .any(|a| hosts.iter().any(|b| a != b && a.ends_with(b)))
}

/// The host a part's fields name (as `Fields`' Debug writes it).
fn host_of(fields: &str) -> Option<&str> {
    let start = fields.find(", host: Some(\"")? + ", host: Some(\"".len();
    let end = fields[start..].find("\")")?;
    Some(&fields[start..start + end])
}

/// Read a set: no panic, every line once; and, when `same_answers`, the same answers in one
/// chunk, in chunks of `chunk_bytes` and `max_rows` lines, and on two threads.
pub fn check(
    contents: &[Vec<u8>],
    chunk_bytes: usize,
    max_rows: usize,
    same_answers: bool,
) -> Result<(), String> {
    let set = Set::write(contents);
    let files = &set.files;
    // (pass 1's parse kept for pass 2 in the cut and two-thread plans, not in the whole one)
    let cut = Plan {
        chunk_bytes,
        max_rows,
        threads: 1,
        keep_parsed: usize::MAX / 2,
    };
    let two = Plan { threads: 2, ..cut };
    every_line_once(contents, files, WHOLE)?;
    every_line_once(contents, files, cut)?;
    if !same_answers {
        for plan in [WHOLE, two] {
            let surveyed = survey(files, plan)?;
            attribute(files, plan, surveyed)?;
        }
        return Ok(());
    }
    let (whole, warnings) = parts(files, WHOLE);
    let (chunked, chunked_warnings) = parts(files, cut);
    same("parts", &chunked, &whole)?;
    same("warnings", &chunked_warnings, &warnings)?;
    let surveys = [
        survey(files, WHOLE)?,
        survey(files, cut)?,
        survey(files, two)?,
    ];
    same("surveys (chunks)", &surveys[1].shown, &surveys[0].shown)?;
    same(
        "surveys (two threads)",
        &surveys[2].shown,
        &surveys[0].shown,
    )?;
    let [a, b, c] = surveys;
    let attributed = [
        attribute(files, WHOLE, a)?,
        attribute(files, cut, b)?,
        attribute(files, two, c)?,
    ];
    let parsed_again = Plan {
        keep_parsed: 0,
        ..cut
    };
    let again = attribute(files, parsed_again, survey(files, parsed_again)?)?;
    same("attribution (parsed again)", &again, &attributed[1])?;
    same("attribution (chunks)", &attributed[1], &attributed[0])?;
    same("attribution (two threads)", &attributed[2], &attributed[0])
}

/// A gzip file's bytes decoded, when it decodes whole (its members one after the other).
pub fn decode(packed: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(packed)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}
