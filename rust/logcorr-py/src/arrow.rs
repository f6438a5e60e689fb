//! The scanner's columns as Arrow arrays, handed to polars through the Arrow PyCapsule
//! interface (`pl.DataFrame(batch)`): text as string views, no pyarrow.

use std::sync::Arc;

use arrow_array::builder::{make_view, StringViewBuilder};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::types::{
    ArrowPrimitiveType, Int32Type, Int64Type, TimestampMicrosecondType, UInt32Type,
};
use arrow_array::{
    ArrayRef, BooleanArray, Int64Array, PrimitiveArray, RecordBatch, RecordBatchIterator,
    RecordBatchReader, StringViewArray, UInt16Array, UInt32Array,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, TimeUnit};
use logcorr_scan::attribute::{Attributed, Coordinates, Whole, EVIDENCE};
use logcorr_scan::clock;
use logcorr_scan::gather::{Event, Last, Person, Tally};
use logcorr_scan::keys::Keys;
use logcorr_scan::model::{Columns, Source, StrColumn, TextColumn, ROLES};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use rustc_hash::FxHashMap as HashMap;

use crate::ffi;

/// Record batches polars takes with `pl.DataFrame(obj)` (read once).
#[pyclass(module = "logcorr._core")]
pub struct ArrowBatch {
    batch: Option<RecordBatch>,
    schema: Arc<Schema>,
}

impl ArrowBatch {
    pub fn new(batch: RecordBatch) -> ArrowBatch {
        ArrowBatch {
            schema: batch.schema(),
            batch: Some(batch),
        }
    }
}

#[pymethods]
impl ArrowBatch {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches: Vec<Result<RecordBatch, ArrowError>> =
            self.batch.take().into_iter().map(Ok).collect();
        let reader: Box<dyn RecordBatchReader + Send> =
            Box::new(RecordBatchIterator::new(batches, self.schema.clone()));
        let stream = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The number of rows (before polars took them).
    fn __len__(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
    }
}

/// A string column as string views over its own bytes (taken: no copy).
fn strings(column: &mut StrColumn) -> ArrayRef {
    string_views(std::mem::take(&mut column.data), &column.spans)
}

/// Spans of `data` (None: a null) as string views over it (moved, not copied).
fn string_views(data: String, spans: &[Option<(u32, u32)>]) -> ArrayRef {
    let views: Vec<u128> = spans
        .iter()
        .map(|span| match span {
            Some((at, len)) => make_view(
                &data.as_bytes()[*at as usize..(*at + *len) as usize],
                0,
                *at,
            ),
            None => 0,
        })
        .collect();
    let nulls = nulls_of(spans.len(), |i| spans[i].is_some());
    let array = ffi::string_views(views, vec![data], nulls)
        .expect("views of UTF-8 text within their buffer");
    Arc::new(array)
}

/// The validity of a column (None when every value is present), a word at a time.
fn nulls_of(len: usize, present: impl Fn(usize) -> bool) -> Option<NullBuffer> {
    let nulls = NullBuffer::new(BooleanBuffer::collect_bool(len, present));
    (nulls.null_count() > 0).then_some(nulls)
}

/// A column of few distinct strings (file names, hosts, the names of sources, roles and
/// evidence) as views into one buffer that holds each distinct value once.
fn repeated<'a>(values: impl Iterator<Item = Option<&'a str>>, len: usize) -> ArrayRef {
    let mut data = String::new();
    let mut at: HashMap<&'a str, u32> = HashMap::default();
    let mut views: Vec<u128> = Vec::with_capacity(len);
    let mut present: Vec<bool> = Vec::with_capacity(len);
    for value in values {
        present.push(value.is_some());
        views.push(match value {
            None => 0,
            Some(v) if v.len() <= 12 => make_view(v.as_bytes(), 0, 0),
            Some(v) => {
                let offset = *at.entry(v).or_insert_with(|| {
                    data.push_str(v);
                    (data.len() - v.len()) as u32
                });
                make_view(v.as_bytes(), 0, offset)
            }
        });
    }
    let nulls = nulls_of(present.len(), |i| present[i]);
    let array = ffi::string_views(views, vec![data], nulls)
        .expect("views of UTF-8 text within their buffer");
    Arc::new(array)
}

/// Times (µs) as ISO 8601 text (`clock::iso_into`), written into one buffer; a row in the
/// same second as the last one written copies its date and time and adds its fraction.
fn iso_times(values: &[Option<i64>]) -> ArrayRef {
    let mut data: Vec<u8> = Vec::with_capacity(values.len() * 26);
    let mut spans: Vec<Option<(u32, u32)>> = Vec::with_capacity(values.len());
    let mut last: Option<(i64, std::ops::Range<usize>)> = None;
    for value in values {
        spans.push(value.map(|t| {
            let at = data.len();
            let (second, micros) = (t.div_euclid(clock::MICROS), t.rem_euclid(clock::MICROS));
            match (&last, t.checked_sub(micros)) {
                (Some((same, written)), _) if *same == second => {
                    data.extend_from_within(written.clone());
                    clock::fraction_into(micros, &mut data);
                }
                (_, Some(whole)) => {
                    clock::iso_into(whole, &mut data);
                    last = Some((second, at..data.len()));
                    clock::fraction_into(micros, &mut data);
                }
                // (a time at the very start of i64's range: written whole)
                (_, None) => clock::iso_into(t, &mut data),
            }
            (at as u32, (data.len() - at) as u32)
        }));
    }
    let data = String::from_utf8(data).expect("ISO 8601 times in ASCII");
    string_views(data, &spans)
}

fn micros(values: &[Option<i64>], zone: Option<&str>) -> ArrayRef {
    let array: PrimitiveArray<TimestampMicrosecondType> = values.iter().copied().collect();
    Arc::new(array.with_timezone_opt(zone.map(str::to_string)))
}

fn i32s(values: &[Option<i32>]) -> ArrayRef {
    Arc::new(primitives::<Int32Type>(values))
}

fn i64s(values: &[Option<i64>]) -> ArrayRef {
    Arc::new(primitives::<Int64Type>(values))
}

/// Optional numbers as an array: the values laid out at once and the validity a word at a
/// time (collecting the options one by one, with a validity bit each, costs several times as
/// much over a chunk's mostly-null columns).
fn primitives<T: ArrowPrimitiveType>(values: &[Option<T::Native>]) -> PrimitiveArray<T> {
    let data: Vec<T::Native> = values.iter().map(|v| v.unwrap_or_default()).collect();
    let nulls = nulls_of(values.len(), |i| values[i].is_some());
    PrimitiveArray::new(ScalarBuffer::from(data), nulls)
}

fn bools(values: &[Option<bool>]) -> ArrayRef {
    Arc::new(values.iter().copied().collect::<BooleanArray>())
}

/// The parsed schema's columns (then `_main`, `_exc`) of a chunk.
pub fn parsed_batch(c: &mut Columns) -> RecordBatch {
    let len = c.len();
    let view = || DataType::Utf8View;
    let ts = |zone: Option<&str>| DataType::Timestamp(TimeUnit::Microsecond, zone.map(Into::into));
    let prefix_names = [
        "p_dp",
        "p_pp",
        "p_attn_cp",
        "p_moe_dp",
        "p_tp",
        "p_ep",
        "p_pid",
    ];
    let mut fields: Vec<Field> = vec![
        Field::new("file_id", DataType::UInt32, true),
        Field::new("line", DataType::UInt32, true),
        Field::new("part", DataType::UInt16, true),
        Field::new("text", view(), true),
        Field::new("msg", view(), true),
        Field::new("source", view(), true),
        Field::new("role", view(), true),
        Field::new("starts_record", DataType::Boolean, true),
        Field::new("ts", ts(None), true),
        Field::new("ts_has_date", DataType::Boolean, true),
        Field::new("ts_has_year", DataType::Boolean, true),
        Field::new("wrap_ts", ts(Some("UTC")), true),
        Field::new("stream", view(), true),
        Field::new("host", view(), true),
        Field::new("pid", DataType::Int64, true),
        Field::new("tid", DataType::Int64, true),
        Field::new("device_id", DataType::Int32, true),
    ];
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(c.file_id.clone())),
        Arc::new(UInt32Array::from(c.line.clone())),
        Arc::new(UInt16Array::from(c.part.clone())),
        text(&mut c.text),
        strings(&mut c.msg),
        repeated(
            c.source
                .iter()
                .map(|&s| Some(Source::ALL[s as usize].name())),
            len,
        ),
        repeated(
            c.role.iter().map(|r| r.map(|r| ROLES[r as usize].name())),
            len,
        ),
        bools(&c.starts_record),
        micros(&c.ts, None),
        bools(&c.ts_has_date),
        bools(&c.ts_has_year),
        micros(&c.wrap_ts, Some("UTC")),
        strings(&mut c.stream),
        strings(&mut c.host),
        i64s(&c.pid),
        i64s(&c.tid),
        i32s(&c.device_id),
    ];
    for (name, values) in prefix_names.iter().zip(&c.prefix) {
        fields.push(Field::new(*name, DataType::Int32, true));
        arrays.push(i32s(values));
    }
    let rest: Vec<(&str, DataType, ArrayRef)> = vec![
        ("torch_rank", DataType::Int32, i32s(&c.torch_rank)),
        ("pg_id", DataType::Int32, i32s(&c.pg_id)),
        ("pg_guid", view(), strings(&mut c.pg_guid)),
        ("pg_desc", view(), strings(&mut c.pg_desc)),
        ("pg_rank", DataType::Int32, i32s(&c.pg_rank)),
        ("seq", DataType::Int64, i64s(&c.seq)),
        ("op", view(), strings(&mut c.op)),
        ("last_enqueued", DataType::Int64, i64s(&c.last_enqueued)),
        ("last_completed", DataType::Int64, i64s(&c.last_completed)),
        ("comm", view(), strings(&mut c.comm)),
        ("comm_id", view(), strings(&mut c.comm_id)),
        ("comm_rank", DataType::Int32, i32s(&c.comm_rank)),
        ("comm_nranks", DataType::Int32, i32s(&c.comm_nranks)),
        ("nccl_phase", view(), strings(&mut c.nccl_phase)),
        ("gloo_rank", DataType::Int32, i32s(&c.gloo_rank)),
        ("gloo_size", DataType::Int32, i32s(&c.gloo_size)),
        ("link_pid", DataType::Int64, i64s(&c.link_pid)),
        ("proctitle", view(), strings(&mut c.proctitle)),
        ("server_args", DataType::Boolean, bools(&c.server_args)),
        ("capped", DataType::Boolean, bools(&c.capped)),
        (
            "_main",
            DataType::Boolean,
            Arc::new(BooleanArray::from(c.main.clone())),
        ),
        (
            "_exc",
            DataType::Boolean,
            Arc::new(BooleanArray::from(c.exc.clone())),
        ),
    ];
    for (name, dtype, array) in rest {
        fields.push(Field::new(name, dtype, true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("columns of one length")
}

/// The parts' texts as string views over the chunk's decoded blocks, which become the
/// array's buffers (moved, not copied).
fn text(column: &mut TextColumn) -> ArrayRef {
    let blocks = std::mem::take(&mut column.blocks);
    let extra = std::mem::take(&mut column.extra);
    let index_of_extra = blocks.len() as u32;
    let views: Vec<u128> = column
        .spans
        .iter()
        .map(|&(buffer, offset, len)| {
            let (index, source) = if buffer == u32::MAX {
                (index_of_extra, extra.as_bytes())
            } else {
                (buffer, blocks[buffer as usize].as_bytes())
            };
            make_view(
                &source[offset as usize..(offset + len) as usize],
                index,
                offset,
            )
        })
        .collect();
    let mut buffers = blocks;
    buffers.push(extra);
    let array =
        ffi::string_views(views, buffers, None).expect("views of UTF-8 text within their buffers");
    Arc::new(array)
}

fn u32s(values: &[Option<u32>]) -> ArrayRef {
    Arc::new(primitives::<UInt32Type>(values))
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
        .collect();
    let arrays = columns.into_iter().map(|(_, array)| array).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("columns of one length")
}

/// The seconds in which exception headers stand, one row per (second, key row): `_second`
/// (µs since the epoch) and `_key`, sorted (a set of many tracebacks has hundreds of
/// thousands: columns, not a Python tuple each).
pub fn headers_batch(headers: &[(i64, u32)]) -> RecordBatch {
    batch(vec![
        (
            "_second",
            Arc::new(Int64Array::from_iter_values(headers.iter().map(|h| h.0))),
        ),
        (
            "_key",
            Arc::new(UInt32Array::from_iter_values(headers.iter().map(|h| h.1))),
        ),
    ])
}

/// The distinct key rows (`resolve.KEY_COLUMNS`), with `_n` (lines), `line` (the first) and
/// `_key` (the key's number), in (file, first line) order.
pub fn keys_batch(keys: &Keys) -> RecordBatch {
    let c = &keys.rows;
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&k| (c.file_id[k], keys.first_line[k], k));
    let pick_str = |column: &StrColumn| -> ArrayRef {
        let mut builder = StringViewBuilder::with_capacity(order.len());
        for &k in &order {
            builder.append_option(column.get(k));
        }
        Arc::new(builder.finish())
    };
    let pick_i32 = |column: &[Option<i32>]| -> ArrayRef {
        i32s(&order.iter().map(|&k| column[k]).collect::<Vec<_>>())
    };
    let pick_i64 = |column: &[Option<i64>]| -> ArrayRef {
        i64s(&order.iter().map(|&k| column[k]).collect::<Vec<_>>())
    };
    let p = |i: usize| pick_i32(&c.prefix[i]);
    batch(vec![
        (
            "file_id",
            Arc::new(UInt32Array::from(
                order.iter().map(|&k| c.file_id[k]).collect::<Vec<_>>(),
            )),
        ),
        ("p_dp", p(0)),
        ("p_pp", p(1)),
        ("p_attn_cp", p(2)),
        ("p_moe_dp", p(3)),
        ("p_tp", p(4)),
        ("p_ep", p(5)),
        ("proctitle", pick_str(&c.proctitle)),
        ("host", pick_str(&c.host)),
        (
            "source",
            repeated(
                order
                    .iter()
                    .map(|&k| Some(Source::ALL[c.source[k] as usize].name())),
                order.len(),
            ),
        ),
        (
            "_main",
            Arc::new(BooleanArray::from(
                order.iter().map(|&k| c.main[k]).collect::<Vec<_>>(),
            )),
        ),
        ("device_id", pick_i32(&c.device_id)),
        ("link_pid", pick_i64(&c.link_pid)),
        ("p_pid", p(6)),
        ("pid", pick_i64(&c.pid)),
        ("comm_id", pick_str(&c.comm_id)),
        ("comm_rank", pick_i32(&c.comm_rank)),
        ("comm_nranks", pick_i32(&c.comm_nranks)),
        ("torch_rank", pick_i32(&c.torch_rank)),
        ("pg_desc", pick_str(&c.pg_desc)),
        ("pg_rank", pick_i32(&c.pg_rank)),
        ("gloo_rank", pick_i32(&c.gloo_rank)),
        ("gloo_size", pick_i32(&c.gloo_size)),
        (
            "role",
            repeated(
                order
                    .iter()
                    .map(|&k| c.role[k].map(|r| ROLES[r as usize].name())),
                order.len(),
            ),
        ),
        (
            "server_args",
            bools(&order.iter().map(|&k| c.server_args[k]).collect::<Vec<_>>()),
        ),
        ("stream", pick_str(&c.stream)),
        (
            "_n",
            Arc::new(UInt32Array::from(
                order
                    .iter()
                    .map(|&k| keys.counts[k] as u32)
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "line",
            Arc::new(UInt32Array::from(
                order
                    .iter()
                    .map(|&k| keys.first_line[k])
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "_key",
            Arc::new(UInt32Array::from(
                order.iter().map(|&k| k as u32).collect::<Vec<_>>(),
            )),
        ),
    ])
}

fn statics(values: &[Option<&'static str>]) -> ArrayRef {
    repeated(values.iter().copied(), values.len())
}

/// A chunk's rows as the runs store them: the timeline contract (but `order`), the detail
/// columns, the message under a wrapper and `_sk` (`api._STORED`, in its order; what the
/// diagnosis reads of every line comes as event rows and counts, `gather.rs`).
pub fn attributed_batch(c: &mut Columns, a: &Attributed, whole: &Whole) -> RecordBatch {
    let len = c.len();
    let files = repeated(
        c.file_id
            .iter()
            .map(|f| whole.file_names.get(f).map(String::as_str)),
        len,
    );
    let hosts = repeated((0..len).map(|row| a.host(whole, row)), len);
    let streams = repeated((0..len).map(|row| a.stream(c, whole, row)), len);
    let coordinates: Vec<Coordinates> = (0..len).map(|row| a.coordinates(c, whole, row)).collect();
    let coordinate = |i: usize| i32s(&coordinates.iter().map(|x| x[i]).collect::<Vec<_>>());
    let names = [
        "node_rank",
        "replica",
        "dp_rank",
        "pp_rank",
        "tp_rank",
        "world_rank",
        "gpu_id",
        "attn_dp_rank",
        "attn_cp_rank",
        "attn_tp_rank",
        "moe_dp_rank",
        "moe_ep_rank",
        "moe_tp_rank",
    ];
    let of = |name: &str| names.iter().position(|n| *n == name).expect("a coordinate");
    let roles: Vec<Option<&'static str>> = a
        .role
        .iter()
        .map(|r| r.map(|r| ROLES[r as usize].name()))
        .collect();
    let evidence: Vec<Option<&'static str>> = a
        .evidence
        .iter()
        .map(|e| e.map(|e| EVIDENCE[e as usize]))
        .collect();
    batch(vec![
        ("file", files),
        ("line", Arc::new(UInt32Array::from(c.line.clone()))),
        ("part", Arc::new(UInt16Array::from(c.part.clone()))),
        ("ts", iso_times(&a.ts_full)),
        (
            "source",
            repeated(
                c.source
                    .iter()
                    .map(|&s| Some(Source::ALL[s as usize].name())),
                c.len(),
            ),
        ),
        ("role", statics(&roles)),
        ("host", hosts),
        ("node_rank", coordinate(of("node_rank"))),
        ("pid", i64s(&c.pid)),
        ("tid", i64s(&c.tid)),
        ("device_id", i32s(&c.device_id)),
        ("gpu_id", coordinate(of("gpu_id"))),
        ("replica", coordinate(of("replica"))),
        ("world_rank", coordinate(of("world_rank"))),
        ("dp_rank", coordinate(of("dp_rank"))),
        ("pp_rank", coordinate(of("pp_rank"))),
        ("tp_rank", coordinate(of("tp_rank"))),
        ("attn_dp_rank", coordinate(of("attn_dp_rank"))),
        ("attn_cp_rank", coordinate(of("attn_cp_rank"))),
        ("attn_tp_rank", coordinate(of("attn_tp_rank"))),
        ("moe_dp_rank", coordinate(of("moe_dp_rank"))),
        ("moe_ep_rank", coordinate(of("moe_ep_rank"))),
        ("moe_tp_rank", coordinate(of("moe_tp_rank"))),
        ("evidence", statics(&evidence)),
        ("stream", streams),
        ("text", text(&mut c.text)),
        ("file_id", Arc::new(UInt32Array::from(c.file_id.clone()))),
        ("proc", u32s(&a.proc)),
        ("record", Arc::new(UInt32Array::from(a.record.clone()))),
        ("why", statics(&a.why)),
        ("msg", strings(&mut c.msg)),
        ("_sk", i64s(&a.sk)),
    ])
}

/// Physical lines as the LINES schema: file_id, line, text.
pub fn lines_batch(lines: &[logcorr_scan::parse::Line<'_>]) -> RecordBatch {
    let text: StringViewArray = lines.iter().map(|l| Some(l.text)).collect();
    batch(vec![
        (
            "file_id",
            Arc::new(UInt32Array::from(
                lines.iter().map(|l| l.file_id).collect::<Vec<_>>(),
            )),
        ),
        (
            "line",
            Arc::new(UInt32Array::from(
                lines.iter().map(|l| l.line).collect::<Vec<_>>(),
            )),
        ),
        ("text", Arc::new(text)),
    ])
}

fn opt_strings<'a>(values: impl Iterator<Item = Option<&'a str>>, len: usize) -> ArrayRef {
    let mut builder = StringViewBuilder::with_capacity(len);
    for value in values {
        builder.append_option(value);
    }
    Arc::new(builder.finish())
}

/// The event rows, in the columns the diagnosis reads (`context._EVENT_SCHEMA`).
pub fn events_batch(events: &[Event]) -> RecordBatch {
    let n = events.len();
    let ts_full: PrimitiveArray<TimestampMicrosecondType> =
        events.iter().map(|e| e.ts_full).collect();
    let roles: Vec<Option<&'static str>> = events
        .iter()
        .map(|e| e.role.map(|r| ROLES[r as usize].name()))
        .collect();
    batch(vec![
        (
            "_sk",
            Arc::new(Int64Array::from(
                events.iter().map(|e| e.sk).collect::<Vec<_>>(),
            )),
        ),
        (
            "file_id",
            Arc::new(UInt32Array::from(
                events.iter().map(|e| e.file_id).collect::<Vec<_>>(),
            )),
        ),
        (
            "line",
            Arc::new(UInt32Array::from(
                events.iter().map(|e| e.line).collect::<Vec<_>>(),
            )),
        ),
        (
            "part",
            Arc::new(UInt16Array::from(
                events.iter().map(|e| e.part).collect::<Vec<_>>(),
            )),
        ),
        (
            "text",
            opt_strings(events.iter().map(|e| Some(e.text.as_str())), n),
        ),
        (
            "proc",
            u32s(&events.iter().map(|e| e.proc).collect::<Vec<_>>()),
        ),
        ("role", statics(&roles)),
        ("ts_full", Arc::new(ts_full)),
        (
            "host",
            opt_strings(events.iter().map(|e| e.host.as_deref()), n),
        ),
        (
            "pid",
            i64s(&events.iter().map(|e| e.pid).collect::<Vec<_>>()),
        ),
        (
            "record",
            Arc::new(UInt32Array::from(
                events.iter().map(|e| e.record).collect::<Vec<_>>(),
            )),
        ),
        (
            "starts_record",
            bools(&events.iter().map(|e| e.starts_record).collect::<Vec<_>>()),
        ),
        (
            "torch_rank",
            i32s(&events.iter().map(|e| e.torch_rank).collect::<Vec<_>>()),
        ),
        (
            "pg_desc",
            opt_strings(events.iter().map(|e| e.pg_desc.as_deref()), n),
        ),
        (
            "pg_rank",
            i32s(&events.iter().map(|e| e.pg_rank).collect::<Vec<_>>()),
        ),
        (
            "seq",
            i64s(&events.iter().map(|e| e.seq).collect::<Vec<_>>()),
        ),
        ("op", opt_strings(events.iter().map(|e| e.op.as_deref()), n)),
        (
            "last_enqueued",
            i64s(&events.iter().map(|e| e.last_enqueued).collect::<Vec<_>>()),
        ),
        (
            "last_completed",
            i64s(&events.iter().map(|e| e.last_completed).collect::<Vec<_>>()),
        ),
        (
            "comm",
            opt_strings(events.iter().map(|e| e.comm.as_deref()), n),
        ),
        (
            "comm_id",
            opt_strings(events.iter().map(|e| e.comm_id.as_deref()), n),
        ),
        (
            "comm_rank",
            i32s(&events.iter().map(|e| e.comm_rank).collect::<Vec<_>>()),
        ),
        (
            "comm_nranks",
            i32s(&events.iter().map(|e| e.comm_nranks).collect::<Vec<_>>()),
        ),
        (
            "nccl_phase",
            opt_strings(events.iter().map(|e| e.nccl_phase.as_deref()), n),
        ),
        (
            "_next",
            opt_strings(events.iter().map(|e| e.next.as_deref()), n),
        ),
        (
            "stream",
            opt_strings(events.iter().map(|e| e.stream.as_deref()), n),
        ),
        (
            "_said",
            Arc::new(
                events
                    .iter()
                    .map(|e| Some(e.said))
                    .collect::<BooleanArray>(),
            ),
        ),
        ("_n", Arc::new(UInt32Array::from(vec![1u32; n]))),
    ])
}

const COORDINATE_NAMES: [&str; 13] = [
    "node_rank",
    "replica",
    "dp_rank",
    "pp_rank",
    "tp_rank",
    "world_rank",
    "gpu_id",
    "attn_dp_rank",
    "attn_cp_rank",
    "attn_tp_rank",
    "moe_dp_rank",
    "moe_ep_rank",
    "moe_tp_rank",
];

fn place(columns: &mut Vec<(&'static str, ArrayRef)>, at: &[(i64, u32, u32, u16)]) {
    columns.push((
        "_sk",
        Arc::new(Int64Array::from(at.iter().map(|a| a.0).collect::<Vec<_>>())),
    ));
    columns.push((
        "file_id",
        Arc::new(UInt32Array::from(
            at.iter().map(|a| a.1).collect::<Vec<_>>(),
        )),
    ));
    columns.push((
        "line",
        Arc::new(UInt32Array::from(
            at.iter().map(|a| a.2).collect::<Vec<_>>(),
        )),
    ));
    columns.push((
        "part",
        Arc::new(UInt16Array::from(
            at.iter().map(|a| a.3).collect::<Vec<_>>(),
        )),
    ));
}

/// The tally's tables: people (proc, host, pid, len, coordinates, first place), last (proc,
/// ts_full, its place), progress (proc, ts_full), file_procs (file_id, proc, len, line).
pub fn tally_batches(
    t: &Tally,
    hosts: &[Option<String>],
) -> (RecordBatch, RecordBatch, RecordBatch, RecordBatch) {
    let mut people: Vec<_> = t.people.iter().collect();
    people.sort_by_key(|(k, p): &(&(u32, u32, Option<i64>), &Person)| (k.0, p.first, k.1, k.2));
    let host_of = |key: u32| hosts.get(key as usize).and_then(Option::as_deref);
    let mut columns: Vec<(&'static str, ArrayRef)> = vec![
        (
            "proc",
            Arc::new(UInt32Array::from(
                people.iter().map(|(k, _)| k.0).collect::<Vec<_>>(),
            )),
        ),
        (
            "host",
            opt_strings(people.iter().map(|(k, _)| host_of(k.1)), people.len()),
        ),
        (
            "pid",
            i64s(&people.iter().map(|(k, _)| k.2).collect::<Vec<_>>()),
        ),
        (
            "len",
            Arc::new(UInt32Array::from(
                people
                    .iter()
                    .map(|(_, p)| p.lines as u32)
                    .collect::<Vec<_>>(),
            )),
        ),
    ];
    for (i, name) in COORDINATE_NAMES.iter().enumerate() {
        columns.push((
            name,
            i32s(
                &people
                    .iter()
                    .map(|(_, p)| p.coordinates[i])
                    .collect::<Vec<_>>(),
            ),
        ));
    }
    place(
        &mut columns,
        &people.iter().map(|(_, p)| p.first).collect::<Vec<_>>(),
    );
    let people = batch(columns);
    let mut last: Vec<(&u32, &Last)> = t.last.iter().collect();
    last.sort_by_key(|(p, _)| **p);
    let last_ts: PrimitiveArray<TimestampMicrosecondType> =
        last.iter().map(|(_, l)| Some(l.ts_full)).collect();
    let mut columns: Vec<(&'static str, ArrayRef)> = vec![
        (
            "proc",
            Arc::new(UInt32Array::from(
                last.iter().map(|(p, _)| **p).collect::<Vec<_>>(),
            )),
        ),
        ("ts_full", Arc::new(last_ts)),
    ];
    place(
        &mut columns,
        &last.iter().map(|(_, l)| l.at).collect::<Vec<_>>(),
    );
    let last = batch(columns);
    let mut progress: Vec<(&u32, &i64)> = t.progress.iter().collect();
    progress.sort();
    let progress_ts: PrimitiveArray<TimestampMicrosecondType> =
        progress.iter().map(|(_, t)| Some(**t)).collect();
    let progress = batch(vec![
        (
            "proc",
            Arc::new(UInt32Array::from(
                progress.iter().map(|(p, _)| **p).collect::<Vec<_>>(),
            )),
        ),
        ("ts_full", Arc::new(progress_ts)),
    ]);
    let mut files: Vec<_> = t.file_procs.iter().collect();
    files.sort();
    let file_procs = batch(vec![
        (
            "file_id",
            Arc::new(UInt32Array::from(
                files.iter().map(|(k, _)| k.0).collect::<Vec<_>>(),
            )),
        ),
        (
            "proc",
            Arc::new(UInt32Array::from(
                files.iter().map(|(k, _)| k.1).collect::<Vec<_>>(),
            )),
        ),
        (
            "len",
            Arc::new(UInt32Array::from(
                files.iter().map(|(_, v)| v.0 as u32).collect::<Vec<_>>(),
            )),
        ),
        (
            "line",
            Arc::new(UInt32Array::from(
                files.iter().map(|(_, v)| v.1).collect::<Vec<_>>(),
            )),
        ),
    ]);
    (people, last, progress, file_procs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn optional_numbers_and_names_read_as_arrow_collects_them() {
        let numbers = [Some(3), None, Some(-7), None, Some(i32::MAX)];
        assert_eq!(
            primitives::<Int32Type>(&numbers),
            numbers
                .iter()
                .copied()
                .collect::<PrimitiveArray<Int32Type>>()
        );
        let full = [Some(1u32), Some(0), Some(u32::MAX)];
        let array = primitives::<UInt32Type>(&full);
        assert!(array.nulls().is_none(), "no validity when nothing is null");
        assert_eq!(array, full.iter().copied().collect::<UInt32Array>());
        let names = [
            Some("scheduler"),
            None,
            Some("a name longer than twelve bytes"),
            Some("scheduler"),
            Some("a name longer than twelve bytes"),
            Some("é"),
        ];
        let column = repeated(names.iter().copied(), names.len());
        assert_eq!(
            column.as_any().downcast_ref::<StringViewArray>(),
            Some(&names.iter().copied().collect::<StringViewArray>())
        );
    }

    #[test]
    fn a_column_of_times_reads_as_each_time_written_alone() {
        let base = 1_795_940_000_000_000; // (2026-11-29)
        let values = [
            Some(base),
            Some(base + 1_000),
            Some(base + 1_000),
            None,
            Some(base + 999_999),
            Some(base + 1_000_000),
            Some(base + 1_000_001),
            Some(-1),
            Some(-1_000_000),
            Some(-1_000_001),
            Some(0),
            Some(i64::MIN),
            Some(i64::MIN + 1),
            Some(i64::MIN + 1),
            Some(i64::MAX),
            Some(i64::MAX - 1),
            Some(300_000_000_000_000_000), // (past year 9999)
        ];
        let column = iso_times(&values);
        let column = column
            .as_any()
            .downcast_ref::<StringViewArray>()
            .expect("string views");
        for (row, value) in values.iter().enumerate() {
            match value {
                Some(t) => assert_eq!(column.value(row), clock::iso(*t), "row {row}"),
                None => assert!(column.is_null(row)),
            }
        }
    }
}
