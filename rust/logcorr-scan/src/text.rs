//! String helpers with the semantics the analysis was defined in: slicing counts characters
//! (code points), searching reports byte offsets, integers parse as polars casts them.

/// The byte offset of character `chars` of `s` (its length when `s` is shorter).
#[inline]
pub fn byte_at(s: &str, chars: usize) -> usize {
    if chars >= s.len() {
        // (at most one byte a character: past the end either way when ASCII)
        if s.is_ascii() {
            return s.len();
        }
    } else if s.as_bytes()[..chars].is_ascii() {
        return chars;
    }
    s.char_indices().nth(chars).map_or(s.len(), |(at, _)| at)
}

/// `len` characters of `s` from character `start` (to the end when `len` is None).
#[inline]
pub fn slice_chars(s: &str, start: usize, len: Option<usize>) -> &str {
    let from = byte_at(s, start);
    let rest = &s[from..];
    match len {
        None => rest,
        Some(n) => &rest[..byte_at(rest, n)],
    }
}

/// The number of characters of `s`.
pub fn len_chars(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

use std::sync::{LazyLock, OnceLock};

use memchr::memmem::Finder;

/// A literal searched for in every line: its searcher is built once.
pub struct Literal(LazyLock<Finder<'static>>);

impl Literal {
    pub const fn new(build: fn() -> Finder<'static>) -> Literal {
        Literal(LazyLock::new(build))
    }

    /// The byte offset of its first occurrence in `s`.
    pub fn find(&self, s: &str) -> Option<usize> {
        self.0.find(s.as_bytes())
    }
}

/// A few literals looked for together, in one pass over a text (a packed SIMD searcher; a
/// finder each where the CPU has none): which of them the text holds. No literal of a set
/// may hold another, nor end with the start of another (`LiteralSet::overlaps`): then the
/// searcher's leftmost, non-overlapping matches find each literal a text holds.
pub struct LiteralSet {
    literals: &'static [&'static str],
    searcher: OnceLock<Searcher>,
}

enum Searcher {
    Packed(aho_corasick::packed::Searcher),
    Each(Vec<Finder<'static>>),
}

impl LiteralSet {
    pub const fn new(literals: &'static [&'static str]) -> LiteralSet {
        LiteralSet {
            literals,
            searcher: OnceLock::new(),
        }
    }

    /// Bit `i` set when the text holds literal `i`.
    pub fn held(&self, s: &str) -> u32 {
        let mut held = 0;
        match self.searcher.get_or_init(|| self.build()) {
            Searcher::Packed(searcher) => {
                for found in searcher.find_iter(s.as_bytes()) {
                    held |= 1 << found.pattern().as_usize();
                }
            }
            Searcher::Each(finders) => {
                for (i, finder) in finders.iter().enumerate() {
                    if finder.find(s.as_bytes()).is_some() {
                        held |= 1 << i;
                    }
                }
            }
        }
        held
    }

    /// Literal `i` of the set.
    pub fn literal(&self, i: usize) -> &'static str {
        self.literals[i]
    }

    /// Each occurrence of a literal in `s` (its index, its start), without overlapping, until
    /// `visit` returns false: in the text's order (literal by literal, on a CPU without a
    /// packed searcher).
    pub fn visit(&self, s: &str, mut visit: impl FnMut(usize, usize) -> bool) {
        match self.searcher.get_or_init(|| self.build()) {
            Searcher::Packed(searcher) => {
                for found in searcher.find_iter(s.as_bytes()) {
                    if !visit(found.pattern().as_usize(), found.start()) {
                        return;
                    }
                }
            }
            Searcher::Each(finders) => {
                for (i, finder) in finders.iter().enumerate() {
                    let width = finder.needle().len().max(1);
                    let mut at = 0;
                    while let Some(found) = finder.find(&s.as_bytes()[at..]) {
                        if !visit(i, at + found) {
                            return;
                        }
                        at += found + width;
                    }
                }
            }
        }
    }

    fn build(&self) -> Searcher {
        let packed = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(self.literals)
            .build();
        match packed {
            Some(searcher) if !Self::overlaps(self.literals) => Searcher::Packed(searcher),
            _ => Searcher::Each(self.literals.iter().map(Finder::new).collect()),
        }
    }

    /// Whether a literal holds another or ends with the start of another: a leftmost match
    /// of the one could then hide the other. (A literal that ends with its own start only
    /// hides a second occurrence of itself, which counts as it does for one literal.)
    pub fn overlaps(literals: &[&str]) -> bool {
        literals.iter().enumerate().any(|(i, a)| {
            let a = a.as_bytes();
            literals.iter().enumerate().any(|(j, b)| {
                let b = b.as_bytes();
                i != j
                    && (a.windows(b.len().max(1)).any(|w| w == b)
                        || (1..a.len().min(b.len())).any(|n| a.ends_with(&b[..n])))
            })
        })
    }
}

/// Where the first `] ` (the end of a prefix) stands: each `]` looked at (a line holds
/// few), cheaper on a short line than a substring searcher's set-up.
pub fn close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    memchr::memchr_iter(b']', bytes).find(|&at| bytes.get(at + 1) == Some(&b' '))
}

/// How many times `needle` occurs in `s` without overlapping, counting up to `limit`.
pub fn count_up_to(s: &[u8], needle: &[u8], limit: usize) -> usize {
    let finder = Finder::new(needle);
    let mut at = 0;
    let mut count = 0;
    while count < limit {
        match finder.find(&s[at..]) {
            Some(found) => {
                count += 1;
                at += found + needle.len();
            }
            None => break,
        }
    }
    count
}

/// The byte offset of the first `needle` in `s`.
pub fn find(s: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(s.as_bytes(), needle.as_bytes())
}

/// An integer as a polars cast from text reads it (sign allowed, ASCII digits only, no
/// blanks); None when it does not fit.
pub fn int<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.parse().ok()
}

/// `s` without whitespace at both ends (Unicode White_Space, as polars' `strip_chars`).
pub fn strip(s: &str) -> &str {
    s.trim()
}

/// Whether `s` starts with any of `starts`.
pub fn starts_any(s: &str, starts: &[&str]) -> bool {
    starts.iter().any(|start| s.starts_with(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_set_finds_each_literal_a_text_holds() {
        static SET: LiteralSet = LiteralSet::new(&["hit an exception", "Exception in ", "[20"]);
        assert!(!LiteralSet::overlaps(&[
            "hit an exception",
            "Exception in ",
            "[20"
        ]));
        // (`Exception in NCCL `: a leftmost match of the first would hide the second)
        assert!(LiteralSet::overlaps(&["Exception in ", " NCCL "]));
        assert!(LiteralSet::overlaps(&["abc", "b"]));
        assert_eq!(SET.held("Scheduler hit an exception: x"), 1);
        assert_eq!(SET.held("Exception in thread: hit an exception"), 0b011);
        assert_eq!(SET.held("Exception in [2026 x hit an exception"), 0b111);
        assert_eq!(SET.held("nothing"), 0);
        // (a set whose literals overlap is searched a literal at a time)
        static OVERLAPPING: LiteralSet = LiteralSet::new(&["Exception in ", " NCCL "]);
        assert_eq!(OVERLAPPING.held("Exception in NCCL watchdog"), 0b11);
    }

    #[test]
    fn a_prefix_closes_at_the_first_bracket_and_space() {
        for s in ["", "]", "] ", "a]] b] ", "[TP0]x] y", "é] ", "no close]"] {
            assert_eq!(close(s), find(s, "] "), "{s:?}");
        }
    }

    #[test]
    fn slices_count_characters() {
        assert_eq!(slice_chars("aé b", 3, None), "b");
        assert_eq!(slice_chars("abcdef", 1, Some(2)), "bc");
        assert_eq!(slice_chars("ab", 5, Some(2)), "");
        assert_eq!(slice_chars("é", 0, Some(5)), "é");
        assert_eq!(len_chars("aé"), 2);
    }

    #[test]
    fn counts_stop_at_the_limit() {
        assert_eq!(count_up_to(b" NCCL  NCCL x NCCL ", b" NCCL ", 9), 3);
        assert_eq!(count_up_to(b" NCCL NCCL ", b" NCCL ", 9), 1);
        assert_eq!(count_up_to(b"[20[20[20", b"[20", 2), 2);
        // (as `fast` counts a line's headers: each literal's occurrences without overlapping)
        static HEADERS: LiteralSet = LiteralSet::new(&["[20", " NCCL "]);
        let count = |s: &str| {
            let mut n = [0; 2];
            HEADERS.visit(s, |literal, _| {
                n[literal] += 1;
                true
            });
            n
        };
        assert_eq!(count(" NCCL  NCCL x NCCL "), [0, 3]);
        assert_eq!(count(" NCCL NCCL "), [0, 1]);
        assert_eq!(count("[20[20 NCCL [20"), [3, 1]);
    }

    #[test]
    fn integers_read_as_polars_casts() {
        assert_eq!(int::<i32>("+5"), Some(5));
        assert_eq!(int::<i32>("05"), Some(5));
        assert_eq!(int::<i32>(" 5"), None);
        assert_eq!(int::<i32>(""), None);
        assert_eq!(int::<i32>("99999999999"), None);
        assert_eq!(int::<i32>("٣"), None);
    }
}
