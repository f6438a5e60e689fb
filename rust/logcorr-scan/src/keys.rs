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
    buffer: Vec<u8>,
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

fn put_i32(buf: &mut Vec<u8>, value: Option<i32>) {
    match value {
        None => buf.push(0),
        Some(v) => {
            buf.push(1);
            buf.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn put_i64(buf: &mut Vec<u8>, value: Option<i64>) {
    match value {
        None => buf.push(0),
        Some(v) => {
            buf.push(1);
            buf.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn put_bool(buf: &mut Vec<u8>, value: Option<bool>) {
    buf.push(match value {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    });
}

/// The key of a part's fields, serialised (equal keys, equal bytes; nulls equal nulls).
pub fn encode(file_id: u32, f: &Fields<'_>, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&file_id.to_le_bytes());
    for value in &f.prefix[..6] {
        put_i32(buf, *value);
    }
    put_str(buf, f.proctitle.as_deref());
    put_str(buf, f.host.as_deref());
    buf.push(f.source as u8);
    buf.push(u8::from(f.main));
    put_i32(buf, f.device_id);
    put_i64(buf, f.link_pid);
    put_i32(buf, f.prefix[6]);
    put_i64(buf, f.pid);
    put_str(buf, f.comm_id.as_deref());
    put_i32(buf, f.comm_rank);
    put_i32(buf, f.comm_nranks);
    put_i32(buf, f.torch_rank);
    put_str(buf, f.pg_desc.as_deref());
    put_i32(buf, f.pg_rank);
    put_i32(buf, f.gloo_rank);
    put_i32(buf, f.gloo_size);
    buf.push(f.role.map_or(0, |r| r as u8 + 1));
    put_bool(buf, f.server_args);
    put_str(buf, f.stream.as_deref());
}

impl Keys {
    /// The number of a part's key, adding it when new (and counting the line).
    pub fn add(&mut self, file_id: u32, line: u32, f: &Fields<'_>) -> KeyId {
        let mut buf = std::mem::take(&mut self.buffer);
        encode(file_id, f, &mut buf);
        let id = match self.index.get(buf.as_slice()).copied() {
            Some(id) => {
                self.counts[id as usize] += 1;
                let first = &mut self.first_line[id as usize];
                *first = (*first).min(line);
                id
            }
            None => {
                let id = self.counts.len() as KeyId;
                self.index.insert(buf.clone().into_boxed_slice(), id);
                self.rows.push(file_id, line, f, None);
                self.counts.push(1);
                self.first_line.push(line);
                id
            }
        };
        self.buffer = buf;
        id
    }

    /// The number of a part's key, which pass 1 added (`buf`: room to write the key in).
    pub fn find(&self, file_id: u32, f: &Fields<'_>, buf: &mut Vec<u8>) -> Option<KeyId> {
        encode(file_id, f, buf);
        self.index.get(buf.as_slice()).copied()
    }

    /// Add the keys of `other` (a later part of the set), their counts and first lines merged;
    /// returns the number here of each of `other`'s keys.
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
