//! Outer prefixes added by launchers, collectors and viewers, peeled before parsing (outermost
//! first, every piece optional): a pdsh host, a docker compose service, an srun task label,
//! NULs and ANSI codes, a viewer's line number, kubectl's pod prefix, CRI / kubectl / Loki /
//! collector stamps, a relaying Python logger, a vLLM-style logger prefix, milabench's host, a
//! Ray actor, torchrun's `[default0]:[rank0]:`. Docker's json-file driver is an envelope: its
//! `log` string is decoded first and the shapes are peeled from that.
//!
//! The line's text is never changed: the peel says where the body starts and what the
//! wrapper's pieces name.

use std::borrow::Cow;
use std::sync::LazyLock;

use crate::patterns as p;
use crate::stamp::{self, Format};
use crate::text::{int, len_chars, slice_chars};

/// A line's wrapper: what it is, where the body starts, and the fields it gives.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Peeled<'a> {
    /// The peeled prefix of the text ("" when none, and for a Docker envelope).
    pub wrap: Cow<'a, str>,
    /// The rest of the line (a Docker envelope's decoded `log` string without its prefixes).
    pub body: Cow<'a, str>,
    /// A Docker json-file line (its parts could not make up the line: it is never split).
    pub json: bool,
    /// A collector's or container runtime's zoned time, in UTC.
    pub wrap_ts: Option<i64>,
    /// A relay's own stamp (naive local time) and whether it lacks the year.
    pub ts: Option<i64>,
    pub no_year: bool,
    pub host: Option<String>,
    pub torch_rank: Option<i32>,
    pub stream: Option<String>,
}

/// The `pdsh` host and the line under it (`inner`).
pub fn pdsh(text: &str) -> (Option<&str>, &str) {
    // (what the pattern needs at least: a letter first, then `: ` after the host's word,
    // which may go on past ASCII)
    let maybe = pdsh_maybe(text);
    if !maybe {
        return (None, text);
    }
    match p::PDSH_RE.captures(text).and_then(|c| c.get(1)) {
        Some(host) => {
            let host = host.as_str();
            (Some(host), slice_chars(text, len_chars(host) + 2, None))
        }
        None => (None, text),
    }
}

/// Whether a line may start with a pdsh host: a letter first, then `: ` after the host's
/// word (which may go on past ASCII).
fn pdsh_maybe(text: &str) -> bool {
    let b = text.as_bytes();
    if !b.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let n = b.iter().take_while(|c| word(c)).count();
    b.get(n).is_some_and(|c| !c.is_ascii()) || b[n..].starts_with(b": ")
}

/// A Docker envelope's `log` string, raw (DOCKER_LOG_RE's group): up to the first quote no
/// backslash escapes; None when none ends it.
fn docker_log(inner: &str) -> Option<&str> {
    const START: usize = "{\"log\":\"".len();
    let b = inner.as_bytes();
    let mut at = START;
    loop {
        at += memchr::memchr2(b'"', b'\\', b.get(at..)?)?;
        if b[at] == b'"' {
            return Some(&inner[START..at]);
        }
        // (an escape takes the character after it, a line end excepted; a character's other
        // bytes are neither a quote nor a backslash)
        match b.get(at + 1) {
            Some(b'\n') | None => return None,
            Some(_) => at += 2,
        }
    }
}

/// A Docker envelope's time (DOCKER_TIME_RE's group): the first `"time":"` that an ISO time in
/// UTC and a quote follow, read by hand in ASCII (a non-ASCII byte where a digit is read leaves
/// it to the pattern).
fn docker_time(inner: &str) -> Option<&str> {
    const KEY: &[u8] = b"\"time\":\"";
    let b = inner.as_bytes();
    for key in memchr::memmem::find_iter(b, KEY) {
        let t = &b[key + KEY.len()..];
        let shape = b"dddd-dd-ddTdd:dd:dd";
        let mut fits = t.len() > shape.len();
        for (i, &want) in shape.iter().enumerate() {
            match t.get(i) {
                Some(c) if !c.is_ascii() => return pattern_time(inner),
                Some(c) if want == b'd' && c.is_ascii_digit() => {}
                Some(c) if want != b'd' && *c == want => {}
                _ => fits = false,
            }
            if !fits {
                break;
            }
        }
        if !fits {
            continue;
        }
        let mut end = shape.len();
        if t[end] == b'.' {
            let n = t[end + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            if t.get(end + 1 + n).is_some_and(|c| !c.is_ascii()) {
                return pattern_time(inner);
            }
            if !(1..=9).contains(&n) {
                continue;
            }
            end += 1 + n;
        }
        if t[end..].starts_with(b"Z\"") {
            return Some(&inner[key + KEY.len()..key + KEY.len() + end + 1]);
        }
    }
    None
}

fn pattern_time(inner: &str) -> Option<&str> {
    p::DOCKER_TIME_RE
        .captures(inner)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// Whether a line under its pdsh host is a Docker json-file envelope.
pub fn is_docker(inner: &str) -> bool {
    inner.starts_with("{\"log\":\"")
}

/// Peel one line. A Docker envelope's time is read from the envelope: the line itself, not the
/// lines read with it, says whether it is one.
pub fn peel(text: &str) -> Peeled<'_> {
    let (pdsh_host, inner) = pdsh(text);
    let mut out = Peeled::default();
    let docker = is_docker(inner);
    let mut inner: Cow<'_, str> = Cow::Borrowed(inner);
    let mut envelope_time = None;
    if docker {
        envelope_time = docker_time(&inner).and_then(|t| stamp::parse(t, Format::IsoZ));
        let decoded = docker_log(&inner).map(decode_json);
        if let Some(decoded) = decoded {
            out.json = true;
            inner = Cow::Owned(decoded);
        }
    }
    let mut wlen = 0;
    if let Some(hand) = hand_peeled(&inner) {
        wlen = hand.len;
        out.wrap_ts = hand.wrap_ts;
        out.stream = hand.stream;
        out.torch_rank = hand.torch_rank;
    } else if p::WRAP_STARTS_RE.is_match(&inner) {
        wlen = wrapper_fields(&inner, &mut out);
    }
    out.host = pdsh_host.map(str::to_string).or(out.host.take());
    out.wrap_ts = out.wrap_ts.or(envelope_time);
    if out.json {
        out.wrap = Cow::Borrowed("");
        out.body = Cow::Owned(slice_chars(&inner, wlen, None).to_string());
    } else {
        let prefix = pdsh_host.map_or(0, |h| len_chars(h) + 2) + wlen;
        out.wrap = Cow::Borrowed(slice_chars(text, 0, Some(prefix)));
        out.body = Cow::Borrowed(slice_chars(text, prefix, None));
    }
    out
}

/// WRAP_RE's named groups by their place in it, found once (a lookup by name hashes the name:
/// twenty of them cost a wrapped line about 5,000 instructions).
struct Groups {
    wrap: usize,
    cri: usize,
    kts: usize,
    loki: usize,
    coll: usize,
    lts: usize,
    pylog: usize,
    vmd: usize,
    vday: usize,
    vhms: usize,
    vfrac: usize,
    lhost: usize,
    mhost: usize,
    trank: usize,
    kpod: usize,
    ray: usize,
    task: usize,
    compose: usize,
    tlocal: usize,
    tlocal2: usize,
}

static GROUPS: LazyLock<Groups> = LazyLock::new(|| {
    let at = |name: &str| {
        p::WRAP_RE
            .capture_names()
            .position(|n| n == Some(name))
            .expect("a group of WRAP_RE")
    };
    Groups {
        wrap: at("wrap"),
        cri: at("cri"),
        kts: at("kts"),
        loki: at("loki"),
        coll: at("coll"),
        lts: at("lts"),
        pylog: at("pylog"),
        vmd: at("vmd"),
        vday: at("vday"),
        vhms: at("vhms"),
        vfrac: at("vfrac"),
        lhost: at("lhost"),
        mhost: at("mhost"),
        trank: at("trank"),
        kpod: at("kpod"),
        ray: at("ray"),
        task: at("task"),
        compose: at("compose"),
        tlocal: at("tlocal"),
        tlocal2: at("tlocal2"),
    }
});

/// Read the wrapper pieces of a line whose first characters look wrapped; the prefix's length
/// in characters.
fn wrapper_fields(inner: &str, out: &mut Peeled<'_>) -> usize {
    let Some(c) = p::WRAP_RE.captures(inner) else {
        return 0;
    };
    let g = &*GROUPS;
    let get = |group: usize| c.get(group).map(|m| m.as_str());
    // (a `Z` time is the instant `+00:00` names)
    let zoned = get(g.cri)
        .or(get(g.kts))
        .and_then(|t| match t.strip_suffix('Z') {
            Some(_) => stamp::parse(t, Format::IsoZ),
            None => stamp::parse(t, Format::IsoOffset),
        });
    let utc = get(g.loki)
        .or(get(g.coll))
        .and_then(|t| stamp::parse(t, Format::IsoZ));
    out.wrap_ts = zoned.or(utc);
    let relay = get(g.lts)
        .and_then(|t| stamp::parse(t, Format::Millis))
        .or_else(|| {
            get(g.pylog).and_then(|t| stamp::parse(&t.replacen(',', ".", 1), Format::Millis))
        })
        .or_else(|| {
            let mmdd = format!("{}{}", get(g.vmd)?, get(g.vday)?);
            stamp::month_day(&mmdd, get(g.vhms)?, get(g.vfrac))
        });
    out.ts = relay;
    out.no_year = get(g.vmd).is_some();
    out.host = get(g.lhost).or(get(g.mhost)).map(str::to_string);
    out.torch_rank = get(g.trank).and_then(int);
    out.stream = get(g.kpod)
        .map(str::to_string)
        .or_else(|| get(g.ray).map(str::to_string))
        .or_else(|| get(g.task).map(|t| format!("task={t}")))
        .or_else(|| get(g.compose).map(str::to_string));
    // torchrun's `--tee` label (`[default3]:`, role and local rank): one worker's output
    // inside the stream of its agent (an srun task, …)
    if let Some(local) = get(g.tlocal).or(get(g.tlocal2)) {
        out.stream = Some(match out.stream.take() {
            Some(outer) => format!("{outer} {local}"),
            None => local.to_string(),
        });
    }
    get(g.wrap).map_or(0, len_chars)
}

/// What a hand reading found of one of WRAP_RE's pieces at a place.
enum Piece {
    /// The piece is not there (the pattern's reading agrees).
    Absent,
    /// The piece ends this many bytes on.
    Ends(usize),
    /// Only the pattern can tell (non-ASCII bytes, shapes not read by hand).
    Unsure,
}

/// What `hand_peeled` read of a line's wrapper, as WRAP_RE gives it.
#[derive(Debug, Default, PartialEq)]
pub struct HandPeeled {
    /// the prefix's length (bytes)
    pub len: usize,
    /// the runtime stamp's time in UTC
    pub wrap_ts: Option<i64>,
    pub stream: Option<String>,
    /// the last `[rankN]:` of a torch label
    pub torch_rank: Option<i32>,
}

/// The commonest wrappers read by hand, in WRAP_RE's order: a docker compose service
/// (`sglang-1  | `), an srun task (`17: `), kubectl's pod (`[pod/NAME/CONTAINER] `), a
/// container runtime's stamp (CRI `<ISO time><zone> stdout F `, kubectl `--timestamps`
/// `<ISO time><zone> `), a Ray actor and a torch label (torchrun's `[default3]:`, torch's
/// `[rank3]:`), each optional, all in ASCII, with nothing before, between or after them that
/// another of WRAP_RE's pieces could read. None leaves the line to WRAP_RE (which decides
/// every other line).
pub fn hand_peeled(inner: &str) -> Option<HandPeeled> {
    let b = inner.as_bytes();
    // (control sequences and a carriage return before the wrapper)
    if matches!(b.first(), Some(0x1b | b'\r')) {
        return None;
    }
    let mut at = 0;
    let compose = match compose_at(b) {
        Piece::Ends(end) => {
            at = end;
            let name = inner[..end].trim_end_matches(['|', ' ']);
            Some(name)
        }
        Piece::Absent => None,
        Piece::Unsure => return None,
    };
    let task = match task_at(&b[at..]) {
        Piece::Ends(end) => {
            let task = &inner[at..at + end - 2];
            at += end;
            Some(task)
        }
        Piece::Absent => None,
        Piece::Unsure => return None,
    };
    // (NULs and control sequences; a viewer's line number `[12] `)
    let r = &b[at..];
    if matches!(r.first(), Some(0 | 0x1b)) || viewer_number(r) {
        return None;
    }
    let pod = match pod_at(r) {
        Piece::Ends(end) => {
            let pod = &inner[at + 1..at + end - 2];
            at += end;
            // (the group holds `pod/NAME`)
            Some(&pod[..4 + pod[4..].find('/')?])
        }
        Piece::Absent => None,
        Piece::Unsure => return None,
    };
    let r = &b[at..];
    let mut wrap_ts = None;
    match r.first() {
        Some(c) if c.is_ascii_digit() => {
            let (len, ts) = runtime_stamp(&inner[at..])?;
            at += len;
            wrap_ts = ts;
        }
        // (a collector's `[<ISO time>Z]`)
        Some(b'[') if r.get(11) == Some(&b'T') || !r[..r.len().min(12)].is_ascii() => return None,
        // (a vLLM-style logger's level)
        Some(b'D' | b'I' | b'W' | b'E' | b'C')
            if ["DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "]
                .iter()
                .any(|level| r.starts_with(level.as_bytes())) =>
        {
            return None
        }
        _ => {}
    }
    // (a host's `[stdout] ` cannot start with the Ray actor's `(`)
    let ray = match ray_at(&b[at..]) {
        Piece::Ends(end) => {
            let actor = inner[at + 1..at + end].trim_end_matches([')', ' ']);
            at += end;
            Some(actor)
        }
        Piece::Absent => None,
        Piece::Unsure => return None,
    };
    // (a torch label starting with `[`: nothing but it can start there, as a host before
    // `[stdout] ` starts with a word and a Ray actor with `(`, a space or a colour)
    let label = match torch_label_at(&b[at..]) {
        Piece::Ends(end) => {
            let label = TorchLabel::of(&inner[at..at + end]);
            at += end;
            Some(label)
        }
        Piece::Absent => None,
        Piece::Unsure => return None,
    };
    if at == 0 || (label.is_none() && !plain_after(&b[at..])) {
        return None;
    }
    let mut stream = pod
        .or(ray)
        .map(str::to_string)
        .or_else(|| task.map(|t| format!("task={t}")))
        .or_else(|| compose.map(str::to_string));
    let label = label.unwrap_or_default();
    // torchrun's `--tee` label: one worker's output inside the stream of its agent
    if let Some(local) = label.local {
        stream = Some(match stream {
            Some(outer) => format!("{outer} {local}"),
            None => local.to_string(),
        });
    }
    Some(HandPeeled {
        len: at,
        wrap_ts,
        stream,
        torch_rank: label.rank.and_then(int),
    })
}

/// A torch label WRAP_RE reads at the start of `b` (`[default3]:`, `[rank11]:`,
/// `[default3]:[rank11]: `), when `b` starts with `[` (one that starts with a space, a host's
/// `node/3 ` or an agent's `12:` is not read here: `plain_after` sends it to WRAP_RE).
///
/// In the pattern's order: `[defaultN]:` then one or more `[rankN]:` and a space; else
/// `[defaultN]:` alone; else none.
fn torch_label_at(b: &[u8]) -> Piece {
    if b.first() != Some(&b'[') {
        return Piece::Absent;
    }
    let local = match bracketed(b, b"[default") {
        Piece::Ends(end) => Some(end),
        Piece::Absent => None,
        Piece::Unsure => return Piece::Unsure,
    };
    let mut at = local.unwrap_or(0);
    let mut ranks = 0;
    loop {
        match bracketed(&b[at..], b"[rank") {
            Piece::Ends(end) => {
                at += end;
                ranks += 1;
            }
            Piece::Absent => break,
            Piece::Unsure => return Piece::Unsure,
        }
    }
    if ranks > 0 {
        Piece::Ends(at + usize::from(b.get(at) == Some(&b' ')))
    } else {
        local.map_or(Piece::Absent, Piece::Ends)
    }
}

/// `{open}\d+\]:` at the start (`open`: `[default`, `[rank`).
fn bracketed(b: &[u8], open: &[u8]) -> Piece {
    if !b.starts_with(open) {
        return Piece::Absent;
    }
    let digits = b[open.len()..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let end = open.len() + digits;
    if b.get(end).is_some_and(|c| !c.is_ascii()) {
        // (a Unicode digit)
        Piece::Unsure
    } else if digits > 0 && b[end..].starts_with(b"]:") {
        Piece::Ends(end + 2)
    } else {
        Piece::Absent
    }
}

/// The local rank (`defaultN`) and last rank's number a torch label holds.
#[derive(Default)]
struct TorchLabel<'a> {
    local: Option<&'a str>,
    rank: Option<&'a str>,
}

impl<'a> TorchLabel<'a> {
    /// `label`: what `torch_label_at` read.
    fn of(label: &'a str) -> TorchLabel<'a> {
        let local = label
            .strip_prefix('[')
            .filter(|l| l.starts_with("default"))
            .and_then(|l| l.split_once(']'))
            .map(|(local, _)| local);
        let rank = label
            .trim_end_matches(' ')
            .rsplit_once("[rank")
            .and_then(|(_, r)| r.strip_suffix("]:"));
        TorchLabel { local, rank }
    }
}

/// A Ray actor `(NAME pid=N)` or `(NAME pid=N, ip=IP)` at the start, and one space after it;
/// unsure where a colour could follow it.
fn ray_at(b: &[u8]) -> Piece {
    if b.first() != Some(&b'(') {
        return Piece::Absent;
    }
    let name = b[1..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    let mut at = 1 + name;
    if name == 0 || !b[at..].starts_with(b" pid=") {
        return match b.get(at) {
            Some(c) if !c.is_ascii() => Piece::Unsure,
            _ => Piece::Absent,
        };
    }
    at += 5;
    let pid = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    at += pid;
    if b[at..].starts_with(b", ip=") {
        let ip = b[at + 5..]
            .iter()
            .take_while(|c| word(c) || **c == b':')
            .count();
        if ip > 0 && b.get(at + 5 + ip) == Some(&b')') {
            at += 5 + ip;
        } else if b.get(at + 5 + ip).is_some_and(|c| !c.is_ascii()) {
            return Piece::Unsure;
        }
    }
    match b.get(at) {
        Some(b')') if pid > 0 => {}
        Some(c) if !c.is_ascii() => return Piece::Unsure,
        _ => return Piece::Absent,
    }
    at += 1;
    // (` ?COLOUR` may follow, then one space)
    let rest = &b[at..];
    if colour_at(rest) || (rest.first() == Some(&b' ') && colour_at(&rest[1..])) {
        return Piece::Unsure;
    }
    Piece::Ends(at + usize::from(rest.first() == Some(&b' ')))
}

/// `[A-Za-z][\w.\-]*[-_]\d+ +\| ` at the start.
fn compose_at(b: &[u8]) -> Piece {
    if !b.first().is_some_and(u8::is_ascii_alphabetic) {
        return Piece::Absent;
    }
    let n = b.iter().take_while(|c| word(c)).count();
    if b.get(n).is_some_and(|c| !c.is_ascii()) {
        return Piece::Unsure;
    }
    // (the digits end the word: a space follows them)
    let digits = b[..n]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let joined = n > digits + 1 && digits > 0 && matches!(b[n - digits - 1], b'-' | b'_');
    let spaces = b[n..].iter().take_while(|&&c| c == b' ').count();
    if joined && spaces > 0 && b[n + spaces..].starts_with(b"| ") {
        Piece::Ends(n + spaces + 2)
    } else {
        Piece::Absent
    }
}

/// `\d{1,5}: ` at the start.
fn task_at(b: &[u8]) -> Piece {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if b.get(n).is_some_and(|c| !c.is_ascii()) {
        Piece::Unsure
    } else if (1..=5).contains(&n) && b[n..].starts_with(b": ") {
        Piece::Ends(n + 2)
    } else {
        Piece::Absent
    }
}

/// Whether a viewer's line number `\[\d{1,9}\] ` may start `b`.
fn viewer_number(b: &[u8]) -> bool {
    if b.first() != Some(&b'[') {
        return false;
    }
    let n = b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
    b.get(1 + n).is_some_and(|c| !c.is_ascii())
        || ((1..=9).contains(&n) && b[1 + n..].starts_with(b"] "))
}

/// `\[pod/[^/\]\s]+/[^\]\s]+\] ` at the start.
fn pod_at(b: &[u8]) -> Piece {
    if !b.starts_with(b"[pod/") {
        return Piece::Absent;
    }
    // (Unicode's spaces include the vertical tab, which ASCII's do not)
    let space = |c: u8| c.is_ascii_whitespace() || c == 0x0b;
    let name = b[5..]
        .iter()
        .take_while(|&&c| c.is_ascii() && !(c == b'/' || c == b']' || space(c)))
        .count();
    let at = 5 + name;
    let container = b[at + 1..]
        .iter()
        .take_while(|&&c| c.is_ascii() && !(c == b']' || space(c)))
        .count();
    let end = at + 1 + container;
    if b.get(at).is_some_and(|c| !c.is_ascii()) || b.get(end).is_some_and(|c| !c.is_ascii()) {
        Piece::Unsure
    } else if name > 0 && b.get(at) == Some(&b'/') && container > 0 && b[end..].starts_with(b"] ") {
        Piece::Ends(end + 2)
    } else {
        Piece::Absent
    }
}

/// A container runtime's stamp at the start of `inner` (CRI `<ISO time><zone> stdout F `,
/// kubectl `--timestamps` `<ISO time><zone> `) in ASCII: its length and time; None when the
/// line does not start with one read by hand.
fn runtime_stamp(inner: &str) -> Option<(usize, Option<i64>)> {
    let b = inner.as_bytes();
    let digits = |from: usize, to: usize| {
        b.get(from..to)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let fixed = digits(0, 4)
        && at(4, b'-')
        && digits(5, 7)
        && at(7, b'-')
        && digits(8, 10)
        && at(10, b'T')
        && digits(11, 13)
        && at(13, b':')
        && digits(14, 16)
        && at(16, b':')
        && digits(17, 19);
    if !fixed {
        return None;
    }
    let mut end = 19;
    if at(end, b'.') {
        let n = b[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if !(1..=9).contains(&n) {
            return None;
        }
        end += 1 + n;
    }
    let zoned = match b.get(end) {
        Some(b'Z') => {
            end += 1;
            false
        }
        Some(b'+' | b'-')
            if digits(end + 1, end + 3) && at(end + 3, b':') && digits(end + 4, end + 6) =>
        {
            end += 6;
            true
        }
        _ => return None,
    };
    if !at(end, b' ') {
        return None;
    }
    let stamp = &inner[..end];
    let mut len = end + 1;
    let runtime = &b[len..];
    if (runtime.starts_with(b"stdout ") || runtime.starts_with(b"stderr "))
        && matches!(runtime.get(7), Some(b'F' | b'P'))
        && runtime.get(8) == Some(&b' ')
    {
        len += 9;
    }
    let format = if zoned {
        Format::IsoOffset
    } else {
        Format::IsoZ
    };
    Some((len, stamp::parse(stamp, format)))
}

/// Whether a colour (`ESC[…`, or a bare `[36m`) may start `b`.
fn colour_at(b: &[u8]) -> bool {
    let n = b
        .iter()
        .skip(1)
        .take_while(|c| c.is_ascii_digit() || **c == b';')
        .count();
    match b.first() {
        Some(0x1b) => true,
        Some(b'[') => (1..=6).contains(&n) && b.get(1 + n) == Some(&b'm'),
        _ => false,
    }
}

/// An ASCII byte of `[\w.\-]`.
fn word(c: &u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')
}

/// Whether none of WRAP_RE's pieces after the stamps (a host's `[stdout]`, a Ray actor, a
/// torchrun label) can start at `rest`'s first bytes (false when unsure: WRAP_RE decides).
fn plain_after(rest: &[u8]) -> bool {
    match rest.first() {
        None => true,
        // a colour (`[36m`) before a Ray actor, `[default0]:`, `[rank3]:`
        Some(b'[') => !(colour_at(rest) || matches!(rest.get(1), Some(b'd' | b'r'))),
        // a host before `[stdout] `, `node/3 [default0]:`, `12:[default0]:` (a word in
        // Unicode's sense goes on past ASCII)
        Some(c) if word(c) => {
            let n = rest.iter().take_while(|c| word(c)).count();
            let digits = rest[..n].iter().all(u8::is_ascii_digit);
            match rest.get(n) {
                Some(b' ') => {
                    !(rest[n..].starts_with(b" [stdout] ") || rest[n..].starts_with(b" [stderr] "))
                }
                Some(b'/') => false,
                Some(b':') => !digits,
                Some(c) => c.is_ascii(),
                None => true,
            }
        }
        // (the Ray actor's and torchrun's pieces may start with one space: what follows it
        // decides)
        Some(b' ') => rest.get(1) == Some(&b' ') || plain_after(&rest[1..]),
        // a colour before a Ray actor, the actor; a Unicode word
        Some(c) => c.is_ascii() && !matches!(c, 0x1b | b'('),
    }
}

/// A Docker `log` string decoded (its final newline removed): JSON escapes read left to
/// right; Go's `\u` escapes of <, >, &, ESC, NUL and the line separators; others kept.
pub fn decode_json(raw: &str) -> String {
    let raw = match p::DOCKER_END_RE.find(raw) {
        Some(m) => format!("{}{}", &raw[..m.start()], &raw[m.end()..]),
        None => raw.to_string(),
    };
    const ESCAPES: [(&str, &str); 15] = [
        ("\\\\", "\\"),
        ("\\\"", "\""),
        ("\\/", "/"),
        ("\\n", "\n"),
        ("\\r", "\r"),
        ("\\t", "\t"),
        ("\\b", "\u{8}"),
        ("\\f", "\u{c}"),
        ("\\u003c", "<"),
        ("\\u003e", ">"),
        ("\\u0026", "&"),
        ("\\u001b", "\u{1b}"),
        ("\\u0000", "\u{0}"),
        ("\\u2028", "\u{2028}"),
        ("\\u2029", "\u{2029}"),
    ];
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw.as_str();
    'outer: while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        for (from, to) in ESCAPES {
            if rest.starts_with(from) {
                out.push_str(to);
                rest = &rest[from.len()..];
                continue 'outer;
            }
        }
        out.push('\\');
        rest = &rest[1..];
    }
    out.push_str(rest);
    out
}

/// `body` without colour codes and Ray's dedup suffix (only bodies holding a hint are touched).
pub fn clean(body: &str) -> Cow<'_, str> {
    if p::JUNK_HINT_RE.is_match(body) {
        p::JUNK_RE.replace_all(body, "")
    } else {
        Cow::Borrowed(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_read_left_to_right() {
        assert_eq!(decode_json(r#"a\\nb\n"#), "a\\nb");
        assert_eq!(
            decode_json(r#"\u001b[0m\"x\"\u00e9"#),
            "\u{1b}[0m\"x\"\\u00e9"
        );
    }

    /// The peeled prefix and the body concatenate back to the line.
    fn whole(text: &str) -> Peeled<'_> {
        let peeled = peel(text);
        assert_eq!(format!("{}{}", peeled.wrap, peeled.body), text);
        peeled
    }

    #[test]
    fn control_sequences_before_a_compose_service_are_skipped() {
        let line = "\u{1b}[2Ksglang-1  | [2026-11-29 10:00:00 TP0] Load weight begin.";
        let peeled = whole(line);
        assert_eq!(peeled.stream.as_deref(), Some("sglang-1"));
        assert_eq!(peeled.body, "[2026-11-29 10:00:00 TP0] Load weight begin.");
        // compose colours its prefix: ESC[36m before the name, ESC[0m after the bar
        let line = "\u{1b}[2K\r\u{1b}[36msglang-1  | \u{1b}[0m[2026-11-29 10:00:00 TP1] x";
        let peeled = whole(line);
        assert_eq!(peeled.stream.as_deref(), Some("sglang-1"));
        assert_eq!(peeled.body, "[2026-11-29 10:00:00 TP1] x");
    }

    #[test]
    fn control_sequences_before_srun_ray_and_kubectl_are_skipped() {
        let peeled = whole("\u{1b}[1A\u{1b}[2K17: [rank17]: Traceback (most recent call last):");
        assert_eq!(peeled.stream.as_deref(), Some("task=17"));
        assert_eq!(peeled.torch_rank, Some(17));
        assert_eq!(peeled.body, "Traceback (most recent call last):");
        let peeled = whole("\u{1b}[0m\u{1b}[36m(WorkerDict pid=859188)\u{1b}[0m step 3");
        assert_eq!(peeled.stream.as_deref(), Some("WorkerDict pid=859188"));
        assert_eq!(peeled.body, "step 3");
        let peeled = whole("\u{1b}[0G[pod/sglang-0/sglang] [2026-11-29 10:00:00 TP0] x");
        assert_eq!(peeled.stream.as_deref(), Some("pod/sglang-0"));
        assert_eq!(peeled.body, "[2026-11-29 10:00:00 TP0] x");
    }

    #[test]
    fn a_compose_line_behind_control_sequences_is_one_part() {
        use crate::parse::{parse_chunk, Line};
        let text = "\u{1b}[2Ksglang-1  | [2026-11-29 10:00:01 TP1] Load weight begin.";
        let lines = [Line {
            file_id: 0,
            line: 1,
            text,
            at: crate::model::NOWHERE,
        }];
        let (columns, _) = parse_chunk(&lines, &[]);
        assert_eq!(columns.len(), 1);
        assert_eq!(columns.text.get(0), text);
        assert_eq!(columns.stream.get(0), Some("sglang-1"));
        assert_eq!(columns.prefix[4][0], Some(1));
    }

    #[test]
    fn torchrun_tee_label_names_the_stream() {
        let peeled = whole("[default3]:[rank11]: Traceback (most recent call last):");
        assert_eq!(peeled.stream.as_deref(), Some("default3"));
        assert_eq!(peeled.torch_rank, Some(11));
        let peeled = whole("2: [default0]:[rank16]:[W1129 10:00:01.000 x.cpp:1] y");
        assert_eq!(peeled.stream.as_deref(), Some("task=2 default0"));
        assert_eq!(peeled.torch_rank, Some(16));
        let peeled = whole("[default1]:step 3 loss 2.25");
        assert_eq!(peeled.stream.as_deref(), Some("default1"));
        assert_eq!(peeled.body, "step 3 loss 2.25");
    }

    /// WRAP_RE alone on a line (what `peel` does without the hand-read stamps).
    fn by_pattern(text: &str) -> Option<Peeled<'_>> {
        let mut out = Peeled::default();
        let len = if p::WRAP_STARTS_RE.is_match(text) {
            wrapper_fields(text, &mut out)
        } else {
            0
        };
        (len > 0).then_some(out).map(|mut out| {
            out.wrap = Cow::Borrowed(slice_chars(text, 0, Some(len)));
            out
        })
    }

    fn by_hand(text: &str) -> Option<Peeled<'_>> {
        hand_peeled(text).map(|hand| Peeled {
            wrap: Cow::Borrowed(&text[..hand.len]),
            wrap_ts: hand.wrap_ts,
            stream: hand.stream,
            torch_rank: hand.torch_rank,
            ..Peeled::default()
        })
    }

    #[test]
    fn wrappers_read_by_hand_as_the_pattern_reads_them() {
        let cases = [
            (
                "2026-11-29T10:00:00.123456789Z stdout F [2026-11-29 10:00:00 TP0] x",
                true,
            ),
            (
                "2026-11-29T10:00:00+05:30 stderr P host:1:2 [0] NCCL INFO x",
                true,
            ),
            (
                "2026-11-29T10:00:00Z Traceback (most recent call last):",
                true,
            ),
            ("2026-11-29T10:00:00Z stdout F ", true),
            ("2026-11-29T10:00:00Z stdout X y", true),
            ("2026-11-29T10:00:00Z stdout F [rank3]: y", true),
            ("2026-11-29T10:00:00Z stdout F [36m(Actor pid=1) y", false),
            ("2026-11-29T10:00:00Z stdout F node1 [stdout] y", false),
            ("2026-11-29T10:00:00Z stdout F 12:[default0]:y", false),
            ("2026-11-29T10:00:00.1234567890Z stdout F y", false),
            ("2026-11-29T10:00:00.12\u{663}Z stdout F y", false),
            ("2026-11-29T10:00:00+0530 stdout F y", false),
            ("sglang-1  | [2026-11-29 10:00:00 TP0] x", true),
            ("17: [2026-11-29 10:00:00 TP0] x", true),
            ("[pod/sglang-0/sglang] [2026-11-29 10:00:00 TP0] x", true),
            ("[pod/sglang-0/sglang] 2026-11-29T10:00:00Z x", true),
            (
                "sglang-1  | 3: [pod/a/b] 2026-11-29T10:00:00Z stdout F x",
                true,
            ),
            ("sglang-1  | [12] x", false),
            ("sglang-1  | INFO 11-29 10:00:00 x.py:1] y", false),
            ("Traceback (most recent call last):", false),
            (
                "(SchedulerActor pid=4242, ip=10.0.0.3) [2026-11-29 10:00:00 TP0] x",
                true,
            ),
            ("(WorkerDict pid=859188) step 3", true),
            ("(WorkerDict pid=859188) \u{1b}[0m step 3", false),
            (
                "[rank3]:[E1129 10:00:00.123 ProcessGroupNCCL.cpp:1] x",
                true,
            ),
            (
                "[default3]:[rank11]: Traceback (most recent call last):",
                true,
            ),
            ("[default1]:step 3 loss 2.25", true),
            ("[default1]: step 3", true),
            (
                "2: [default0]:[rank16]:[W1129 10:00:01.000 x.cpp:1] y",
                true,
            ),
            (
                "(SchedulerActor pid=4242) [rank0]:[rank1]: [2026-11-29 10:00:00 TP0] x",
                true,
            ),
            ("[pod/a/b] [default2]:x", true),
            ("[rank\u{663}]: x", false),
            ("[default0]:[rank1\u{663}]: x", false),
            (" [rank0]: x", false),
            ("3:[default0]: x", false),
            ("[default]: x", false),
        ];
        for (line, hand) in cases {
            assert_eq!(by_hand(line).is_some(), hand, "{line}");
            if let Some(peeled) = by_hand(line) {
                assert_eq!(Some(peeled), by_pattern(line), "{line}");
            }
        }
        assert_eq!(
            by_hand("2026-11-29T10:00:00.5+01:00 stdout F x").and_then(|w| w.wrap_ts),
            stamp::parse("2026-11-29T09:00:00.5Z", Format::IsoZ)
        );
    }

    proptest::proptest! {
        #[test]
        fn a_stamp_read_by_hand_is_what_the_pattern_reads(
            line in concat!(
                "(2026|2O26|\\x{662}026)-11-29[T ]10:0[0-9]:00(\\.[0-9\\x{663}]{0,11})?",
                "(Z|[+-]0[0-9]:?30|z|)",
                "( (stdout|stderr|stdin) [FPX] ?| )?",
                "(\\[(2|36m|0;1m|rank|default|pod/|1234567m)|host \\[std(out|err)\\] ",
                "|node/3 \\[default1\\]:|12:|1a:|[ (\\x{e9}\\x1b{:]|[a-z0-9._-]{1,4}[:/ \\x{e9}]|)",
                ".{0,4}",
            )
        ) {
            if let Some(peeled) = by_hand(&line) {
                proptest::prop_assert_eq!(Some(peeled), by_pattern(&line), "{:?}", line);
            }
        }

        #[test]
        fn a_line_the_pdsh_check_passes_over_is_no_pdsh_line(
            line in "[a-zé٣_.\\-]{0,6}[:é ]{0,2}(\\[2026-11-29 |\\[rank1\\]:|h:1:2 \\[0\\] |x|)"
        ) {
            if !pdsh_maybe(&line) {
                proptest::prop_assert!(!p::PDSH_RE.is_match(&line), "{:?}", line);
            }
        }

        #[test]
        fn wrappers_read_by_hand_are_what_the_pattern_reads(
            lead in proptest::option::weighted(0.3, "|\\x1b\\[2K|\\r"),
            compose in proptest::option::weighted(0.3, "|sglang-1  \\| |sglang_12 \\| |web\\.app-3   \\| |sglang-x  \\| |\\x{e9}-1  \\| |sglang-1 \\|x|a-1\\| |a-\\x{663} \\| |INFO-1 \\| "),
            task in proptest::option::weighted(0.3, "|17: |123456: |3:|\\x{663}: |12345: "),
            junk in proptest::option::weighted(0.3, "|\\x00|\\x1b\\[0m"),
            viewer in proptest::option::weighted(0.3, "|\\[12\\] |\\[1234567890\\] |\\[\\x{663}\\] |\\[12\\]x"),
            pod in proptest::option::weighted(0.3, "|\\[pod/sglang-0/sglang\\] |\\[pod/a/b/c\\] |\\[pod/x y/z\\] |\\[pod//z\\] |\\[pod/\\x{e9}/z\\] |\\[pod/a/b\\]x|\\[pod/a\\x0b/b\\] |\\[pod/a/b\\x{a0}\\] "),
            stamp in proptest::option::weighted(0.3, concat!(
                "|2026-11-29T10:00:00Z stdout F |2026-11-29T10:00:00\\.5\\+01:00 |2026-11-29 10:00:00\\.123  host ",
                "|\\[2026-11-29T10:00:00\\.000Z\\] |INFO 11-29 10:00:00 x\\.py:1\\] |2026-11-29 10:00:00,123 - a - INFO - ",
                "|1764410400000000000\\t2026-11-29T10:00:00Z\\t|2026-11-29T10:00:00Z|DEBUG |\\[2026-11-29 10:00:00\\] ",
            )),
            after in proptest::option::weighted(0.3, "|\\(A pid=1, ip=10\\.0\\.0\\.1\\) |\\(A_1 pid=1, ip=fe80::1\\)|\\(A pid=1\\)x|\\(A pid=1\\) \\x1b\\[0m|\\(A pid=1\\) \\[36m|\\(A\\x{e9} pid=1\\) |\\(A pid=\\x{663}\\) |\\(A pid=1, ip=a b\\) |\\(A pid=1\\)  |\\(A pid=\\) |\\(A pid=1, ip=\\x{e9}\\) |\\(A pid=1\\)\\[rank0\\]:|\\(A pid=1\\) \\[default0\\]:|node1 \\[stdout\\] |  File|  |   x| \\(A pid=1\\) | \\x1b\\[0m| 3:\\[default0\\]:| h/1 \\[default0\\]:| \\[rank0\\]:| \\[36m\\(A pid=1\\) |\\(Actor pid=3\\) |\\[36m\\(Actor pid=3\\) |\\[default0\\]:|\\[rank2\\]:|0:\\[default1\\]:|host/3 \\[default0\\]:| x"),
            torch in proptest::option::weighted(0.4, concat!(
                "|\\[default0\\]:|\\[default12\\]:\\[rank3\\]:|\\[rank0\\]:\\[rank17\\]: |\\[rank2\\]: ",
                "|\\[default3\\]:\\[rank11\\]:  |\\[default\\]:|\\[default\\x{663}\\]:|\\[rank\\x{663}\\]:",
                "|\\[default0\\]:\\[rankx\\]:|\\[default0\\]:\\[rank1\\x{663}\\]:|\\[rank99999999999\\]:",
                "|\\[default0\\]|\\[rank1\\]|\\[default0\\]: |\\[rank1\\]:\\[default0\\]:|\\[rank\\]:",
                "|\\[default0\\]:\\[rank1\\]:\\[rank2\\]:x|\\[rank-1\\]:|\\[default0\\]:\\[default1\\]:| \\[rank0\\]:",
                "|\\[r|\\[d|\\[default0\\]:\\[r",
            )),
            body in proptest::option::weighted(0.8, "|\\[2026-11-29 10:00:00 TP0\\] x|host:1:2 \\[0\\] NCCL INFO y|Traceback|\\x{e9}|12: x|\\[2026-11-29T10:00:00Z\\] y|[a-z]{1,3}|\\[rank1\\]: y|\\[E1129 10:00:00\\.1 a\\.cpp:1\\] z"),
        ) {
            let line: String = [lead, compose, task, junk, viewer, pod, stamp, after, torch, body]
                .into_iter()
                .flatten()
                .collect();
            if let Some(peeled) = by_hand(&line) {
                proptest::prop_assert_eq!(Some(peeled), by_pattern(&line), "{:?}", line);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn a_docker_envelope_read_by_hand_is_what_the_patterns_read(
            log in "([a-z é\\x{663}]|\\\\[\"\\\\nu]|\\\\\\x{e9}){0,6}(\\\\|\\\\\\n|)",
            end in "\"?",
            keys in proptest::collection::vec(concat!(
                ",\"(time|tim|stream)\":\"",
                "(20[0-9\\x{663}]{2}-11-29T10:00:0[0-9](\\.[0-9\\x{663}]{0,11})?[Z+]?\"?|stdout\")",
            ), 0..3),
        ) {
            let line = format!("{{\"log\":\"{log}{end}{}}}", keys.concat());
            let log_re = p::DOCKER_LOG_RE.captures(&line).and_then(|c| c.get(1)).map(|m| m.as_str());
            proptest::prop_assert_eq!(docker_log(&line), log_re, "{:?}", line);
            proptest::prop_assert_eq!(docker_time(&line), pattern_time(&line), "{:?}", line);
        }
    }

    #[test]
    fn kubectl_prefix_names_the_stream() {
        let peeled = peel("[pod/sglang-0/sglang] [2026-11-29 10:00:00 TP0] x");
        assert_eq!(peeled.stream.as_deref(), Some("pod/sglang-0"));
        assert_eq!(peeled.body, "[2026-11-29 10:00:00 TP0] x");
    }
}
