//! A chunk of physical lines -> record parts with their fields.
//!
//! 1. Fast paths, dispatched on the first bytes: a line starting `[20` with no second header is
//!    cut at fixed offsets (stamp, then the `.mmm TOKENS` tail up to `] `); a line with one
//!    ` NCCL ` and a plain `host:pid:tid [dev]` header has that header read (once per distinct
//!    header). Regexes run only on the few lines a message test concerns.
//! 2. The rest: wrappers peeled (`wrappers`), glued lines split (`parts`), the body cleaned,
//!    then the family cascade (`families`); wrapper fields fill what the line left empty.
//! 3. Per chunk: a host token a glued header grew onto is mended (`unglue_hosts`); then what a
//!    line says by itself: its role from message stems, whether it is an NCCL main-thread line
//!    or opens an exception record.

use std::borrow::Cow;
use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::families::{self, comm_fields, nccl_head, rank_tokens, Facts, NcclHead};
use crate::model::{Columns, Fields, Role, Source};
use crate::parts::{self, Part};
use crate::patterns as p;
use crate::stamp::{self, Format};
use crate::text::{close, int, slice_chars, strip, Literal};
use crate::wrappers::{self, Peeled};
use memchr::memmem::Finder;

/// One physical line.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    pub file_id: u32,
    pub line: u32,
    pub text: &'a str,
    /// Where it stands in its chunk's blocks (`model::NOWHERE` when given without blocks).
    pub at: (u32, u32),
}

#[cfg(test)]
impl<'a> Line<'a> {
    /// Lines 1, 2, … of file `file_id`, given without blocks.
    pub fn numbered(file_id: u32, texts: &[&'a str]) -> Vec<Line<'a>> {
        texts
            .iter()
            .enumerate()
            .map(|(i, text)| Line {
                file_id,
                line: i as u32 + 1,
                text,
                at: crate::model::NOWHERE,
            })
            .collect()
    }
}

/// What a line gives the ones after it: the text that tells whether it announces them (the
/// body under its wrapper, or its text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Said {
    pub file_id: u32,
    pub line: u32,
    pub body: String,
}

/// Where parsed parts go: gathered as columns, or read as they come (pass 1).
pub trait Sink {
    /// One part of physical line `line` of file `file_id` (`at`: where the line stands in the
    /// chunk's blocks, when the part's text is the whole line as read).
    fn push(&mut self, file_id: u32, line: u32, fields: &Fields<'_>, at: Option<(u32, u32)>);

    /// The chunk's parts were all pushed.
    fn finish(&mut self) {}
}

impl Sink for Columns {
    fn push(&mut self, file_id: u32, line: u32, fields: &Fields<'_>, at: Option<(u32, u32)>) {
        Columns::push(self, file_id, line, fields, at);
    }

    fn finish(&mut self) {
        Columns::finish(self);
    }
}

/// Parse a chunk into columns. `before`: what the last lines before it said (up to two), for
/// its first lines. Returns the parts (their texts: spans of the chunk's blocks, which the
/// caller puts in `columns.text.blocks`) and what the chunk's last two lines say.
pub fn parse_chunk(lines: &[Line<'_>], before: &[Said]) -> (Columns, Vec<Said>) {
    let mut columns = Columns::default();
    columns.reserve(lines.len());
    let after = parse_into(lines, before, &mut columns, &mut Scratch::default());
    (columns, after)
}

/// Buffers `parse_into` keeps from chunk to chunk (empty between calls): a chunk's working
/// vectors reuse the last chunk's memory instead of mapping fresh pages for each.
#[derive(Default)]
pub struct Scratch {
    quick: Vec<Quick>,
    under: Vec<Option<usize>>,
    rest: Vec<usize>,
    peeled: Vec<Peeled<'static>>,
    glued: Vec<bool>,
    split: Vec<Vec<Part<'static>>>,
    said: Vec<&'static str>,
    single: Vec<Part<'static>>,
    rest_rows: Vec<(usize, Fields<'static>)>,
}

/// An empty vector in the memory of `v`, for items of another lifetime (the standard
/// library's in-place collection keeps the allocation when the items' layouts match).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// Parse a chunk, handing each part to `sink` in (line, part) order; returns what the chunk's
/// last two lines say. `scratch`: the working buffers (kept from chunk to
/// chunk, so that its memory is not asked for again).
pub fn parse_into(
    lines: &[Line<'_>],
    before: &[Said],
    sink: &mut impl Sink,
    scratch: &mut Scratch,
) -> Vec<Said> {
    let mut heads: FxHashMap<&str, NcclHead> = FxHashMap::default();
    let quick = &mut scratch.quick;
    quick.clear();
    let mut stamp: LastStamp = None;
    quick.extend(
        lines
            .iter()
            .map(|line| fast(line.text, &mut heads, &mut stamp)),
    );
    let mut rest = std::mem::take(&mut scratch.rest);
    rest.clear();
    rest.extend((0..lines.len()).filter(|&i| matches!(quick[i], Quick::Rest)));
    let mut peeled: Vec<Peeled<'_>> = recycle(std::mem::take(&mut scratch.peeled));
    peeled.extend(rest.iter().map(|&i| wrappers::peel(lines[i].text)));
    // a wrapped line whose body a fast path reads takes that path: `under[i]`, its wrapper's
    // place in `peeled` (a Docker envelope's decoded body is read with its own header table)
    let under = &mut scratch.under;
    under.clear();
    under.resize(lines.len(), None);
    for (k, (&i, w)) in rest.iter().zip(&peeled).enumerate() {
        if (w.wrap.is_empty() && !w.json) || !fast_under_wrappers() {
            continue;
        }
        let q = match &w.body {
            Cow::Borrowed(body) => fast(body, &mut heads, &mut stamp),
            Cow::Owned(body) => fast(body, &mut FxHashMap::default(), &mut None),
        };
        if !matches!(q, Quick::Rest) {
            quick[i] = q;
            under[i] = Some(k);
        }
    }
    let slow = |k: usize| matches!(quick[rest[k]], Quick::Rest);
    // (a fast line's body: its text, or what its wrapper leaves)
    let body = |i: usize| under[i].map_or(lines[i].text, |k| &peeled[k].body);
    let mut glued = std::mem::take(&mut scratch.glued);
    glued.clear();
    glued.extend((0..rest.len()).map(|k| slow(k) && parts::glued(&peeled[k].body, peeled[k].json)));
    let mut hosts: Vec<&str> = Vec::new();
    if glued.iter().any(|&g| g) {
        // (hosts of the chunk's clean NCCL lines, and of the wrapped and the rest's lines'
        // starts; a line mostly names the host the line before it named)
        let clean = (0..lines.len())
            .filter(|&i| under[i].is_none())
            .filter_map(|i| quick[i].host(lines[i].text));
        // (an NCCL line a fast path read starts with the host it read)
        let starts = rest
            .iter()
            .zip(&peeled)
            .filter_map(|(&i, w)| match quick[i] {
                Quick::Nccl { .. } => quick[i].host(&w.body),
                _ => parts::host_at_start(&w.body),
            });
        for host in clean.chain(starts) {
            if hosts.last() != Some(&host) {
                hosts.push(host);
            }
        }
    }
    let known = known_hosts(hosts);
    let mut split: Vec<Vec<Part<'_>>> = recycle(std::mem::take(&mut scratch.split));
    for (w, &g) in peeled.iter().zip(&glued) {
        split.push(if g {
            parts::split(&w.wrap, &w.body, w.torch_rank, &known)
        } else {
            Vec::new()
        });
    }
    // what each line says to the next: its part-0 body under a wrapper, else its text
    let mut said: Vec<&str> = recycle(std::mem::take(&mut scratch.said));
    said.extend(lines.iter().map(|l| l.text));
    for (k, &i) in rest.iter().enumerate() {
        said[i] = match split[k].first() {
            Some(part) => &part.body,
            None => &peeled[k].body,
        };
    }
    let mut single: Vec<Part<'_>> = recycle(std::mem::take(&mut scratch.single));
    single.extend(rest.iter().zip(&peeled).map(|(&i, w)| Part {
        text: Cow::Borrowed(lines[i].text),
        body: Cow::Borrowed(&w.body),
        torch_rank: w.torch_rank,
        capped: None,
        frag: false,
        host_unknown: false,
    }));
    // the rest's parts, with the physical line each stands in
    let mut rest_rows: Vec<(usize, Fields<'_>)> = recycle(std::mem::take(&mut scratch.rest_rows));
    for (k, &i) in rest.iter().enumerate().filter(|&(k, _)| slow(k)) {
        let context = Context {
            lines,
            said: &said,
            before,
            at: i,
        };
        let parts = if split[k].is_empty() {
            std::slice::from_ref(&single[k])
        } else {
            &split[k][..]
        };
        for (n, part) in parts.iter().enumerate() {
            rest_rows.push((
                i,
                rest_part(&lines[i], &peeled[k], part, n as u16, &context),
            ));
        }
    }
    let fast_hosts = (0..lines.len()).filter_map(|i| quick[i].host(body(i)));
    let fixes =
        unglue_hosts(fast_hosts.chain(rest_rows.iter().filter_map(|(_, f)| f.host.as_deref())));
    let mut next = 0;
    for (i, (line, q)) in lines.iter().zip(quick.iter()).enumerate() {
        match q {
            Quick::Sglang { .. } | Quick::Nccl { .. } => {
                let mut fields = q.fields(body(i));
                if let Some(k) = under[i] {
                    // (as the rest's parse gives a wrapped line: the whole text, the body as
                    // its message, what the wrapper gives)
                    let w = &peeled[k];
                    fields.text = Cow::Borrowed(line.text);
                    fields.msg = Some(Cow::Borrowed(&w.body));
                    fields.wrap_ts = w.wrap_ts;
                    fill_from_wrapper(&mut fields, w, w.torch_rank);
                }
                local(&mut fields);
                mend_host(&mut fields, &fixes);
                sink.push(line.file_id, line.line, &fields, Some(line.at));
            }
            Quick::Rest => {
                while let Some((_, fields)) = rest_rows.get_mut(next).filter(|(at, _)| *at == i) {
                    let whole = fields.part == 0 && fields.text.len() == line.text.len();
                    mend_host(fields, &fixes);
                    sink.push(line.file_id, line.line, fields, whole.then_some(line.at));
                    next += 1;
                }
            }
        }
    }
    sink.finish();
    let after = last_said(lines, &said, before);
    scratch.rest_rows = recycle(rest_rows);
    scratch.single = recycle(single);
    scratch.said = recycle(said);
    scratch.split = recycle(split);
    scratch.glued = glued;
    scratch.peeled = recycle(peeled);
    scratch.rest = rest;
    after
}

fn mend_host(fields: &mut Fields<'_>, fixes: &HashMap<String, String>) {
    if fixes.is_empty() {
        return;
    }
    if let Some(fixed) = fields.host.as_deref().and_then(|h| fixes.get(h)) {
        fields.host = Some(Cow::Owned(fixed.clone()));
    }
}

/// What the last two of `lines` say to the lines after them (for a chunk read on its own,
/// whose lines before are given as raw lines).
pub fn said_of(lines: &[Line<'_>]) -> Vec<Said> {
    let from = lines.len().saturating_sub(2);
    parse_chunk(&lines[from..], &[]).1
}

/// Hosts known to the chunk (clean NCCL lines' and glued lines' starts), distinct, shortest
/// first (so that the longest one a host run ends with is found last).
fn known_hosts(mut hosts: Vec<&str>) -> Vec<String> {
    hosts.retain(|h| !h.is_empty());
    hosts.sort_unstable();
    hosts.dedup();
    hosts.sort_by_key(|h| h.chars().count());
    hosts.into_iter().map(str::to_string).collect()
}

fn last_said(lines: &[Line<'_>], said: &[&str], before: &[Said]) -> Vec<Said> {
    let mut out: Vec<Said> = before.to_vec();
    for (line, body) in lines
        .iter()
        .zip(said)
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        out.push(Said {
            file_id: line.file_id,
            line: line.line,
            body: body.to_string(),
        });
    }
    let keep = out.len().saturating_sub(2);
    out.split_off(keep)
}

struct Context<'c, 'a> {
    lines: &'c [Line<'a>],
    said: &'c [&'c str],
    before: &'c [Said],
    at: usize,
}

/// What a chunk starting with `lines` reads of `before` (the lines before it): the lines its
/// first two lines look back to (`Context::said`, one and two lines back) that stand before
/// the chunk. Two readings of a chunk with the same lines read the same of their contexts
/// exactly when these are equal.
pub fn context_read(lines: &[Line<'_>], before: &[Said]) -> Vec<Option<String>> {
    let mut read = Vec::new();
    for at in 0..lines.len().min(2) {
        let context = Context {
            lines,
            said: &[],
            before,
            at,
        };
        for back in (at + 1)..=2 {
            read.push(context.said(back).map(str::to_string));
        }
    }
    read
}

impl Context<'_, '_> {
    /// What the physical line `back` lines above this one said (None when it is not the
    /// line right before in the same file).
    fn said(&self, back: usize) -> Option<&str> {
        let me = self.lines[self.at];
        let (file_id, line, text) = if back <= self.at {
            let other = self.lines[self.at - back];
            (other.file_id, other.line, self.said[self.at - back])
        } else {
            let from_end = back - self.at;
            let said = self
                .before
                .len()
                .checked_sub(from_end)
                .map(|i| &self.before[i])?;
            (said.file_id, said.line, said.body.as_str())
        };
        (file_id == me.file_id && i64::from(line) == i64::from(me.line) - back as i64)
            .then_some(text)
    }

    /// The line before (or the one before a blank line, when `across_blank`) ends with a
    /// text that `announces` this one.
    fn chained(&self, announces: &regex::Regex, across_blank: bool) -> bool {
        let Some(one) = self.said(1).map(strip) else {
            return false;
        };
        if announces.is_match(one) {
            return true;
        }
        across_blank
            && one.is_empty()
            && self
                .said(2)
                .map(strip)
                .is_some_and(|t| announces.is_match(t))
    }
}

fn rest_part<'a>(
    line: &Line<'a>,
    w: &Peeled<'a>,
    part: &'a Part<'_>,
    n: u16,
    context: &Context<'_, 'a>,
) -> Fields<'a> {
    let body = wrappers::clean(&part.body);
    let wrapped = !w.wrap.is_empty() || w.json;
    let first = n == 0;
    let facts = Facts {
        frag: part.frag,
        chained: first && p::OPENS_RE.is_match(&body) && context.chained(&p::CHAINS_RE, true),
        cann_chained: first
            && p::CANN_LINE_RE.is_match(&body)
            && context.chained(&p::CANN_CHAINS_RE, false),
    };
    let mut f = Fields {
        part: n,
        text: Cow::Borrowed(&part.text),
        msg: (wrapped && first).then(|| Cow::Owned(part.body.to_string())),
        wrap_ts: w.wrap_ts,
        capped: part.capped,
        ..Fields::default()
    };
    families::classify(&body, &facts, &mut f);
    if part.host_unknown {
        f.host = None;
    }
    fill_from_wrapper(&mut f, w, part.torch_rank);
    local(&mut f);
    let _ = line;
    f
}

/// Fields a wrapper gave fill what the inner line left empty.
fn fill_from_wrapper(f: &mut Fields<'_>, w: &Peeled<'_>, torch_rank: Option<i32>) {
    if f.host.is_none() {
        f.host = w.host.clone().map(Cow::Owned);
    }
    f.torch_rank = f.torch_rank.or(torch_rank);
    f.stream = f.stream.take().or_else(|| w.stream.clone().map(Cow::Owned));
    let from_wrapper = f.ts_has_date.is_none() && w.ts.is_some();
    f.ts = f.ts.or(w.ts);
    if from_wrapper {
        f.ts_has_date = Some(true);
        f.ts_has_year = Some(!w.no_year);
    }
    // a vLLM-style logger prefix on a plain message is a logging record's start
    if w.no_year && f.source == Source::Other {
        f.starts_record = Some(true);
    }
}

static COMM: Literal = Literal::new(|| Finder::new("comm 0x"));
static ENCODE: Literal = Literal::new(|| Finder::new("encode_"));
static YSPY: Literal = Literal::new(|| Finder::new("yspy"));

/// A line's headers, up to two: SGLang stamps' starts (`[20`) and the tokens after NCCL headers
/// (` NCCL `), found as one left-to-right search for either finds them (without overlapping:
/// ` NCCL NCCL ` holds one); how many, and where the last NCCL token of them starts. Each `[`
/// and `N` of the line is looked at: cheaper on a log line than a packed searcher's set-up.
fn headers(text: &str) -> (usize, Option<usize>) {
    let bytes = text.as_bytes();
    let (mut count, mut nccl, mut end) = (0, None, 0);
    for at in memchr::memchr2_iter(b'[', b'N', bytes) {
        let (start, is_nccl) = if bytes[at] == b'[' {
            (at, false)
        } else {
            (at.wrapping_sub(1), true)
        };
        let literal: &[u8] = if is_nccl { b" NCCL " } else { b"[20" };
        if start == usize::MAX || start < end || !bytes[start..].starts_with(literal) {
            continue;
        }
        count += 1;
        if is_nccl {
            nccl = Some(start);
        }
        if count == 2 {
            break;
        }
        end = start + literal.len();
    }
    (count, nccl)
}
/// What a line may say of an exception (`local`): bit `i` of `said`.
const SAID: [&str; 4] = [
    "hit an exception",
    "Traceback (most recent call last)",
    "Fatal Python error",
    "Exception in ",
];
const HIT: u32 = 1;
const TRACEBACK: u32 = 1 << 1;
const FATAL: u32 = 1 << 2;
const EXCEPTION_IN: u32 = 1 << 3;

/// Which of `SAID` the text holds (bit `i`: literal `i`). Each holds a byte most log lines have
/// few of (`x`, `(`, `y`): the text is searched for those, and each literal is compared where
/// its byte stands - cheaper on a log line than a packed searcher's set-up.
fn said(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let at_back = |at: usize, back: usize, literal: u32| -> u32 {
        let holds = at
            .checked_sub(back)
            .is_some_and(|start| bytes[start..].starts_with(SAID[literal as usize].as_bytes()));
        u32::from(holds) << literal
    };
    let mut held = 0;
    for at in memchr::memchr3_iter(b'x', b'(', b'y', bytes) {
        held |= match bytes[at] {
            b'x' => at_back(at, 8, 0) | at_back(at, 1, 3),
            b'(' => at_back(at, 10, 1),
            _ => at_back(at, 7, 2),
        };
    }
    held
}

/// What a line says by itself: its role from message stems (when it proves none otherwise),
/// an NCCL line of the process's main thread, a line opening an exception record.
fn local(f: &mut Fields<'_>) {
    f.main = f.source == Source::Nccl && f.tid.is_some() && f.tid == f.pid;
    let starts = f.starts_record == Some(true);
    if !starts && f.role.is_some() {
        f.exc = false;
        return;
    }
    let text: &str = &f.text;
    let said = said(text);
    f.exc = starts && said & (HIT | TRACEBACK | FATAL) != 0;
    if f.role.is_none() {
        f.role = stem_role(text, said & (HIT | EXCEPTION_IN) != 0);
    }
}

/// Per byte: the stems of `patterns::ROLE_STEMS` that start with `] ` and that byte (bit `i`:
/// stem `i`).
static BRACKET_STEMS: std::sync::LazyLock<[u32; 256]> = std::sync::LazyLock::new(|| {
    let mut table = [0u32; 256];
    for (index, (stem, _)) in p::ROLE_STEMS.iter().enumerate() {
        if let [b']', b' ', third, ..] = stem.as_bytes() {
            table[*third as usize] |= 1 << index;
        }
    }
    table
});
const _: () = assert!(p::ROLE_STEMS.len() <= 32, "a stem per bit of BRACKET_STEMS");

/// The role the first stem of `patterns::ROLE_STEMS` (in the list's order) that the text holds
/// names. A stem starts with `] ` (looked for where the text has one), or holds `hit an
/// exception` or `Exception in ` (looked for only when the text does).
fn stem_role(text: &str, exception: bool) -> Option<Role> {
    let bytes = text.as_bytes();
    let mut first: Option<usize> = None;
    for at in memchr::memchr_iter(b']', bytes) {
        if bytes.get(at + 1) != Some(&b' ') {
            continue;
        }
        let rest = &bytes[at..];
        // (the byte after `] ` tells most stems apart before a whole comparison: only the
        // stems it starts are compared, in the list's order)
        let Some(&third) = rest.get(2) else { continue };
        let mut stems = BRACKET_STEMS[third as usize];
        while stems != 0 {
            let index = stems.trailing_zeros() as usize;
            if first.is_some_and(|f| f <= index) {
                break;
            }
            if rest.starts_with(p::ROLE_STEMS[index].0.as_bytes()) {
                first = Some(index);
            }
            stems &= stems - 1;
        }
    }
    if exception {
        for (index, (stem, _)) in p::ROLE_STEMS.iter().enumerate() {
            if first.is_some_and(|f| f <= index) {
                break;
            }
            if !stem.starts_with("] ") && text.contains(stem) {
                first = Some(index);
            }
        }
    }
    first.and_then(|i| Role::from_name(p::ROLE_STEMS[i].1))
}

/// A host token that is another host of the chunk with a few characters glued in front, on a
/// line or two, while that host has many lines, is that host: the fixes (host -> host).
fn unglue_hosts<'a>(hosts: impl Iterator<Item = &'a str>) -> HashMap<String, String> {
    const RARE: usize = 3;
    const RATIO: usize = 10;
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut run: Option<(&str, usize)> = None;
    for host in hosts {
        match &mut run {
            Some((last, n)) if *last == host => *n += 1,
            _ => {
                if let Some((last, n)) = run.take() {
                    *counts.entry(last).or_default() += n;
                }
                run = Some((host, 1));
            }
        }
    }
    if let Some((last, n)) = run {
        *counts.entry(last).or_default() += n;
    }
    let mut fixes = HashMap::new();
    if counts.len() < 2 {
        return fixes;
    }
    for (&host, &count) in &counts {
        if count > RARE {
            continue;
        }
        let under = counts
            .iter()
            .filter(|(&other, &n)| other != host && host.ends_with(other) && n >= RATIO * count)
            .map(|(&other, _)| other)
            .max_by_key(|other| other.chars().count());
        if let Some(other) = under {
            fixes.insert(host.to_string(), other.to_string());
        }
    }
    fixes
}

// ------------------------------------------------------------------------------- fast paths

/// What a fast path reads of a line (`Quick::Rest`: the rest of the parse reads it).
/// The last SGLang stamp read (its text and time): a chunk's lines mostly repeat the second
/// of the line before, which is then not read again.
type LastStamp<'a> = Option<(&'a str, Option<i64>)>;

#[cfg(test)]
thread_local! {
    /// Which fast paths a test's parse takes: 0 all, 1 none on wrapped lines' bodies, 2 none.
    static SLOWER: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

fn fast_under_wrappers() -> bool {
    #[cfg(test)]
    return SLOWER.with(std::cell::Cell::get) == 0;
    #[cfg(not(test))]
    true
}

fn fast<'a>(
    text: &'a str,
    heads: &mut FxHashMap<&'a str, NcclHead>,
    stamp: &mut LastStamp<'a>,
) -> Quick {
    #[cfg(test)]
    if SLOWER.with(std::cell::Cell::get) == 2 {
        return Quick::Rest;
    }
    // (one header at most: the SGLang stamps and NCCL tokens, counted up to two)
    let (headers, nccl) = headers(text);
    let quick = if headers != 1 {
        None
    } else if text.starts_with("[20") {
        sglang_fast(text, stamp)
    } else if text.starts_with('[') {
        None
    } else {
        nccl.and_then(|cut| nccl_fast(text, cut, heads))
    };
    quick.unwrap_or(Quick::Rest)
}

/// What a fast path read of a line, kept without the text (a chunk's are kept in one buffer,
/// used again for the next chunk).
#[derive(Clone, Copy, Debug)]
pub enum Quick {
    Rest,
    Sglang {
        ts: i64,
        ranks: [Option<i32>; 7],
        role: Option<Role>,
        server_args: bool,
        dumped: Option<i64>,
    },
    Nccl {
        host_len: u32,
        pid: Option<i64>,
        tid: Option<i64>,
        device: Option<i32>,
        cut: u32,
    },
}

impl Quick {
    /// The host a clean NCCL line starts with.
    fn host<'a>(&self, text: &'a str) -> Option<&'a str> {
        match *self {
            Quick::Nccl { host_len, .. } => Some(&text[..host_len as usize]),
            _ => None,
        }
    }

    /// The line's fields.
    fn fields<'a>(&self, text: &'a str) -> Fields<'a> {
        match *self {
            Quick::Rest => Fields::default(),
            Quick::Sglang {
                ts,
                ranks,
                role,
                server_args,
                dumped,
            } => Fields {
                text: Cow::Borrowed(text),
                source: Source::Sglang,
                starts_record: Some(true),
                ts: Some(ts),
                ts_has_date: Some(true),
                ts_has_year: Some(true),
                prefix: ranks,
                role,
                server_args: server_args.then_some(true),
                link_pid: dumped,
                pid: dumped,
                ..Fields::default()
            },
            Quick::Nccl {
                host_len,
                pid,
                tid,
                device,
                cut,
            } => {
                let mut f = Fields {
                    text: Cow::Borrowed(text),
                    source: Source::Nccl,
                    starts_record: Some(true),
                    host: Some(Cow::Borrowed(&text[..host_len as usize])),
                    pid,
                    tid,
                    device_id: device,
                    ..Fields::default()
                };
                if COMM.find(text).is_some() {
                    comm_fields(slice_chars(text, cut as usize, None), &mut f);
                }
                f
            }
        }
    }
}

/// `[YYYY-MM-DD HH:MM:SS(.mmm)?( TOKEN)*] message`: stamp and tail at fixed offsets.
fn sglang_fast<'a>(text: &'a str, last: &mut LastStamp<'a>) -> Option<Quick> {
    // (a line cut before its `] ` keeps its stamp and tokens: the tail runs to its end)
    let close = close(text);
    let seconds = slice_chars(text, 1, Some(19));
    let ts = match *last {
        Some((previous, ts)) if previous == seconds => ts,
        _ => {
            let ts = stamp::parse(seconds, Format::Seconds);
            *last = Some((seconds, ts));
            ts
        }
    }?;
    let tail = slice_chars(text, 20, close.map(|c| c.saturating_sub(20)));
    let (ms, tokens) = match tail.strip_prefix('.') {
        Some(_) => {
            let ms = slice_chars(tail, 1, Some(3));
            if !(ms.chars().count() == 3 && ms.chars().all(is_regex_digit)) {
                return None;
            }
            (int::<i64>(ms), slice_chars(tail, 4, None))
        }
        None => (None, tail),
    };
    // (rank tokens hold no `_`: the search is skipped on them)
    let encoder = memchr::memchr(b'_', tokens.as_bytes()).is_some()
        && ENCODE.find(tokens).is_some()
        && p::SGL_ENCODER.is_match(tokens);
    let ranks = match canonical_ranks(tokens) {
        Some(ranks) => ranks,
        None => p::SGL_TOKENS.is_match(tokens).then(|| rank_tokens(tokens)),
    };
    if !(ranks.is_some() || encoder) {
        return None;
    }
    let ranks = ranks.unwrap_or([None; 7]);
    let mut quick = Quick::Sglang {
        ts: ts + ms.unwrap_or(0) * 1000,
        ranks,
        role: None,
        server_args: false,
        dumped: None,
    };
    let Quick::Sglang {
        role,
        server_args,
        dumped,
        ..
    } = &mut quick
    else {
        unreachable!("made above")
    };
    if ranks.iter().any(Option::is_some) {
        *role = Some(Role::Scheduler);
        // (a batch line holds no `y`: the search is skipped on it)
        if memchr::memchr(b'y', text.as_bytes()).is_some()
            && YSPY.find(text).is_some()
            && p::PYSPY_HINT_RE.is_match(text)
        {
            *dumped = p::PYSPY_RE
                .captures(text)
                .and_then(|c| c.get(1))
                .and_then(|m| int(m.as_str()));
        }
    } else {
        let main = p::MAIN_PROOF_RE.is_match(text);
        *role = if encoder {
            Some(Role::Encoder)
        } else if main {
            Some(Role::Main)
        } else {
            None
        };
        *server_args = main && p::SERVER_ARGS_RE.is_match(text);
    }
    Some(quick)
}

/// The ranks of an ASCII tail of rank tokens (` DP5 TP10`: the first token of each key), None
/// inside when it is not tokens only; None when it is not ASCII (the patterns decide: their
/// digits are Unicode's).
fn canonical_ranks(tokens: &str) -> Option<Option<[Option<i32>; 7]>> {
    if !tokens.is_ascii() {
        return None;
    }
    let mut ranks = [None; 7];
    let mut seen = [false; 7];
    let mut rest = tokens;
    while !rest.is_empty() {
        let Some(token) = rest.strip_prefix(' ') else {
            return Some(None);
        };
        let end = token.find(' ').unwrap_or(token.len());
        let (word, after) = token.split_at(end);
        let key = crate::model::PREFIX_KEYS.iter().position(|key| {
            word.len() > key.len()
                && word.starts_with(key)
                && word[key.len()..].bytes().all(|b| b.is_ascii_digit())
        });
        let Some(key) = key else {
            return Some(None);
        };
        if !seen[key] {
            seen[key] = true;
            ranks[key] = int(&word[crate::model::PREFIX_KEYS[key].len()..]);
        }
        rest = after;
    }
    Some(Some(ranks))
}

/// `\x1b|\[repeated |\[[0-9;]{1,6}m` (`patterns::JUNK_HINT`): a colour code or Ray's dedup
/// suffix somewhere in the line.
fn junk_hint(text: &str) -> bool {
    let bytes = text.as_bytes();
    if memchr::memchr(0x1b, bytes).is_some() {
        return true;
    }
    memchr::memchr_iter(b'[', bytes).any(|at| {
        let rest = &bytes[at + 1..];
        if rest.starts_with(b"repeated ") {
            return true;
        }
        let run = rest
            .iter()
            .take(7)
            .take_while(|b| b.is_ascii_digit() || **b == b';')
            .count();
        (1..=6).contains(&run) && rest.get(run) == Some(&b'm')
    })
}

fn is_regex_digit(c: char) -> bool {
    c.is_ascii_digit()
        || (!c.is_ascii() && {
            let mut buf = [0u8; 4];
            regex_digit().is_match(c.encode_utf8(&mut buf))
        })
}

fn regex_digit() -> &'static regex::Regex {
    static DIGIT: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"^\d$").expect("digit"));
    &DIGIT
}

/// `host:pid:tid [dev] (src.cc:line )?NCCL …` with no wrapper, colour code or glued record.
fn nccl_fast<'a>(
    text: &'a str,
    cut: usize,
    heads: &mut FxHashMap<&'a str, NcclHead>,
) -> Option<Quick> {
    if junk_hint(text) {
        return None;
    }
    let head = slice_chars(text, 0, Some(cut));
    let h = heads.entry(head).or_insert_with(|| nccl_head(head));
    if h.ts.is_some() {
        return None;
    }
    // (no stamp before it: the host starts the line)
    let host = h.host.as_deref().filter(|host| text.starts_with(host))?;
    Some(Quick::Nccl {
        host_len: host.len() as u32,
        pid: h.pid,
        tid: h.tid,
        device: h.device,
        cut: cut as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `headers` as a packed search of both literals gives it.
    fn searched_headers(text: &str) -> (usize, Option<usize>) {
        static HEADERS: crate::text::LiteralSet = crate::text::LiteralSet::new(&["[20", " NCCL "]);
        let (mut count, mut nccl) = (0, None);
        HEADERS.visit(text, |literal, start| {
            count += 1;
            if literal == 1 {
                nccl = Some(start);
            }
            count < 2
        });
        (count, nccl)
    }

    #[test]
    fn a_lines_headers_are_those_a_packed_search_finds() {
        for text in [
            "",
            "[2026-11-29 10:00:00 TP0] x",
            "g1:1:2 [0] NCCL INFO x",
            " NCCL NCCL ",
            " NCCL  NCCL x NCCL ",
            "[20[20 NCCL [20",
            "N NCCL",
            "NCCL [2",
            "x [20 y NCCL z NCCL ",
            "é NCCL [20",
        ] {
            assert_eq!(headers(text), searched_headers(text), "{text:?}");
        }
        assert_eq!(headers(" NCCL NCCL "), (1, Some(0)));
        assert_eq!(headers("a NCCL b NCCL c"), (2, Some(8)));
    }

    /// `said` as a plain search of each literal gives it.
    fn searched_said(text: &str) -> u32 {
        (0..SAID.len())
            .filter(|&i| text.contains(SAID[i]))
            .fold(0, |held, i| held | 1 << i)
    }

    #[test]
    fn what_a_line_says_of_an_exception_is_what_a_plain_search_finds() {
        // (each literal's byte stands where it is compared, and its literal is in place)
        for (i, literal) in SAID.iter().enumerate() {
            assert_eq!(said(literal), 1 << i, "{literal}");
            assert_eq!(said(&literal[1..]), 0, "{literal}");
        }
        for text in [
            "",
            "Scheduler hit an exception: Traceback (most recent call last):",
            "Exception in thread x: Fatal Python error: Aborted",
            "exception (token/s) yy xx",
            "hit an exceptio",
            "é hit an exception",
        ] {
            assert_eq!(said(text), searched_said(text), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn what_a_line_says_agrees_with_a_plain_search(
            text in "(hit an exception|Traceback \\(most recent call last\\)|Fatal Python error|Exception in |[xy( Eé]|hit an e|Fatal P|Traceback ){0,12}",
        ) {
            prop_assert_eq!(said(&text), searched_said(&text));
        }

        #[test]
        fn headers_agree_with_a_packed_search(text in "([\\[20 NCLé]|\\[20| NCCL ){0,24}") {
            prop_assert_eq!(headers(&text), searched_headers(&text));
        }
    }

    /// The role a plain search of each stem, in the list's order, finds.
    fn plain_role(text: &str, exception: bool) -> Option<Role> {
        p::ROLE_STEMS
            .iter()
            .find(|(stem, _)| (stem.starts_with("] ") || exception) && text.contains(stem))
            .and_then(|(_, role)| Role::from_name(role))
    }

    #[test]
    fn a_repeated_stamp_reads_as_it_does_alone() {
        let lines = [
            "[2026-12-03 03:00:00 TP0] Decode batch. #running-req: 1",
            "[2026-12-03 03:00:00.250 TP1] Decode batch. #running-req: 2",
            "[2026-12-03 03:00:00 DP1 TP3] Prefill batch.",
            "[2026-12-03 03:00:01 TP0] Decode batch.",
            "[2026-13-03 03:00:01 TP0] not a date",
            "[2026-13-03 03:00:01 TP0] not a date again",
            "[2026-12-03 03:00:01 TP0] a date again",
            "[2026-12-03 03:00:01] no ranks: no fast path",
            "[2026-12-03 03:00:01 TP0] the last",
        ];
        let mut last: LastStamp = None;
        for text in lines {
            let alone = format!("{:?}", sglang_fast(text, &mut None));
            assert_eq!(
                format!("{:?}", sglang_fast(text, &mut last)),
                alone,
                "{text}"
            );
        }
        assert!(sglang_fast(lines[4], &mut None).is_none());
        assert!(sglang_fast(lines[3], &mut None).is_some());
    }

    #[test]
    fn a_line_takes_the_role_of_the_first_stem_it_holds() {
        let mut texts = vec![
            String::new(),
            "] ".to_string(),
            "]] Decode batch".to_string(),
            "[2026-12-03 03:00:00] Decode batch. #running-req: 1".to_string(),
            "host:1:2 [3] NCCL INFO comm 0x1 rank 0".to_string(),
            "] Decode batc] Scheduler hit an exception".to_string(),
            "x] Load weight end] Load weight begin".to_string(),
            "Exception in run_tp_server] Decode batch".to_string(),
            "é] KV Cache is allocated".to_string(),
        ];
        // (each stem alone, after another, and cut short by a byte)
        for (i, (stem, _)) in p::ROLE_STEMS.iter().enumerate() {
            let (other, _) = p::ROLE_STEMS[(i * 7 + 3) % p::ROLE_STEMS.len()];
            texts.push(format!("[x] {stem} tail"));
            texts.push(format!("{other}] {stem}"));
            texts.push(stem[..stem.len() - 1].to_string());
        }
        for text in &texts {
            for exception in [false, true] {
                assert_eq!(
                    stem_role(text, exception),
                    plain_role(text, exception),
                    "{text:?} {exception}"
                );
            }
        }
        assert_eq!(
            stem_role("[t] Decode batch", false),
            Role::from_name("scheduler")
        );
    }
}

#[cfg(test)]
mod fast_paths {
    use super::*;
    use proptest::prelude::*;

    /// Lines of the shapes the fast paths read, and of shapes near them that they must leave
    /// to the rest of the parse.
    const BODIES: &[&str] = &[
        "[2026-11-29 10:00:01 DP1 TP3 EP3] Decode batch. #running-req: 4, #token: 88",
        "[2026-11-29 10:00:01.250 TP0] Prefill batch. #new-seq: 1",
        "[2026-11-29 10:00:02] INFO server_args.py:1697: Attention backend not specified.",
        "[2026-11-29 10:00:02] server_args=ServerArgs(tp_size=8, dp_size=2)",
        "[2026-11-29 10:00:03 TP5] Scheduler hit an exception: Traceback (most recent call last):",
        "[2026-11-29 10:00:03 TP2] py-spy dump of pid 4242 (Thread 0x7f) ",
        "[2026-11-29 10:00:03 TP1] x[2026-11-29 10:00:04 TP2] glued",
        "gpu-node-1:3416237:3416237 [1] NCCL INFO comm 0x55d1 rank 2 nranks 8 cudaDev 1 nvmlDev 1 busId 1b000 commId 0x9f2e - Init COMPLETE",
        "gpu-node-1:3416237:3416301 [1] NCCL INFO Channel 00/0 : 2[1] -> 3[2] via P2P/CUMEM",
        "xgpu-node-1:3416237:3416237 [1] NCCL INFO Bootstrap : Using eth0",
        "gpu-node-2:77:80 [0] NCCL WARN Net : Connection closed by remote peer",
        "Loading safetensors 100%gpu-node-1:3416237:3416237 [1] NCCL INFO Init COMPLETE",
        "[2026-11-29 10:00:05] gpu-node-3:12:12 [3] NCCL INFO Init START",
        "Traceback (most recent call last):",
        "  File \"/sgl/scheduler.py\", line 12, in event_loop",
        "RuntimeError: NCCL error: unhandled system error",
        "During handling of the above exception, another exception occurred:",
        "",
        "[rank3]:[E1129 10:00:06.123 ProcessGroupNCCL.cpp:616] [PG ID 2 PG GUID 3(tp:device) Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=ALLREDUCE)",
        "\u{1b}[32m[2026-11-29 10:00:07 TP4] coloured\u{1b}[0m",
        "[2026-11-29 10:00:08 TP٣] Unicode digit",
    ];
    const WRAPPERS: &[&str] = &[
        "",
        "",
        "2026-11-29T10:00:00.123456789Z stdout F ",
        "2026-11-29T10:00:00Z stderr P ",
        "2026-11-29T11:00:00.5+01:00 stdout F ",
        "2026-11-29T10:00:00Z ",
        "2026-11-29T10:00:00Z stdout F [rank3]:",
        "2026-11-29T10:00:00Z stdout F node1 [stdout] ",
        "2026-11-29T10:00:00.1234567890Z stdout F ",
        "[pod/sglang-0/sglang] ",
        "[pod/sglang-0/sglang] 2026-11-29T10:00:00Z stdout F ",
        "sglang-1  | ",
        "\u{1b}[2K\u{1b}[36msglang-1  | \u{1b}[0m",
        "17: ",
        "3: [default0]:[rank3]:",
        "[default1]:",
        "[default2]:[rank5]: ",
        "[rank0]:[rank1]:",
        "(SchedulerActor pid=4242, ip=10.0.0.3) ",
        "\u{1b}[36m(SchedulerActor pid=4242)\u{1b}[0m ",
        "gpu-node-5: ",
        "2026-11-29 10:00:00.123  gpu-node-6 ",
        "2026-11-29 10:00:00,123 - sglang.relay - INFO - ",
        "INFO 11-29 10:00:00.5 relay.py:12] ",
        "[2026-11-29T10:00:00.000Z] ",
        "1764410400000000000\t2026-11-29T10:00:00Z\t",
        "[1234] ",
        "{json}",
        "gpu-node-5: {json}",
    ];

    /// `body` behind `wrapper` (`{json}`: in a Docker json-file envelope).
    fn wrapped(wrapper: &str, body: &str) -> String {
        match wrapper.strip_suffix("{json}") {
            Some(before) => {
                let log = body
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\u{1b}', "\\u001b");
                format!(
                    "{before}{{\"log\":\"{log}\\n\",\"stream\":\"stdout\",\"time\":\"2026-11-29T10:00:00.5Z\"}}"
                )
            }
            None => format!("{wrapper}{body}"),
        }
    }

    proptest! {
        /// An NCCL line a fast path reads starts with the host that path reads.
        #[test]
        fn an_nccl_line_read_fast_starts_with_its_host(
            line in concat!(
                "[a-z\\[\\]\\x{e9}._-]{1,8}:[0-9\\x{663}]{1,3}:[0-9]{1,3} \\[[0-9]\\]",
                "( [a-z./]{1,4}:[0-9]{1,2})? NCCL (INFO|WARN) ",
                "(comm 0x1f rank 1 nranks 2|x)",
            )
        ) {
            let mut heads = FxHashMap::default();
            let q = fast(&line, &mut heads, &mut None);
            if matches!(q, Quick::Nccl { .. }) {
                prop_assert_eq!(q.host(&line), parts::host_at_start(&line), "{:?}", line);
            }
        }
    }

    fn parsed(lines: &[Line<'_>], slower: u8) -> String {
        SLOWER.with(|s| s.set(slower));
        let (columns, said) = parse_chunk(lines, &[]);
        SLOWER.with(|s| s.set(0));
        format!("{columns:?} {said:?}")
    }

    proptest! {
        /// A chunk parses the same with the fast paths as without them: wrapped lines and
        /// lines without a wrapper, with the lines around them.
        #[test]
        fn the_fast_paths_read_what_the_rest_of_the_parse_reads(
            picks in proptest::collection::vec((0..WRAPPERS.len(), 0..BODIES.len(), 0u32..2), 1..24)
        ) {
            let texts: Vec<String> = picks
                .iter()
                .map(|&(wrapper, body, _)| wrapped(WRAPPERS[wrapper], BODIES[body]))
                .collect();
            let mut line_of = [0u32; 2];
            let lines: Vec<Line<'_>> = picks
                .iter()
                .zip(&texts)
                .map(|(&(_, _, file_id), text)| {
                    line_of[file_id as usize] += 1;
                    Line { file_id, line: line_of[file_id as usize], text, at: crate::model::NOWHERE }
                })
                .collect();
            let fast = parsed(&lines, 0);
            prop_assert_eq!(&fast, &parsed(&lines, 1));
            prop_assert_eq!(&fast, &parsed(&lines, 2));
        }
    }
}
