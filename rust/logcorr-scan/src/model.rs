//! What the scanner says of each record part: the fields a line carries (`Fields`), and the
//! columns a chunk of them is gathered into (`Columns`), in the order of the parsed schema.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// A line family (the `source` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Source {
    Sglang,
    Nccl,
    Torch,
    Glog,
    Traceback,
    Faulthandler,
    Cpp,
    Pyspy,
    Uvicorn,
    Tqdm,
    Cann,
    Gloo,
    Router,
    Ucx,
    /// bash reporting a job it ran (`… Killed   python …`)
    Shell,
    #[default]
    Other,
}

impl Source {
    pub const ALL: [Source; 16] = [
        Source::Sglang,
        Source::Nccl,
        Source::Torch,
        Source::Glog,
        Source::Traceback,
        Source::Faulthandler,
        Source::Cpp,
        Source::Pyspy,
        Source::Uvicorn,
        Source::Tqdm,
        Source::Cann,
        Source::Gloo,
        Source::Router,
        Source::Ucx,
        Source::Shell,
        Source::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Source::Sglang => "sglang",
            Source::Nccl => "nccl",
            Source::Torch => "torch",
            Source::Glog => "glog",
            Source::Traceback => "traceback",
            Source::Faulthandler => "faulthandler",
            Source::Cpp => "cpp",
            Source::Pyspy => "pyspy",
            Source::Uvicorn => "uvicorn",
            Source::Tqdm => "tqdm",
            Source::Cann => "cann",
            Source::Gloo => "gloo",
            Source::Router => "router",
            Source::Ucx => "ucx",
            Source::Shell => "shell",
            Source::Other => "other",
        }
    }
}

/// A process role a line proves (the `role` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Scheduler,
    Main,
    Detokenizer,
    DpController,
    TokenizerWorker,
    Router,
    Encoder,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Scheduler => "scheduler",
            Role::Main => "main",
            Role::Detokenizer => "detokenizer",
            Role::DpController => "dp_controller",
            Role::TokenizerWorker => "tokenizer_worker",
            Role::Router => "router",
            Role::Encoder => "encoder",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Some(match name {
            "scheduler" => Role::Scheduler,
            "main" => Role::Main,
            "detokenizer" => Role::Detokenizer,
            "dp_controller" => Role::DpController,
            "tokenizer_worker" => Role::TokenizerWorker,
            "router" => Role::Router,
            "encoder" => Role::Encoder,
            _ => return None,
        })
    }
}

/// The SGLang prefix tokens, in the order of their columns (`p_dp` … `p_pid`).
pub const PREFIX_KEYS: [&str; 7] = ["DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "PID"];

/// Everything one record part says about itself. Strings borrow from the line where they can.
#[derive(Clone, Debug, Default)]
pub struct Fields<'a> {
    pub part: u16,
    pub text: Cow<'a, str>,
    pub msg: Option<Cow<'a, str>>,
    pub source: Source,
    pub role: Option<Role>,
    pub starts_record: Option<bool>,
    pub ts: Option<i64>,
    pub ts_has_date: Option<bool>,
    pub ts_has_year: Option<bool>,
    pub wrap_ts: Option<i64>,
    pub stream: Option<Cow<'a, str>>,
    pub host: Option<Cow<'a, str>>,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub device_id: Option<i32>,
    pub prefix: [Option<i32>; 7],
    pub torch_rank: Option<i32>,
    pub pg_id: Option<i32>,
    pub pg_guid: Option<Cow<'a, str>>,
    pub pg_desc: Option<Cow<'a, str>>,
    pub pg_rank: Option<i32>,
    pub seq: Option<i64>,
    pub op: Option<Cow<'a, str>>,
    pub last_enqueued: Option<i64>,
    pub last_completed: Option<i64>,
    pub comm: Option<Cow<'a, str>>,
    pub comm_id: Option<Cow<'a, str>>,
    pub comm_rank: Option<i32>,
    pub comm_nranks: Option<i32>,
    pub nccl_phase: Option<Cow<'a, str>>,
    pub gloo_rank: Option<i32>,
    pub gloo_size: Option<i32>,
    pub link_pid: Option<i64>,
    pub proctitle: Option<Cow<'a, str>>,
    pub server_args: Option<bool>,
    pub capped: Option<bool>,
    /// An NCCL line of the process's main thread (tid == pid).
    pub main: bool,
    /// The line opens an exception record (`… hit an exception`, `Traceback …`).
    pub exc: bool,
}

/// A column of optional strings: their text one after the other (a `String`, so a value is
/// read back as a slice, not checked for UTF-8 again).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct StrColumn {
    pub data: String,
    /// (offset, length) into `data`; None for a null.
    pub spans: Vec<Option<(u32, u32)>>,
}

impl StrColumn {
    /// `value` at row `row` of a column that most rows have no value in: the rows before it
    /// that had none are filled in first (the rest by `Columns::finish`).
    #[inline]
    pub fn put(&mut self, row: usize, value: Option<&str>) {
        if let Some(value) = value {
            debug_assert!(self.spans.len() <= row);
            self.spans.resize(row, None);
            self.push(Some(value));
        }
    }

    pub fn push(&mut self, value: Option<&str>) {
        self.spans.push(value.map(|v| {
            let at = self.data.len() as u32;
            self.data.push_str(v);
            (at, v.len() as u32)
        }));
    }

    #[inline]
    pub fn get(&self, row: usize) -> Option<&str> {
        self.spans[row].map(|(at, len)| &self.data[at as usize..(at + len) as usize])
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// The text of each part: a line as read is a span of the chunk's decoded blocks (no copy,
/// and none again when the column goes to polars); a part of a glued line, or text given
/// without blocks, is copied into `extra`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct TextColumn {
    /// The chunk's decoded blocks (each a file's consecutive lines).
    pub blocks: Vec<String>,
    /// Texts that are not a line as read.
    pub extra: String,
    /// (buffer, offset, length): buffer `i` is block `i`, `u32::MAX` the extra.
    pub spans: Vec<(u32, u32, u32)>,
}

/// Where a line stands in its chunk's blocks (block, byte offset); NOWHERE for a line given
/// without blocks.
pub const NOWHERE: (u32, u32) = (u32::MAX, 0);

impl TextColumn {
    pub fn push(&mut self, text: &str, at: Option<(u32, u32)>) {
        match at {
            Some((block, offset)) if block != NOWHERE.0 => {
                self.spans.push((block, offset, text.len() as u32));
            }
            _ => {
                let offset = self.extra.len() as u32;
                self.extra.push_str(text);
                self.spans.push((u32::MAX, offset, text.len() as u32));
            }
        }
    }

    #[inline]
    pub fn get(&self, row: usize) -> &str {
        let (buffer, offset, len) = self.spans[row];
        let source = if buffer == u32::MAX {
            &self.extra
        } else {
            &self.blocks[buffer as usize]
        };
        &source[offset as usize..(offset + len) as usize]
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// `value` at row `row` of a column that most rows have no value in (`StrColumn::put`).
#[inline]
pub fn put<T: Copy>(column: &mut Vec<Option<T>>, row: usize, value: Option<T>) {
    if let Some(value) = value {
        debug_assert!(column.len() <= row);
        column.resize(row, None);
        column.push(Some(value));
    }
}

/// The record parts of a chunk, column by column.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Columns {
    pub file_id: Vec<u32>,
    pub line: Vec<u32>,
    pub part: Vec<u16>,
    pub text: TextColumn,
    pub msg: StrColumn,
    pub source: Vec<u8>,
    pub role: Vec<Option<u8>>,
    pub starts_record: Vec<Option<bool>>,
    pub ts: Vec<Option<i64>>,
    pub ts_has_date: Vec<Option<bool>>,
    pub ts_has_year: Vec<Option<bool>>,
    pub wrap_ts: Vec<Option<i64>>,
    pub stream: StrColumn,
    pub host: StrColumn,
    pub pid: Vec<Option<i64>>,
    pub tid: Vec<Option<i64>>,
    pub device_id: Vec<Option<i32>>,
    pub prefix: [Vec<Option<i32>>; 7],
    pub torch_rank: Vec<Option<i32>>,
    pub pg_id: Vec<Option<i32>>,
    pub pg_guid: StrColumn,
    pub pg_desc: StrColumn,
    pub pg_rank: Vec<Option<i32>>,
    pub seq: Vec<Option<i64>>,
    pub op: StrColumn,
    pub last_enqueued: Vec<Option<i64>>,
    pub last_completed: Vec<Option<i64>>,
    pub comm: StrColumn,
    pub comm_id: StrColumn,
    pub comm_rank: Vec<Option<i32>>,
    pub comm_nranks: Vec<Option<i32>>,
    pub nccl_phase: StrColumn,
    pub gloo_rank: Vec<Option<i32>>,
    pub gloo_size: Vec<Option<i32>>,
    pub link_pid: Vec<Option<i64>>,
    pub proctitle: StrColumn,
    pub server_args: Vec<Option<bool>>,
    pub capped: Vec<Option<bool>>,
    pub main: Vec<bool>,
    pub exc: Vec<bool>,
}

/// The role codes of `Columns::role` (index + 1 of this list... as stored: the index).
pub const ROLES: [Role; 7] = [
    Role::Scheduler,
    Role::Main,
    Role::Detokenizer,
    Role::DpController,
    Role::TokenizerWorker,
    Role::Router,
    Role::Encoder,
];

/// A source's code in `Columns::source` (its place in `Source::ALL`).
pub fn source_code(source: Source) -> u8 {
    Source::ALL
        .iter()
        .position(|s| *s == source)
        .expect("a source") as u8
}

/// A role's code in `Columns::role` (its place in `ROLES`).
pub fn role_code(role: Role) -> u8 {
    ROLES.iter().position(|r| *r == role).expect("a role") as u8
}

impl Columns {
    /// Room for `rows` more rows in every column (a chunk's columns grow once, not by doubling).
    pub fn reserve(&mut self, rows: usize) {
        self.file_id.reserve(rows);
        self.line.reserve(rows);
        self.part.reserve(rows);
        self.text.spans.reserve(rows);
        self.msg.spans.reserve(rows);
        self.source.reserve(rows);
        self.role.reserve(rows);
        self.starts_record.reserve(rows);
        self.ts.reserve(rows);
        self.ts_has_date.reserve(rows);
        self.ts_has_year.reserve(rows);
        self.wrap_ts.reserve(rows);
        self.stream.spans.reserve(rows);
        self.host.spans.reserve(rows);
        self.pid.reserve(rows);
        self.tid.reserve(rows);
        self.device_id.reserve(rows);
        for column in &mut self.prefix {
            column.reserve(rows);
        }
        self.torch_rank.reserve(rows);
        self.pg_id.reserve(rows);
        self.pg_guid.spans.reserve(rows);
        self.pg_desc.spans.reserve(rows);
        self.pg_rank.reserve(rows);
        self.seq.reserve(rows);
        self.op.spans.reserve(rows);
        self.last_enqueued.reserve(rows);
        self.last_completed.reserve(rows);
        self.comm.spans.reserve(rows);
        self.comm_id.spans.reserve(rows);
        self.comm_rank.reserve(rows);
        self.comm_nranks.reserve(rows);
        self.nccl_phase.spans.reserve(rows);
        self.gloo_rank.reserve(rows);
        self.gloo_size.reserve(rows);
        self.link_pid.reserve(rows);
        self.proctitle.spans.reserve(rows);
        self.server_args.reserve(rows);
        self.capped.reserve(rows);
        self.main.reserve(rows);
        self.exc.reserve(rows);
    }

    /// Row `row`'s fields (borrowing the columns' strings).
    pub fn fields(&self, row: usize) -> Fields<'_> {
        fn s(c: &StrColumn, row: usize) -> Option<Cow<'_, str>> {
            c.get(row).map(Cow::Borrowed)
        }
        Fields {
            part: self.part[row],
            text: Cow::Borrowed(self.text.get(row)),
            msg: s(&self.msg, row),
            source: Source::ALL[self.source[row] as usize],
            role: self.role[row].map(|r| ROLES[r as usize]),
            starts_record: self.starts_record[row],
            ts: self.ts[row],
            ts_has_date: self.ts_has_date[row],
            ts_has_year: self.ts_has_year[row],
            wrap_ts: self.wrap_ts[row],
            stream: s(&self.stream, row),
            host: s(&self.host, row),
            pid: self.pid[row],
            tid: self.tid[row],
            device_id: self.device_id[row],
            prefix: std::array::from_fn(|i| self.prefix[i][row]),
            torch_rank: self.torch_rank[row],
            pg_id: self.pg_id[row],
            pg_guid: s(&self.pg_guid, row),
            pg_desc: s(&self.pg_desc, row),
            pg_rank: self.pg_rank[row],
            seq: self.seq[row],
            op: s(&self.op, row),
            last_enqueued: self.last_enqueued[row],
            last_completed: self.last_completed[row],
            comm: s(&self.comm, row),
            comm_id: s(&self.comm_id, row),
            comm_rank: self.comm_rank[row],
            comm_nranks: self.comm_nranks[row],
            nccl_phase: s(&self.nccl_phase, row),
            gloo_rank: self.gloo_rank[row],
            gloo_size: self.gloo_size[row],
            link_pid: self.link_pid[row],
            proctitle: s(&self.proctitle, row),
            server_args: self.server_args[row],
            capped: self.capped[row],
            main: self.main[row],
            exc: self.exc[row],
        }
    }

    /// The rows `rows` of these columns (their texts copied).
    pub fn select(&self, rows: &[usize]) -> Columns {
        let mut out = Columns::default();
        out.reserve(rows.len());
        for &row in rows {
            out.push(self.file_id[row], self.line[row], &self.fields(row), None);
        }
        out.finish();
        out
    }

    pub fn len(&self) -> usize {
        self.file_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file_id.is_empty()
    }

    /// Append one part of physical line `line` of file `file_id` (`at`: where the line stands
    /// in the chunk's blocks, when the part's text is the whole line as read).
    ///
    /// The columns of fields that few lines have grow only when a part has a value: a
    /// `Columns` is whole (every column `len` rows) once `finish` has filled in the rest.
    pub fn push(&mut self, file_id: u32, line: u32, f: &Fields<'_>, at: Option<(u32, u32)>) {
        let row = self.file_id.len();
        self.file_id.push(file_id);
        self.line.push(line);
        self.part.push(f.part);
        self.text.push(&f.text, at);
        self.msg.put(row, f.msg.as_deref());
        self.source.push(source_code(f.source));
        self.role.push(f.role.map(role_code));
        self.starts_record.push(f.starts_record);
        self.ts.push(f.ts);
        self.ts_has_date.push(f.ts_has_date);
        self.ts_has_year.push(f.ts_has_year);
        put(&mut self.wrap_ts, row, f.wrap_ts);
        self.stream.put(row, f.stream.as_deref());
        self.host.push(f.host.as_deref());
        self.pid.push(f.pid);
        self.tid.push(f.tid);
        self.device_id.push(f.device_id);
        for (column, value) in self.prefix.iter_mut().zip(f.prefix) {
            column.push(value);
        }
        put(&mut self.torch_rank, row, f.torch_rank);
        put(&mut self.pg_id, row, f.pg_id);
        self.pg_guid.put(row, f.pg_guid.as_deref());
        self.pg_desc.put(row, f.pg_desc.as_deref());
        put(&mut self.pg_rank, row, f.pg_rank);
        put(&mut self.seq, row, f.seq);
        self.op.put(row, f.op.as_deref());
        put(&mut self.last_enqueued, row, f.last_enqueued);
        put(&mut self.last_completed, row, f.last_completed);
        self.comm.put(row, f.comm.as_deref());
        self.comm_id.put(row, f.comm_id.as_deref());
        put(&mut self.comm_rank, row, f.comm_rank);
        put(&mut self.comm_nranks, row, f.comm_nranks);
        self.nccl_phase.put(row, f.nccl_phase.as_deref());
        put(&mut self.gloo_rank, row, f.gloo_rank);
        put(&mut self.gloo_size, row, f.gloo_size);
        put(&mut self.link_pid, row, f.link_pid);
        self.proctitle.put(row, f.proctitle.as_deref());
        put(&mut self.server_args, row, f.server_args);
        put(&mut self.capped, row, f.capped);
        self.main.push(f.main);
        self.exc.push(f.exc);
    }

    /// The rows of the columns of fields that few lines have filled in after the last
    /// value (see `push`): to be called once every part was pushed, before any row is read.
    pub fn finish(&mut self) {
        let rows = self.len();
        self.torch_rank.resize(rows, None);
        self.pg_id.resize(rows, None);
        self.pg_rank.resize(rows, None);
        self.seq.resize(rows, None);
        self.last_enqueued.resize(rows, None);
        self.last_completed.resize(rows, None);
        self.comm_rank.resize(rows, None);
        self.comm_nranks.resize(rows, None);
        self.gloo_rank.resize(rows, None);
        self.gloo_size.resize(rows, None);
        self.link_pid.resize(rows, None);
        self.server_args.resize(rows, None);
        self.capped.resize(rows, None);
        self.wrap_ts.resize(rows, None);
        self.msg.spans.resize(rows, None);
        self.stream.spans.resize(rows, None);
        self.pg_guid.spans.resize(rows, None);
        self.pg_desc.spans.resize(rows, None);
        self.op.spans.resize(rows, None);
        self.comm.spans.resize(rows, None);
        self.comm_id.spans.resize(rows, None);
        self.nccl_phase.spans.resize(rows, None);
        self.proctitle.spans.resize(rows, None);
    }
}

#[cfg(test)]
mod column_tests {
    use std::borrow::Cow;

    use super::{Columns, Fields};

    #[test]
    fn fields_few_lines_have_read_back_on_their_rows_once_finished() {
        // an NCCL communicator on row 1, a torch sequence number on rows 1 and 3, a stream
        // on row 0 only, and nothing on row 4 (the last): each column is 5 rows once finished
        let mut columns = Columns::default();
        for row in 0..5u32 {
            let mut f = Fields {
                text: Cow::Owned(format!("line {row}")),
                ..Fields::default()
            };
            if row == 0 {
                f.stream = Some(Cow::Borrowed("stderr"));
            }
            if row == 1 {
                f.comm_id = Some(Cow::Borrowed("0x5a1e"));
                f.comm_rank = Some(3);
            }
            if row == 1 || row == 3 {
                f.seq = Some(i64::from(row) * 100);
            }
            columns.push(7, row + 1, &f, None);
        }
        columns.finish();
        assert_eq!(columns.len(), 5);
        assert_eq!(columns.seq, [None, Some(100), None, Some(300), None]);
        assert_eq!(columns.comm_rank, [None, Some(3), None, None, None]);
        let comm: Vec<_> = (0..5).map(|r| columns.comm_id.get(r)).collect();
        assert_eq!(comm, [None, Some("0x5a1e"), None, None, None]);
        let stream: Vec<_> = (0..5).map(|r| columns.fields(r).stream).collect();
        assert_eq!(stream[0].as_deref(), Some("stderr"));
        assert!(stream[1..].iter().all(Option::is_none));
        assert!((0..5).all(|r| columns.capped[r].is_none() && columns.msg.get(r).is_none()));
        // more rows after a finish (the key rows grow so): the same again
        let f = Fields {
            seq: Some(9),
            ..Fields::default()
        };
        columns.push(7, 6, &f, None);
        columns.finish();
        assert_eq!(columns.seq[4..], [None, Some(9)]);
        assert_eq!(columns.select(&[3, 1]).seq, [Some(300), Some(100)]);
    }
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn fields_size() {
        println!(
            "Fields: {} bytes",
            std::mem::size_of::<super::Fields<'static>>()
        );
    }
}
