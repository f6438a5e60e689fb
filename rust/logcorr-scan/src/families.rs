//! The line families of the lines off the fast paths, each a function of the part's cleaned
//! body: it fills the family's fields and says whether the body is of that family. The cascade
//! (`classify`) offers a body to each in turn: the first whose cheap test and pattern accept it
//! takes it.

use std::borrow::Cow;

use regex::Captures;

use crate::model::{Fields, Role, Source};
use crate::patterns as p;
use crate::stamp::{self, Format};
use crate::text::{find, int, slice_chars, starts_any};

/// What the cascade reads beside the body.
pub struct Facts {
    /// The part was cut off an NCCL header by a glued line (`parts`).
    pub frag: bool,
    /// The line before announces this one (ends with `:`).
    pub chained: bool,
    /// The line before is a torch_npu warning carrying CANN's report (`… EZ9999: Inner Error!`).
    pub cann_chained: bool,
}

fn group<'a>(caps: &Captures<'a>, i: usize) -> Option<&'a str> {
    caps.get(i).map(|m| m.as_str())
}

fn owned(value: Option<&str>) -> Option<Cow<'static, str>> {
    value.map(|v| Cow::Owned(v.to_string()))
}

/// Classify a body and fill `f` with its family's fields; `other` when no family takes it.
pub fn classify(body: &str, facts: &Facts, f: &mut Fields<'_>) {
    let taken = (facts.frag && nccl_fragment(body, f))
        || ((body.contains(" NCCL ") || body.starts_with("NCCL version")) && nccl(body, f))
        || (p::SGL_GENERAL_HINT.is_match(body) && sglang_general(body, f))
        || (body.starts_with("[gpu=") && sglang_gpu(body, f))
        || (p::TORCH_HINT_RE.is_match(body) && torch(body, f))
        || (p::GLOG_HINT_RE.is_match(body) && glog(body, f))
        || (starts_any(body, &p::CPP_STARTS) && cpp(body, f))
        || (misc_candidate(body) && misc(body, facts, f))
        || (python_candidate(body) && python(body, facts, f));
    if !taken {
        f.source = Source::Other;
        f.starts_record = Some(false);
    }
}

fn nccl_fragment(body: &str, f: &mut Fields<'_>) -> bool {
    let caps = p::NCCL_FRAGMENT_RE.captures(body);
    let caps = caps.as_ref();
    f.source = Source::Nccl;
    f.starts_record = Some(true);
    f.host = owned(caps.and_then(|c| group(c, 1)));
    f.pid = caps.and_then(|c| group(c, 2)).and_then(int);
    f.tid = caps.and_then(|c| group(c, 3)).and_then(int);
    true
}

/// The fields of an NCCL header (everything before ` NCCL `).
#[derive(Clone, Debug, Default)]
pub struct NcclHead {
    pub ts: Option<i64>,
    pub host: Option<String>,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub device: Option<i32>,
}

pub fn nccl_head(head: &str) -> NcclHead {
    let Some(caps) = p::NCCL_HEAD_RE.captures(head) else {
        return NcclHead::default();
    };
    NcclHead {
        ts: group(&caps, 1).and_then(|t| stamp::parse(t, Format::AnyFraction)),
        host: group(&caps, 2).map(str::to_string),
        pid: group(&caps, 3).and_then(int),
        tid: group(&caps, 4).and_then(int),
        device: group(&caps, 5).and_then(int),
    }
}

fn nccl(body: &str, f: &mut Fields<'_>) -> bool {
    let cut = find(body, " NCCL ");
    let head = match cut {
        Some(c) => slice_chars(body, 0, Some(c)),
        None => body,
    };
    let after = slice_chars(body, cut.unwrap_or(0), None);
    let h = nccl_head(head);
    if h.host.is_none() && !body.starts_with("NCCL version ") {
        return false;
    }
    f.source = Source::Nccl;
    f.starts_record = Some(h.host.is_some());
    f.host = h.host.map(Cow::Owned);
    f.pid = h.pid;
    f.tid = h.tid;
    f.device_id = h.device;
    f.ts = h.ts;
    f.ts_has_date = h.ts.map(|_| true);
    f.ts_has_year = h.ts.map(|_| true);
    if after.contains("comm 0x") {
        comm_fields(after, f);
    }
    true
}

/// A communicator line's pointer, rank, size, commId (or split) and init phase.
pub fn comm_fields(after: &str, f: &mut Fields<'_>) {
    if let Some(caps) = p::COMM_RE.captures(after) {
        f.comm = owned(group(&caps, 1));
        f.comm_rank = group(&caps, 2).and_then(int);
        f.comm_nranks = group(&caps, 3).and_then(int);
    }
    f.comm_id = comm_id(after);
    f.nccl_phase = p::NCCL_PHASE_RE
        .captures(after)
        .and_then(|c| owned(group(&c, 1)));
}

fn comm_id(after: &str) -> Option<Cow<'static, str>> {
    if let Some(caps) = p::COMM_ID_RE.captures(after) {
        return owned(group(&caps, 1));
    }
    let caps = p::COMM_SPLIT_RE.captures(after)?;
    Some(Cow::Owned(format!(
        "split {}/{}",
        group(&caps, 2)?,
        group(&caps, 1)?
    )))
}

/// The first rank of each prefix token key in a tail of tokens (` DP5 TP10 EP10`).
pub fn rank_tokens(tokens: &str) -> [Option<i32>; 7] {
    let mut ranks = [None; 7];
    let mut found = [false; 7];
    for (i, key) in crate::model::PREFIX_KEYS.iter().enumerate() {
        // (?:^| )KEY(\d+)(?: |$): the first token of that key, digits to its end
        let mut at = 0;
        while let Some(pos) = find(&tokens[at..], key) {
            let start = at + pos;
            let end = start + key.len();
            at = start + 1;
            if start > 0 && tokens.as_bytes()[start - 1] != b' ' {
                continue;
            }
            let digits_end = tokens[end..]
                .char_indices()
                .find(|(_, c)| !is_digit(*c))
                .map_or(tokens.len(), |(i, _)| end + i);
            if digits_end == end {
                continue;
            }
            let next = tokens[digits_end..].chars().next();
            if next.is_some() && next != Some(' ') {
                continue;
            }
            if !found[i] {
                found[i] = true;
                ranks[i] = int(&tokens[end..digits_end]);
            }
            break;
        }
    }
    ranks
}

/// `\d` of the regex engine: any Unicode decimal digit.
fn is_digit(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        regex_digit(c)
    }
}

fn regex_digit(c: char) -> bool {
    static DIGIT: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"^\d$").expect("digit"));
    let mut buf = [0u8; 4];
    DIGIT.is_match(c.encode_utf8(&mut buf))
}

fn sglang_general(body: &str, f: &mut Fields<'_>) -> bool {
    let Some(caps) = p::SGL_GENERAL.captures(body) else {
        return false;
    };
    let hms = group(&caps, 3);
    if hms.is_none() || (group(&caps, 1).is_none() && group(&caps, 2).is_none()) {
        return false;
    }
    let date = group(&caps, 2);
    let text = format!(
        "{} {}.{}",
        date.unwrap_or("2000-01-01"),
        hms.unwrap_or(""),
        group(&caps, 4).unwrap_or("000")
    );
    f.ts = stamp::parse(&text, Format::Millis);
    f.ts_has_date = Some(date.is_some());
    f.prefix = rank_tokens(group(&caps, 5).unwrap_or(""));
    let encoder = group(&caps, 6).is_some();
    finish_sglang(body, encoder, f);
    true
}

/// Source, role, server_args and the py-spy PID of a SGLang line (message tests on the few
/// rows they concern).
fn finish_sglang(body: &str, encoder: bool, f: &mut Fields<'_>) {
    let ranked = f.prefix.iter().any(Option::is_some);
    f.source = Source::Sglang;
    f.starts_record = Some(true);
    f.ts_has_year = f.ts_has_date;
    let main = !ranked && p::MAIN_PROOF_RE.is_match(body);
    f.role = if ranked {
        Some(Role::Scheduler)
    } else if encoder {
        Some(Role::Encoder)
    } else if main {
        Some(Role::Main)
    } else {
        None
    };
    f.server_args = (main && p::SERVER_ARGS_RE.is_match(body)).then_some(true);
    let dumped = if ranked && p::PYSPY_HINT_RE.is_match(body) {
        p::PYSPY_RE
            .captures(body)
            .and_then(|c| group(&c, 1).and_then(int))
    } else {
        None
    };
    f.link_pid = dumped;
    f.pid = dumped;
}

fn sglang_gpu(body: &str, f: &mut Fields<'_>) -> bool {
    let Some(gpu) = p::GPU_RE
        .captures(body)
        .and_then(|c| group(&c, 1).and_then(int))
    else {
        return false;
    };
    f.source = Source::Sglang;
    f.starts_record = Some(true);
    f.device_id = Some(gpu);
    true
}

fn torch(body: &str, f: &mut Fields<'_>) -> bool {
    let Some(caps) = p::TORCH_HEADER_RE.captures(body) else {
        return false;
    };
    f.source = Source::Torch;
    f.starts_record = Some(true);
    f.ts = match (group(&caps, 2), group(&caps, 3)) {
        (Some(mmdd), Some(hms)) => stamp::month_day(mmdd, hms, group(&caps, 4)),
        _ => None,
    };
    f.ts_has_date = f.ts.map(|_| true);
    f.ts_has_year = f.ts.map(|_| false);
    message_facts(body, f);
    true
}

fn glog(body: &str, f: &mut Fields<'_>) -> bool {
    let Some(caps) = p::GLOG_RE.captures(body) else {
        return false;
    };
    f.source = Source::Glog;
    f.starts_record = Some(true);
    let fraction = group(&caps, 4);
    f.ts = match (group(&caps, 2), group(&caps, 3)) {
        (Some(mmdd), Some(hms)) => stamp::month_day(mmdd, hms, fraction),
        _ => None,
    };
    // (python's logging writes whole milliseconds and a pid; C++ glog microseconds and a tid)
    let number = group(&caps, 5).and_then(int::<i64>);
    match fraction.map(|frac| frac.ends_with("000")) {
        Some(true) => f.pid = number,
        Some(false) => f.tid = number,
        None => {}
    }
    f.ts_has_date = f.ts.map(|_| true);
    f.ts_has_year = f.ts.map(|_| false);
    message_facts(body, f);
    true
}

fn cpp(body: &str, f: &mut Fields<'_>) -> bool {
    f.source = Source::Cpp;
    f.starts_record = Some(body.starts_with("terminate called "));
    f.proctitle = p::FRAME_TITLE_RE
        .captures(body)
        .and_then(|c| owned(group(&c, 1)));
    message_facts(body, f);
    true
}

/// PG identity, WorkNCCL SeqNum and op, and the watchdog's counters, on bodies that hint at them.
pub fn message_facts(body: &str, f: &mut Fields<'_>) {
    if !p::FACT_HINT_RE.is_match(body) {
        return;
    }
    if let Some(pg) = p::PG_TAG_RE.captures(body) {
        f.pg_id = group(&pg, 1).and_then(int);
        f.pg_guid = owned(group(&pg, 2).or(group(&pg, 4)));
        f.pg_desc = owned(group(&pg, 3).or(group(&pg, 5)));
        f.pg_rank = group(&pg, 6).or(group(&pg, 7)).and_then(int);
    }
    let work = p::WORK_RE.captures(body);
    let seq = work.as_ref().and_then(|w| group(w, 1)).or_else(|| {
        p::AT_WORK_RE
            .captures(body)
            .and_then(|c| c.get(1).map(|m| m.as_str()))
    });
    f.seq = seq.and_then(int);
    f.op = owned(work.as_ref().and_then(|w| group(w, 2)));
    if let Some(counters) = p::COUNTERS_RE.captures(body) {
        f.last_enqueued = group(&counters, 1).and_then(int);
        f.last_completed = group(&counters, 2).and_then(int);
    }
}

fn misc_candidate(body: &str) -> bool {
    p::SHELL_JOB_RE.is_match(body)
        || p::TQDM_RE.is_match(body)
        || body.contains("[PID: ")
        || body.starts_with("[ERROR] ")
        || body.starts_with("[Gloo] ")
        || p::UVICORN_RE.is_match(body)
        || p::UCX_RE.is_match(body)
        || body.contains("sglang_router")
        || body.contains("sgl_model_gateway")
        || body.contains(" smg")
}

fn misc(body: &str, facts: &Facts, f: &mut Fields<'_>) -> bool {
    let err = p::CANN_ERROR_RE.captures(body);
    let code = p::CANN_CODE_RE.captures(body);
    let ucx = p::UCX_RE.captures(body);
    let router = p::ROUTER_RE.captures(body);
    let e = err.as_ref().and_then(|c| group(c, 3));
    let c = code.as_ref().and_then(|c| group(c, 2));
    let ucx_host = ucx.as_ref().and_then(|c| group(c, 1));
    let level = router.as_ref().and_then(|c| group(c, 4));
    let source = if e.is_some() || c.is_some() {
        Source::Cann
    } else if ucx_host.is_some() {
        Source::Ucx
    } else if level.is_some() {
        Source::Router
    } else if p::UVICORN_RE.is_match(body) {
        Source::Uvicorn
    } else if body.starts_with("[Gloo] ") {
        Source::Gloo
    } else if p::TQDM_RE.is_match(body) {
        Source::Tqdm
    } else if p::SHELL_JOB_RE.is_match(body) {
        Source::Shell
    } else {
        return false;
    };
    f.source = source;
    let gloo = p::GLOO_CONNECTED_RE.captures(body);
    f.gloo_rank = gloo.as_ref().and_then(|g| group(g, 1)).and_then(int);
    f.gloo_size = gloo
        .as_ref()
        .and_then(|g| group(g, 2))
        .and_then(int::<i32>)
        .map(|n| n.wrapping_add(1));
    f.starts_record = Some(
        matches!(
            source,
            Source::Uvicorn | Source::Ucx | Source::Router | Source::Shell
        ) || gloo.is_some()
            || e.is_some()
            || (c.is_some() && !body.contains("detail:[PID:") && !facts.cann_chained),
    );
    f.role = match source {
        Source::Uvicorn => Some(Role::Main),
        Source::Router => Some(Role::Router),
        _ => None,
    };
    f.pid = e
        .or(c)
        .or(ucx.as_ref().and_then(|u| group(u, 2)))
        .and_then(int);
    f.tid = ucx.as_ref().and_then(|u| group(u, 3)).and_then(int);
    f.host = owned(ucx_host);
    f.device_id = err.as_ref().and_then(|c| group(c, 4)).and_then(int);
    f.ts = cann_time(err.as_ref(), code.as_ref()).or_else(|| router_time(router.as_ref()));
    f.ts_has_date = f.ts.map(|_| true);
    f.ts_has_year = f.ts.map(|_| true);
    true
}

fn cann_time(err: Option<&Captures<'_>>, code: Option<&Captures<'_>>) -> Option<i64> {
    let text = match err.and_then(|c| Some((group(c, 1)?, group(c, 2)?))) {
        Some((date, time)) => format!("{date} {time}.000000"),
        None => {
            let c = code?;
            format!(
                "{} {}.{}{}",
                group(c, 3)?,
                group(c, 4)?,
                group(c, 5)?,
                group(c, 6)?
            )
        }
    };
    stamp::parse(&text, Format::Micros)
}

fn router_time(router: Option<&Captures<'_>>) -> Option<i64> {
    let c = router?;
    let fraction: String = group(c, 3).unwrap_or("0").chars().take(6).collect();
    let text = format!("{} {}.{fraction:0<6}", group(c, 1)?, group(c, 2)?);
    stamp::parse(&text, Format::Micros)
}

fn python_candidate(body: &str) -> bool {
    starts_any(body, &p::TRACEBACK_STARTS)
        || starts_any(body, &p::FAULT_STARTS)
        || starts_any(
            body,
            &["Process ", "Python v", "Thread ", "  ", "Exception in "],
        )
        || p::EXC_RE.is_match(body)
        || p::FILE_START_RE.is_match(body)
}

fn python(body: &str, facts: &Facts, f: &mut Fields<'_>) -> bool {
    let process = p::PROCESS_RE.captures(body);
    let source = if starts_any(body, &p::TRACEBACK_STARTS) || p::FILE_TB_RE.is_match(body) {
        Source::Traceback
    } else if p::FILE_FH_RE.is_match(body) || starts_any(body, &p::FAULT_STARTS) {
        Source::Faulthandler
    } else if process.is_some()
        || p::PYTHON_V_RE.is_match(body)
        || p::THREAD_RE.is_match(body)
        || p::PYSPY_FRAME_RE.is_match(body)
    {
        Source::Pyspy
    } else if p::EXC_RE.is_match(body) || p::TB_BODY_RE.is_match(body) || p::OPENS_RE.is_match(body)
    {
        Source::Traceback
    } else {
        return false;
    };
    f.source = source;
    f.starts_record = Some((p::OPENS_RE.is_match(body) && !facts.chained) || process.is_some());
    f.link_pid = process.as_ref().and_then(|c| group(c, 1)).and_then(int);
    f.proctitle = owned(process.as_ref().and_then(|c| group(c, 2)));
    f.tid = p::THREAD_RE
        .captures(body)
        .and_then(|c| group(&c, 1).and_then(int));
    true
}
