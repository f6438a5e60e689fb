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

use aho_corasick::AhoCorasick;

use crate::families::{self, comm_fields, nccl_head, rank_tokens, Facts, NcclHead};
use crate::model::{Columns, Fields, Role, Source};
use crate::parts::{self, Part};
use crate::patterns as p;
use crate::stamp::{self, Format};
use crate::text::{count_up_to, find, int, slice_chars, strip};
use crate::wrappers::{self, Peeled};

/// One physical line.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    pub file_id: u32,
    pub line: u32,
    pub text: &'a str,
}

/// What a line gives the ones after it: the text that tells whether it announces them (the
/// body under its wrapper, or its text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Said {
    pub file_id: u32,
    pub line: u32,
    pub body: String,
}

enum Kind<'a> {
    Fast(Box<Fields<'a>>),
    Rest,
}

/// Parse a chunk. `before`: what the last lines before it said (up to two), for its first
/// lines. Returns the parts and what the chunk's last two lines say.
pub fn parse_chunk(lines: &[Line<'_>], before: &[Said]) -> (Columns, Vec<Said>) {
    let mut heads: HashMap<&str, NcclHead> = HashMap::new();
    let mut hosts: Vec<String> = Vec::new();
    let kinds: Vec<Kind<'_>> = lines
        .iter()
        .map(|line| fast(line.text, &mut heads, &mut hosts))
        .collect();
    let rest: Vec<usize> = (0..lines.len())
        .filter(|&i| matches!(kinds[i], Kind::Rest))
        .collect();
    let docker = rest
        .iter()
        .any(|&i| wrappers::is_docker(wrappers::pdsh(lines[i].text).1));
    let peeled: Vec<Peeled<'_>> = rest
        .iter()
        .map(|&i| wrappers::peel(lines[i].text, docker))
        .collect();
    let glued: Vec<bool> = peeled
        .iter()
        .map(|w| parts::glued(&w.body, w.json))
        .collect();
    if glued.iter().any(|&g| g) {
        for w in &peeled {
            if let Some(host) = parts::host_at_start(&w.body) {
                hosts.push(host.to_string());
            }
        }
    }
    let known = known_hosts(hosts);
    let mut split: Vec<Vec<Part<'_>>> = Vec::with_capacity(rest.len());
    for (w, &g) in peeled.iter().zip(&glued) {
        split.push(if g {
            parts::split(&w.wrap, &w.body, w.torch_rank, &known)
        } else {
            Vec::new()
        });
    }
    // what each line says to the next: its part-0 body under a wrapper, else its text
    let mut said: Vec<&str> = lines.iter().map(|l| l.text).collect();
    for (k, &i) in rest.iter().enumerate() {
        said[i] = match split[k].first() {
            Some(part) => &part.body,
            None => &peeled[k].body,
        };
    }
    let mut columns = Columns::default();
    let mut k = 0;
    for (i, (line, kind)) in lines.iter().zip(kinds).enumerate() {
        match kind {
            Kind::Fast(fields) => {
                let mut fields = *fields;
                local(&mut fields);
                columns.push(line.file_id, line.line, &fields);
            }
            Kind::Rest => {
                let w = &peeled[k];
                let context = Context {
                    lines,
                    said: &said,
                    before,
                    at: i,
                };
                if split[k].is_empty() {
                    let part = Part {
                        text: Cow::Borrowed(line.text),
                        body: Cow::Borrowed(&w.body),
                        torch_rank: w.torch_rank,
                        capped: None,
                        frag: false,
                        host_unknown: false,
                    };
                    rest_part(&mut columns, line, w, &part, 0, &context);
                } else {
                    for (n, part) in split[k].iter().enumerate() {
                        rest_part(&mut columns, line, w, part, n as u16, &context);
                    }
                }
                k += 1;
            }
        }
    }
    unglue_hosts(&mut columns);
    let after = last_said(lines, &said, before);
    (columns, after)
}

/// What the last two of `lines` say to the lines after them (for a chunk read on its own,
/// whose lines before are given as raw lines).
pub fn said_of(lines: &[Line<'_>]) -> Vec<Said> {
    let from = lines.len().saturating_sub(2);
    parse_chunk(&lines[from..], &[]).1
}

/// Hosts known to the chunk (clean NCCL lines' and glued lines' starts), distinct, shortest
/// first (so that the longest one a host run ends with is found last).
fn known_hosts(mut hosts: Vec<String>) -> Vec<String> {
    hosts.retain(|h| !h.is_empty());
    hosts.sort();
    hosts.dedup();
    hosts.sort_by_key(|h| h.chars().count());
    hosts
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
    columns: &mut Columns,
    line: &Line<'a>,
    w: &Peeled<'a>,
    part: &Part<'_>,
    n: u16,
    context: &Context<'_, 'a>,
) {
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
        text: Cow::Owned(part.text.to_string()),
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
    columns.push(line.file_id, line.line, &f);
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

/// What a line says by itself: its role from message stems (when it proves none otherwise),
/// an NCCL line of the process's main thread, a line opening an exception record.
fn local(f: &mut Fields<'_>) {
    if f.role.is_none() {
        f.role = stem_role(&f.text);
    }
    f.main = f.source == Source::Nccl && f.tid.is_some() && f.tid == f.pid;
    f.exc = f.starts_record == Some(true) && p::EXCEPTION_HEADER_RE.is_match(&f.text);
}

fn stem_role(text: &str) -> Option<Role> {
    static STEMS: std::sync::LazyLock<AhoCorasick> = std::sync::LazyLock::new(|| {
        AhoCorasick::new(p::ROLE_STEMS.iter().map(|(stem, _)| stem)).expect("role stems")
    });
    // (the first stem in the list's order that the text holds, wherever it stands)
    let mut best: Option<usize> = None;
    for found in STEMS.find_overlapping_iter(text) {
        let index = found.pattern().as_usize();
        best = Some(best.map_or(index, |b| b.min(index)));
        if index == 0 {
            break;
        }
    }
    best.and_then(|i| Role::from_name(p::ROLE_STEMS[i].1))
}

/// A host token that is another host of the chunk with a few characters glued in front, on a
/// line or two, while that host has many lines, is that host.
fn unglue_hosts(columns: &mut Columns) {
    const RARE: usize = 3;
    const RATIO: usize = 10;
    let mut counts: HashMap<String, usize> = HashMap::new();
    for row in 0..columns.len() {
        if let Some(host) = columns.host.get(row) {
            *counts.entry(host.to_string()).or_default() += 1;
        }
    }
    if counts.len() < 2 {
        return;
    }
    let mut fixes: HashMap<String, String> = HashMap::new();
    for (host, &count) in &counts {
        if count > RARE {
            continue;
        }
        let under = counts
            .iter()
            .filter(|(other, &n)| {
                *other != host && host.ends_with(other.as_str()) && n >= RATIO * count
            })
            .map(|(other, _)| other)
            .max_by_key(|other| other.chars().count());
        if let Some(other) = under {
            fixes.insert(host.clone(), other.clone());
        }
    }
    if fixes.is_empty() {
        return;
    }
    let mut host = crate::model::StrColumn::default();
    for row in 0..columns.len() {
        let value = columns
            .host
            .get(row)
            .map(|h| fixes.get(h).map_or(h, String::as_str).to_string());
        host.push(value.as_deref());
    }
    columns.host = host;
}

// ------------------------------------------------------------------------------- fast paths

fn fast<'a>(
    text: &'a str,
    heads: &mut HashMap<&'a str, NcclHead>,
    hosts: &mut Vec<String>,
) -> Kind<'a> {
    let bytes = text.as_bytes();
    let headers = count_up_to(bytes, b"[20", 2) + count_up_to(bytes, b" NCCL ", 2);
    if headers != 1 {
        return Kind::Rest;
    }
    if text.starts_with("[20") {
        return sglang_fast(text).map_or(Kind::Rest, |f| Kind::Fast(Box::new(f)));
    }
    if text.starts_with('[') {
        return Kind::Rest;
    }
    let Some(cut) = find(text, " NCCL ") else {
        return Kind::Rest;
    };
    match nccl_fast(text, cut, heads) {
        Some(f) => {
            if let Some(host) = &f.host {
                hosts.push(host.to_string());
            }
            Kind::Fast(Box::new(f))
        }
        None => Kind::Rest,
    }
}

/// `[YYYY-MM-DD HH:MM:SS(.mmm)?( TOKEN)*] message`: stamp and tail at fixed offsets.
fn sglang_fast(text: &str) -> Option<Fields<'_>> {
    // (a line cut before its `] ` keeps its stamp and tokens: the tail runs to its end)
    let close = find(text, "] ");
    let ts = stamp::parse(slice_chars(text, 1, Some(19)), Format::Seconds)?;
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
    let encoder = p::SGL_ENCODER.is_match(tokens);
    let tokens_ok = canonical_tokens(tokens).unwrap_or_else(|| p::SGL_TOKENS.is_match(tokens));
    if !(tokens_ok || encoder) {
        return None;
    }
    let mut f = Fields {
        text: Cow::Borrowed(text),
        source: Source::Sglang,
        starts_record: Some(true),
        ts: Some(ts + ms.unwrap_or(0) * 1000),
        ts_has_date: Some(true),
        ts_has_year: Some(true),
        ..Fields::default()
    };
    if tokens_ok {
        f.prefix = rank_tokens(tokens);
    }
    let ranked = f.prefix.iter().any(Option::is_some);
    if ranked {
        f.role = Some(Role::Scheduler);
        if text.contains("yspy") && p::PYSPY_HINT_RE.is_match(text) {
            let dumped = p::PYSPY_RE
                .captures(text)
                .and_then(|c| c.get(1))
                .and_then(|m| int(m.as_str()));
            f.link_pid = dumped;
            f.pid = dumped;
        }
    } else {
        let main = p::MAIN_PROOF_RE.is_match(text);
        f.role = if encoder {
            Some(Role::Encoder)
        } else if main {
            Some(Role::Main)
        } else {
            None
        };
        f.server_args = (main && p::SERVER_ARGS_RE.is_match(text)).then_some(true);
    }
    Some(f)
}

/// Whether an ASCII tail is rank tokens only (` DP5 TP10`); None when it is not ASCII (the
/// pattern decides: its digits are Unicode's).
fn canonical_tokens(tokens: &str) -> Option<bool> {
    if !tokens.is_ascii() {
        return None;
    }
    let mut rest = tokens;
    while !rest.is_empty() {
        let Some(token) = rest.strip_prefix(' ') else {
            return Some(false);
        };
        let end = token.find(' ').unwrap_or(token.len());
        let (word, after) = token.split_at(end);
        let key_len = crate::model::PREFIX_KEYS
            .iter()
            .filter(|key| word.starts_with(*key))
            .map(|key| key.len())
            .find(|&len| len < word.len() && word[len..].bytes().all(|b| b.is_ascii_digit()));
        if key_len.is_none() {
            return Some(false);
        }
        rest = after;
    }
    Some(true)
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
    heads: &mut HashMap<&'a str, NcclHead>,
) -> Option<Fields<'a>> {
    if p::JUNK_HINT_RE.is_match(text) {
        return None;
    }
    let head = slice_chars(text, 0, Some(cut));
    let h = heads.entry(head).or_insert_with(|| nccl_head(head)).clone();
    if h.host.is_none() || h.ts.is_some() {
        return None;
    }
    let mut f = Fields {
        text: Cow::Borrowed(text),
        source: Source::Nccl,
        starts_record: Some(true),
        host: h.host.map(Cow::Owned),
        pid: h.pid,
        tid: h.tid,
        device_id: h.device,
        ..Fields::default()
    };
    if text.contains("comm 0x") {
        comm_fields(slice_chars(text, cut, None), &mut f);
    }
    Some(f)
}
