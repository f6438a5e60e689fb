//! Physical lines that hold several records (glued output) are split into parts.
//!
//! A split happens only before a strong header that is not at the start of the body: a SGLang
//! `[YYYY-MM-DD HH:MM:SS(.mmm)?( TOKEN)*] ` prefix, a full NCCL `host:pid:tid [d] NCCL ` token
//! (optionally behind a bare SGLang stamp, which then stays with it), or a torch c10 header
//! behind its `[rankN]:` (`… before timing[rank5]:[E1129 …`). Part 0 keeps the wrapper prefix,
//! so the texts of the parts concatenate to the physical line. A line is cut into at most
//! MAX_PARTS parts: the text after the last cut stays one part, marked `capped`.
//!
//! An NCCL header glued inside a line has no visible start (`…166015g183:161258:166018 [1] NCCL
//! …`): the host run is cut at the longest host the chunk's clean NCCL lines start with, else
//! the part's host is not trusted; a bare `host:pid:tid` right before such a header is a
//! fragment (an NCCL line's start whose message was cut off).

use std::borrow::Cow;

use crate::patterns as p;
use crate::text::{count_up_to, int, len_chars, slice_chars};

/// Marks split points inside a line; lines that already hold it are never split.
pub const SENTINEL: char = '\u{e000}';
pub const MAX_PARTS: usize = 4096;

/// One part of a glued line.
#[derive(Debug, Clone)]
pub struct Part<'a> {
    pub text: Cow<'a, str>,
    pub body: Cow<'a, str>,
    pub torch_rank: Option<i32>,
    pub capped: Option<bool>,
    pub frag: bool,
    pub host_unknown: bool,
}

/// Whether a body may hold a record glued past its first character.
pub fn glued(body: &str, json: bool) -> bool {
    if json || body.contains(SENTINEL) {
        return false;
    }
    let tail = slice_chars(body, 1, None);
    tail.contains("[20") || tail.contains("[rank") || nccl_glue(body)
}

fn nccl_glue(body: &str) -> bool {
    body.contains(" NCCL ")
        && (!p::NCCL_AT_START_RE.is_match(body) || count_up_to(body.as_bytes(), b" NCCL ", 2) > 1)
}

/// The host an NCCL header at the start of a body names (hosts known to the chunk).
pub fn host_at_start(body: &str) -> Option<&str> {
    if !host_may_start(body.as_bytes()) {
        return None;
    }
    p::NCCL_HOST_AT_START_RE
        .captures(body)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// Whether an NCCL host may start `b` (what the pattern needs at least, in ASCII): a first word
/// of host characters that a `:` ends, or a bare SGLang stamp `[YYYY-MM-DD HH:MM:SS(.mmm)?] `
/// before one. A non-ASCII byte where these are read leaves it to the pattern.
fn host_may_start(b: &[u8]) -> bool {
    let host = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'[' | b']');
    let n = b.iter().take_while(|c| host(c)).count();
    let word = b.get(n).is_some_and(|&c| c == b':' || !c.is_ascii());
    let head = &b[..b.len().min(26)];
    let stamp = b.first() == Some(&b'[')
        && (!head.is_ascii()
            || b.get(20) == Some(&b']')
            || (b.get(20) == Some(&b'.') && b.get(24) == Some(&b']')));
    word || stamp
}

/// Split a glued body into parts (`wrap`: the line's wrapper prefix, kept on part 0;
/// `torch_rank`: the line's own; `hosts`: hosts known to the chunk, longest last).
pub fn split<'a>(
    wrap: &str,
    body: &'a str,
    torch_rank: Option<i32>,
    hosts: &[String],
) -> Vec<Part<'a>> {
    let marked = p::SPLIT_RE.replace_all(body, format!("{SENTINEL}${{0}}").as_str());
    let marked = p::TORCH_SPLIT_RE.replace_all(&marked, format!("${{1}}{SENTINEL}${{2}}").as_str());
    let mut pieces: Vec<String> = marked
        .split(SENTINEL)
        .filter(|piece| !piece.is_empty())
        .map(str::to_string)
        .collect();
    let many = pieces.len() > MAX_PARTS;
    if many {
        let rest = pieces.split_off(MAX_PARTS - 1).concat();
        pieces.push(rest);
    }
    let mut parts: Vec<Part<'a>> = pieces
        .into_iter()
        .enumerate()
        .map(|(k, piece)| {
            let later = k > 0;
            let body = if later {
                Cow::Owned(p::TORCH_RANKS_RE.replace(&piece, "").into_owned())
            } else {
                Cow::Owned(piece.clone())
            };
            let rank = if later {
                p::TORCH_RANKS_RE
                    .captures(&piece)
                    .and_then(|c| c.get(1))
                    .and_then(|m| int(m.as_str()))
            } else {
                torch_rank
            };
            let text = if later {
                Cow::Owned(piece)
            } else {
                Cow::Owned(format!("{wrap}{piece}"))
            };
            Part {
                text,
                body,
                torch_rank: rank,
                capped: Some(many && k == MAX_PARTS - 1),
                frag: false,
                host_unknown: false,
            }
        })
        .collect();
    glued_hosts(&mut parts, hosts);
    parts
}

/// Parts after the first that begin with an NCCL header: the start of the part moves to the
/// longest known host that ends the header's host run (the characters before it go to the
/// part before), else the part's host is marked unknown; a bare `host:pid:tid` right before
/// such a header is a fragment.
fn glued_hosts(parts: &mut [Part<'_>], hosts: &[String]) {
    let mut cuts = vec![0usize; parts.len()];
    for (k, part) in parts.iter_mut().enumerate() {
        if k == 0 || !p::NCCL_BARE_START_RE.is_match(&part.body) {
            continue;
        }
        let token = p::TOKEN_BEFORE_COLON_RE
            .captures(&part.body)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_string());
        let Some(token) = token else { continue };
        let found = hosts
            .iter()
            .rev()
            .find(|host| token.ends_with(host.as_str()));
        match found {
            Some(host) => cuts[k] = len_chars(&token) - len_chars(host),
            None => part.host_unknown = true,
        }
    }
    let moved: Vec<String> = parts
        .iter()
        .zip(&cuts)
        .map(|(part, &cut)| slice_chars(&part.body, 0, Some(cut)).to_string())
        .collect();
    for k in 0..parts.len() {
        let give = moved.get(k + 1).map_or("", String::as_str);
        let cut = cuts[k];
        if cut == 0 && give.is_empty() {
            continue;
        }
        let part = &mut parts[k];
        part.text = Cow::Owned(format!("{}{give}", slice_chars(&part.text, cut, None)));
        part.body = Cow::Owned(format!("{}{give}", slice_chars(&part.body, cut, None)));
    }
    for k in 0..parts.len() {
        let followed = parts
            .get(k + 1)
            .is_some_and(|next| p::NCCL_BARE_START_RE.is_match(&next.body));
        parts[k].frag = followed && p::NCCL_FRAGMENT_RE.is_match(&parts[k].body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_body_the_host_check_passes_over_names_no_host(
            body in concat!(
                "(\\[20[0-9\\x{663}]{2}-11-29 10:00:0[0-9](\\.[0-9]{3})?( TP0)?\\] |\\[x\\] |)",
                "([a-z\\[\\]\\x{e9}._-]{0,8}(:[0-9]{1,3}){0,2}( \\[[0-9]\\] )?|x)",
                ".{0,3}",
            )
        ) {
            if !host_may_start(body.as_bytes()) {
                proptest::prop_assert!(!p::NCCL_HOST_AT_START_RE.is_match(&body), "{:?}", body);
            }
        }
    }

    #[test]
    fn a_glued_sglang_line_is_two_parts() {
        let body = "[2026-11-29 10:00:00 TP0] a[2026-11-29 10:00:01 TP1] b";
        assert!(glued(body, false));
        let parts = split("", body, None, &[]);
        let texts: Vec<&str> = parts.iter().map(|p| p.text.as_ref()).collect();
        assert_eq!(
            texts,
            ["[2026-11-29 10:00:00 TP0] a", "[2026-11-29 10:00:01 TP1] b"]
        );
    }

    #[test]
    fn a_glued_nccl_host_is_cut_at_a_known_host() {
        let body = "g183:1:2 [0] NCCL INFO x 166015g183:161258:166018 [1] NCCL INFO y";
        let parts = split("", body, None, &["g183".to_string()]);
        assert_eq!(parts[1].text, "g183:161258:166018 [1] NCCL INFO y");
        assert_eq!(parts[0].text, "g183:1:2 [0] NCCL INFO x 166015");
    }
}
