//! Key rows: the columns attribution reads of a line (prefix ranks, host, PID, device,
//! communicator, torch rank, PG, role, process title, stream, …). Every whole-set rule depends
//! on a line only through them, so the set's distinct key rows (a few thousand, whatever the
//! number of lines) are resolved once, and each line is joined back by its key's number.

use rustc_hash::FxHashMap;

use crate::model::{Columns, Fields};

/// The number of a distinct key row.
pub type KeyId = u32;

/// The key columns, in the order of `resolve.KEY_COLUMNS`.
pub const KEY_COLUMNS: [&str; 26] = [
    "file_id",
    "p_dp",
    "p_pp",
    "p_attn_cp",
    "p_moe_dp",
    "p_tp",
    "p_ep",
    "proctitle",
    "host",
    "source",
    "_main",
    "device_id",
    "link_pid",
    "p_pid",
    "pid",
    "comm_id",
    "comm_rank",
    "comm_nranks",
    "torch_rank",
    "pg_desc",
    "pg_rank",
    "gloo_rank",
    "gloo_size",
    "role",
    "server_args",
    "stream",
];

/// Distinct key rows, numbered in the order they are first met, with their line counts and
/// first line.
#[derive(Default)]
pub struct Keys {
    index: FxHashMap<Box<[u8]>, KeyId>,
    /// Per key: the row it was first met in (a copy of its key columns) …
    pub rows: Columns,
    /// … its number of lines and its smallest line number.
    pub counts: Vec<u64>,
    pub first_line: Vec<u32>,
    last: Last,
}

/// The last key looked up, serialised, and its number: a file's lines mostly repeat the key
/// of the line before, which is then told by comparing bytes, not by hashing them.
#[derive(Default)]
pub struct Last {
    buf: Vec<u8>,
    key: Vec<u8>,
    id: Option<KeyId>,
}

impl Last {
    /// The number `lookup` gives the key of a part's fields (encoded into `buf`), unless it is
    /// the last key's.
    fn id(
        &mut self,
        file_id: u32,
        f: &Fields<'_>,
        lookup: impl FnOnce(&[u8]) -> Option<KeyId>,
    ) -> Option<KeyId> {
        encode(file_id, f, &mut self.buf);
        if self.id.is_some() && self.buf == self.key {
            return self.id;
        }
        std::mem::swap(&mut self.buf, &mut self.key);
        self.id = lookup(&self.key);
        self.id
    }
}

fn put_str(buf: &mut Vec<u8>, value: Option<&str>) {
    match value {
        None => buf.push(0),
        Some(v) => {
            buf.push(1);
            buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
            buf.extend_from_slice(v.as_bytes());
        }
    }
}

/// The bytes of a key's numbers: file; a mask of the optional numbers present (bit i);
/// source, main, role, server_args; then each optional number in a fixed place (0 when
/// absent): 7 prefix ranks and the device (bits 0-7), link PID and PID (8-9), and 6 group
/// ranks and sizes (10-15).
const NUMBERS: usize = 4 + 2 + 4 + 8 * 4 + 2 * 8 + 6 * 4;

/// The key of a part's fields, serialised (equal keys, equal bytes; nulls equal nulls): its
/// numbers in fixed places, then its texts, each a tag and, when present, its length and
/// bytes.
pub fn encode(file_id: u32, f: &Fields<'_>, buf: &mut Vec<u8>) {
    let mut numbers = [0u8; NUMBERS];
    let mut mask = 0u16;
    numbers[0..4].copy_from_slice(&file_id.to_le_bytes());
    let server_args = match f.server_args {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    numbers[6..10].copy_from_slice(&[
        f.source as u8,
        u8::from(f.main),
        f.role.map_or(0, |r| r as u8 + 1),
        server_args,
    ]);
    // (constant places: the loops unroll and no place is checked at run time)
    let small = [
        f.prefix[0],
        f.prefix[1],
        f.prefix[2],
        f.prefix[3],
        f.prefix[4],
        f.prefix[5],
        f.prefix[6],
        f.device_id,
    ];
    for (i, value) in small.into_iter().enumerate() {
        if let Some(value) = value {
            mask |= 1 << i;
            numbers[10 + 4 * i..14 + 4 * i].copy_from_slice(&value.to_le_bytes());
        }
    }
    for (i, value) in [f.link_pid, f.pid].into_iter().enumerate() {
        if let Some(value) = value {
            mask |= 1 << (8 + i);
            numbers[42 + 8 * i..50 + 8 * i].copy_from_slice(&value.to_le_bytes());
        }
    }
    let groups = [
        f.comm_rank,
        f.comm_nranks,
        f.torch_rank,
        f.pg_rank,
        f.gloo_rank,
        f.gloo_size,
    ];
    for (i, value) in groups.into_iter().enumerate() {
        if let Some(value) = value {
            mask |= 1 << (10 + i);
            numbers[58 + 4 * i..62 + 4 * i].copy_from_slice(&value.to_le_bytes());
        }
    }
    numbers[4..6].copy_from_slice(&mask.to_le_bytes());
    buf.clear();
    buf.extend_from_slice(&numbers);
    put_str(buf, f.proctitle.as_deref());
    put_str(buf, f.host.as_deref());
    put_str(buf, f.comm_id.as_deref());
    put_str(buf, f.pg_desc.as_deref());
    put_str(buf, f.stream.as_deref());
}

impl Keys {
    /// The number of a part's key, adding it when new (and counting the line).
    pub fn add(&mut self, file_id: u32, line: u32, f: &Fields<'_>) -> KeyId {
        let mut last = std::mem::take(&mut self.last);
        let id = last
            .id(file_id, f, |key| {
                Some(self.index.get(key).copied().unwrap_or_else(|| {
                    let id = self.counts.len() as KeyId;
                    self.index.insert(key.into(), id);
                    self.rows.push(file_id, line, f, None);
                    self.rows.finish(); // (read as it grows)
                    self.counts.push(0);
                    self.first_line.push(line);
                    id
                }))
            })
            .expect("a key row");
        self.last = last;
        self.counts[id as usize] += 1;
        let first = &mut self.first_line[id as usize];
        *first = (*first).min(line);
        id
    }

    /// The number of a part's key, which pass 1 added (`last`: the last key looked up).
    pub fn find(&self, file_id: u32, f: &Fields<'_>, last: &mut Last) -> Option<KeyId> {
        last.id(file_id, f, |key| self.index.get(key).copied())
    }

    /// Add the keys of `other` (a later part of the set), their counts and first lines merged;
    /// returns the number here of each of `other`'s keys.
    // (once a chunk: out of line, so that a profile names the thread that runs it;
    // benchmarks/instructions.py)
    #[inline(never)]
    pub fn merge(&mut self, other: &Keys) -> Vec<KeyId> {
        let mut buf = Vec::new();
        (0..other.len())
            .map(|id| {
                let f = other.rows.fields(id);
                encode(other.rows.file_id[id], &f, &mut buf);
                match self.index.get(buf.as_slice()).copied() {
                    Some(mine) => {
                        self.counts[mine as usize] += other.counts[id];
                        let first = &mut self.first_line[mine as usize];
                        *first = (*first).min(other.first_line[id]);
                        mine
                    }
                    None => {
                        let mine = self.counts.len() as KeyId;
                        self.index.insert(buf.clone().into_boxed_slice(), mine);
                        self.rows
                            .push(other.rows.file_id[id], other.rows.line[id], &f, None);
                        self.rows.finish();
                        self.counts.push(other.counts[id]);
                        self.first_line.push(other.first_line[id]);
                        mine
                    }
                }
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn fields(host: &str, pid: i64) -> Fields<'static> {
        Fields {
            host: Some(Cow::Owned(host.to_string())),
            pid: Some(pid),
            ..Fields::default()
        }
    }

    #[test]
    fn keys_are_equal_bytes_exactly_when_their_fields_are_equal() {
        let base = fields("node0", 7);
        let variants: Vec<(u32, Fields<'static>)> = vec![
            (0, base.clone()),
            (1, base.clone()),
            (
                0,
                Fields {
                    pid: None,
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    pid: Some(0),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    device_id: Some(7),
                    pid: None,
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    link_pid: Some(7),
                    pid: None,
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    prefix: [None, None, None, None, None, None, Some(0)],
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    prefix: [Some(0), None, None, None, None, None, None],
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    host: None,
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    host: Some(Cow::Borrowed("")),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    host: Some(Cow::Borrowed("node")),
                    comm_id: Some(Cow::Borrowed("0")),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    host: Some(Cow::Borrowed("node0")),
                    comm_id: Some(Cow::Borrowed("")),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    gloo_size: Some(1),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    gloo_rank: Some(1),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    server_args: Some(false),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    server_args: Some(true),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    main: true,
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    role: Some(crate::model::Role::Scheduler),
                    ..base.clone()
                },
            ),
            (
                0,
                Fields {
                    stream: Some(Cow::Borrowed("node0")),
                    ..base.clone()
                },
            ),
        ];
        let encoded: Vec<Vec<u8>> = variants
            .iter()
            .map(|(file, f)| {
                let mut buf = vec![9; 3];
                encode(*file, f, &mut buf);
                buf
            })
            .collect();
        for (i, a) in encoded.iter().enumerate() {
            for (j, b) in encoded.iter().enumerate() {
                assert_eq!(a == b, i == j, "{i} {j}");
            }
        }
        // (fields that are no part of a key leave it as it is)
        let mut again = Vec::new();
        let other = Fields {
            ts: Some(5),
            text: Cow::Borrowed("x"),
            ..base.clone()
        };
        encode(0, &other, &mut again);
        assert_eq!(again, encoded[0]);
    }

    #[test]
    fn a_repeated_key_and_a_changed_one_get_their_own_numbers_and_counts() {
        let (a, b, c) = (fields("node0", 7), fields("node0", 8), fields("node1", 7));
        let mut keys = Keys::default();
        let order = [
            (0, &a),
            (0, &a),
            (0, &b),
            (0, &a),
            (1, &a),
            (1, &a),
            (0, &c),
        ];
        let ids: Vec<KeyId> = order
            .iter()
            .enumerate()
            .map(|(line, (file, f))| keys.add(*file, 10 - line as u32, f))
            .collect();
        // (the same fields in another file are another key)
        assert_eq!(ids, [0, 0, 1, 0, 2, 2, 3]);
        assert_eq!(keys.counts, [3, 1, 2, 1]);
        assert_eq!(keys.first_line, [7, 8, 5, 4]);
        let mut last = Last::default();
        let found: Vec<Option<KeyId>> = order
            .iter()
            .chain([(2, &a), (2, &a), (0, &a)].iter())
            .map(|(file, f)| keys.find(*file, f, &mut last))
            .collect();
        assert_eq!(
            found,
            [0, 0, 1, 0, 2, 2, 3]
                .map(Some)
                .into_iter()
                .chain([None, None, Some(0)])
                .collect::<Vec<_>>()
        );
    }
}
