//! Key rows: the columns attribution reads of a line (prefix ranks, host, PID, device,
//! communicator, torch rank, PG, role, process title, stream, …). Every whole-set rule depends
//! on a line only through them, so the set's distinct key rows (a few thousand, whatever the
//! number of lines) are resolved once, and each line is joined back by its key's number.

use std::collections::HashMap;

use crate::model::{Columns, StrColumn};

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
    index: HashMap<Box<[u8]>, KeyId>,
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

/// The key of row `row` of `c`, serialised (equal keys, equal bytes; nulls equal nulls).
pub fn encode(c: &Columns, row: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&c.file_id[row].to_le_bytes());
    for column in &c.prefix[..6] {
        put_i32(buf, column[row]);
    }
    put_str(buf, c.proctitle.get(row));
    put_str(buf, c.host.get(row));
    buf.push(c.source[row]);
    buf.push(u8::from(c.main[row]));
    put_i32(buf, c.device_id[row]);
    put_i64(buf, c.link_pid[row]);
    put_i32(buf, c.prefix[6][row]);
    put_i64(buf, c.pid[row]);
    put_str(buf, c.comm_id.get(row));
    put_i32(buf, c.comm_rank[row]);
    put_i32(buf, c.comm_nranks[row]);
    put_i32(buf, c.torch_rank[row]);
    put_str(buf, c.pg_desc.get(row));
    put_i32(buf, c.pg_rank[row]);
    put_i32(buf, c.gloo_rank[row]);
    put_i32(buf, c.gloo_size[row]);
    buf.push(c.role[row].map_or(0, |r| r + 1));
    put_bool(buf, c.server_args[row]);
    put_str(buf, c.stream.get(row));
}

impl Keys {
    /// The number of row `row`'s key, adding it when new (and counting the line).
    pub fn add(&mut self, c: &Columns, row: usize) -> KeyId {
        let mut buf = std::mem::take(&mut self.buffer);
        encode(c, row, &mut buf);
        let id = match self.index.get(buf.as_slice()) {
            Some(&id) => {
                self.counts[id as usize] += 1;
                let first = &mut self.first_line[id as usize];
                *first = (*first).min(c.line[row]);
                id
            }
            None => {
                let id = self.counts.len() as KeyId;
                self.index.insert(buf.clone().into_boxed_slice(), id);
                copy_key(c, row, &mut self.rows);
                self.counts.push(1);
                self.first_line.push(c.line[row]);
                id
            }
        };
        self.buffer = buf;
        id
    }

    /// The number of row `row`'s key, which must have been added.
    pub fn find(&mut self, c: &Columns, row: usize) -> Option<KeyId> {
        let mut buf = std::mem::take(&mut self.buffer);
        encode(c, row, &mut buf);
        let id = self.index.get(buf.as_slice()).copied();
        self.buffer = buf;
        id
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Add the keys of `other` (another part of the set), counts and first lines merged;
    /// returns the new number of each of `other`'s keys.
    pub fn merge(&mut self, other: &Keys) -> Vec<KeyId> {
        let mut mapping = Vec::with_capacity(other.len());
        let mut buf = Vec::new();
        for id in 0..other.len() {
            encode(&other.rows, id, &mut buf);
            let mine = match self.index.get(buf.as_slice()) {
                Some(&mine) => {
                    self.counts[mine as usize] += other.counts[id];
                    let first = &mut self.first_line[mine as usize];
                    *first = (*first).min(other.first_line[id]);
                    mine
                }
                None => {
                    let mine = self.counts.len() as KeyId;
                    self.index.insert(buf.clone().into_boxed_slice(), mine);
                    copy_key(&other.rows, id, &mut self.rows);
                    self.counts.push(other.counts[id]);
                    self.first_line.push(other.first_line[id]);
                    mine
                }
            };
            mapping.push(mine);
        }
        mapping
    }
}

fn copy_str(from: &StrColumn, row: usize, to: &mut StrColumn) {
    to.push(from.get(row));
}

/// Append row `row`'s key columns (only those) to `to`.
fn copy_key(c: &Columns, row: usize, to: &mut Columns) {
    to.file_id.push(c.file_id[row]);
    to.line.push(c.line[row]);
    for (i, column) in c.prefix.iter().enumerate() {
        to.prefix[i].push(column[row]);
    }
    copy_str(&c.proctitle, row, &mut to.proctitle);
    copy_str(&c.host, row, &mut to.host);
    to.source.push(c.source[row]);
    to.main.push(c.main[row]);
    to.device_id.push(c.device_id[row]);
    to.link_pid.push(c.link_pid[row]);
    to.pid.push(c.pid[row]);
    copy_str(&c.comm_id, row, &mut to.comm_id);
    to.comm_rank.push(c.comm_rank[row]);
    to.comm_nranks.push(c.comm_nranks[row]);
    to.torch_rank.push(c.torch_rank[row]);
    copy_str(&c.pg_desc, row, &mut to.pg_desc);
    to.pg_rank.push(c.pg_rank[row]);
    to.gloo_rank.push(c.gloo_rank[row]);
    to.gloo_size.push(c.gloo_size[row]);
    to.role.push(c.role[row]);
    to.server_args.push(c.server_args[row]);
    copy_str(&c.stream, row, &mut to.stream);
}
