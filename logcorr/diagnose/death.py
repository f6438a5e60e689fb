"""Process death: an uncaught exception is a crash of the process that raised it.

A process that raises and does not catch writes the traceback raw to its stderr
(`sys.excepthook`: `Traceback (most recent call last):` … `RuntimeError: dead`, no logging
header in front) and exits. A process's last raw traceback, closed by its exception line, is
its death when

| between the exception line and a launcher naming the process dead (or the end)  | verdict |
|----------------------------------------------------------------------------------|---------|
| the process writes nothing of its own (blank lines, torch's `process group has  | died    |
| NOT been destroyed` at exit, Python's shutdown warnings and launchers' lines     |         |
| aside)                                                                            |         |
| it goes on writing lines of its own                                               | handled |

A launcher names a process dead by its srun task (`srun: error: node-3: task 7: Exited with
exit code 1`), its world rank (torch elastic's `ChildFailedError` summary) or its PID (the
summary's, torchrun's `failed (exitcode: 1) local_rank: 3 (pid: 5012)`, SGLang's `Subprocess
scheduler_2 (pid=5012) crashed`). A process no line identifies is its output stream's (file and
wrapper stream): a traceback that ends the stream.

Not a death: a traceback cut before its exception line; `KeyboardInterrupt` (Ctrl-C: a stop);
torchrun's own `ChildFailedError` / `SignalException` (the launcher reporting a child, or taken
down by a signal: the cascade).

torch elastic's summary is read as a record of its own (the agent's, not the failed worker's):
each failure's time, host, rank, local rank, exit code and PID (`elastic_failures`), the one
under `Root Cause (first observed failure):` marked as the root.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl
import regex

from logcorr import _core
from logcorr.diagnose.context import (
    ELASTIC_STEMS,
    EXIT_NOISE,
    INTERRUPTED,
    LAUNCHER_EXIT_STEMS,
    LAUNCHER_STEMS,
    UNCAUGHT,
    Context,
    _contains_any,
)
from logcorr.stream import NO_TIME, SORT_COLUMNS

EXCEPTION = _core.PATTERNS["EXC"]  # (the record grammar's closing line of a traceback)
# a launcher's own traceback: not a death of a process of the job
_LAUNCHER_EXCEPTION = r"^(?:[\w.]*\.)?(?:ChildFailedError|SignalException)\b"
# lines a launcher writes into the streams of its children (srun, slurmstepd, torchrun's agent)
_LAUNCHER_LINE = ("srun: ", "slurmstepd: ", "torch/distributed/elastic/", "torch/distributed/run.py",
                  *LAUNCHER_STEMS, *LAUNCHER_EXIT_STEMS)
_TASKS = regex.compile(r"\btasks? ([\d,\-]+): Exited with exit code (-?\d+)")
_PID_DEAD = regex.compile(r"\(pid[=:] ?(\d+)\)(?:,? crashed| of binary)"
                          r"|failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: (\d+)\)")
_FIELD = regex.compile(r"^\s+(time|host|rank|exitcode)\s+: (.*?)\s*$")
_RANK = regex.compile(r"^(-?\d+) \(local_rank: (-?\d+)\)")
_CODE = regex.compile(r"^(-?\d+) \(pid: (\d+)\)")
FAN_OUT = timedelta(seconds=1)
_KEY = list(SORT_COLUMNS)


def deaths(ctx: Context) -> pl.DataFrame:
    """The event rows of the raw tracebacks that are their process's death (see the table
    above): the traceback's first line, with `_exc` (its exception line), `_at` (its time:
    the line's own, else that of the last stamped line before it in its file) and `_by` (the
    (file_id, line) of a launcher line that named the process dead, when one did)."""
    events = ctx.events
    # (not only the lines that open a record: a traceback right after another process's
    # line ending with `:` - interleaved output - is announced by it as far as the grammar
    # of physical lines can tell)
    heads = events.filter(pl.col("text").str.starts_with(UNCAUGHT))
    if heads.height == 0:
        return _none(events)
    who = pl.when(pl.col("proc").is_not_null()).then(pl.format("p{}", pl.col("proc"))).otherwise(
        pl.format("s{}/{}", pl.col("file_id"), pl.col("stream").fill_null("")))
    heads = heads.with_columns(_who=who).sort("order").group_by("_who").last()
    said = notices(ctx)
    rows = _rows_after(ctx, heads, said)
    closing = _closing(rows, heads)
    if closing.height == 0:
        return _none(events)
    named = _named(ctx, closing, said, rows)
    handled = _handled(rows, named)
    died = named.filter(~pl.col("_who").is_in(handled))
    return (heads.join(died.select("_who", "_exc", "_by_file", "_by_line"), on="_who")
            .with_columns(_at=_time_of(), _by=pl.struct(file_id="_by_file", line="_by_line"))
            .drop("_who", "_by_file", "_by_line").sort("order"))


def _none(events: pl.DataFrame) -> pl.DataFrame:
    return events.clear().with_columns(
        _exc=pl.lit(None, pl.String), _at=pl.lit(None, pl.Datetime("us")),
        _by=pl.struct(file_id=pl.lit(None, pl.UInt32), line=pl.lit(None, pl.UInt32)))


def _time_of() -> pl.Expr:
    """A row's own time, else (a traceback prints none) its file's time so far."""
    running = pl.when(pl.col("_sk") != NO_TIME).then(pl.col("_sk")).cast(pl.Datetime("us"))
    return pl.coalesce("ts_full", running)


def _rows_after(ctx: Context, heads: pl.DataFrame, said: pl.DataFrame) -> pl.DataFrame:
    """The rows from the first candidate traceback on, of the files and processes they (and
    the launchers' notices) concern, in timeline order, numbered (`_pos`)."""
    procs = heads["proc"].drop_nulls().unique().to_list()
    files = list({*heads["file_id"].to_list(), *said["file_id"].to_list(), *ctx.files_of(procs)})
    start = int(heads["_sk"].min())  # type: ignore[arg-type]
    wanted = ((pl.col("file_id").is_in(files) | pl.col("proc").is_in(procs))
              & (pl.col("_sk") >= start))
    return (ctx.rows_of(files).filter(wanted)
            .select(*(pl.col(c) for c in _KEY), pl.col("record").cast(pl.UInt32),
                    pl.col("proc").cast(pl.UInt32), "stream",
                    pl.coalesce("msg", "text").alias("text"))
            .collect().sort(_KEY).with_row_index("_pos"))


def _closing(rows: pl.DataFrame, heads: pl.DataFrame) -> pl.DataFrame:
    """Per candidate (`_who`): the last exception line of its record (its process's, or no
    one's), `_exc` and its position `_close`; none for a traceback cut short, Ctrl-C or a
    launcher's own."""
    place = heads.select("_who", "file_id", "line", "part", _head="record", _proc="proc",
                         _stream="stream")
    at = place.join(rows.select("file_id", "line", "part", "_pos"),
                    on=["file_id", "line", "part"]).select("_who", "_head", "_proc",
                                                           "_stream", "file_id", _from="_pos")
    inside = (rows.join(at.with_columns(record="_head"), on=["file_id", "record"])
              .filter((pl.col("_pos") >= pl.col("_from"))
                      & (pl.col("proc").is_null() | pl.col("proc").eq_missing(pl.col("_proc"))))
              .filter(pl.col("text").str.contains(EXCEPTION)))
    last = inside.sort("_pos").group_by("_who").last().select(
        "_who", "file_id", "_head", "_proc", "_stream", _close="_pos", _exc="text")
    stop = (pl.col("_exc").str.strip_chars().str.starts_with(INTERRUPTED)
            | pl.col("_exc").str.contains(_LAUNCHER_EXCEPTION))
    return last.filter(~stop)


def _own(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows that are a process's own work: not blank, not exit noise, not a launcher's."""
    text = pl.col("text")
    return rows.filter((text.str.strip_chars() != "") & ~_contains_any(EXIT_NOISE)
                       & ~pl.any_horizontal(text.str.contains(s, literal=True)
                                            for s in _LAUNCHER_LINE))


def _handled(rows: pl.DataFrame, named: pl.DataFrame) -> list[str]:
    """The candidates whose process wrote a line of its own after the exception line (and
    before a launcher named it dead): a known process's lines anywhere, an unknown one's in
    its stream (lines no process is known for)."""
    own = _own(rows)
    window = (pl.col("_pos") > pl.col("_close")) & (pl.col("_pos") < pl.col("_until"))
    other_record = (pl.col("file_id") != pl.col("_file")) | (pl.col("record") != pl.col("_head"))
    known = named.filter(pl.col("_proc").is_not_null())
    by_proc = (own.join(known.select("_who", "_close", "_until", "_head", proc="_proc",
                                     _file="file_id"), on="proc")
               .filter(window & other_record))
    unknown = named.filter(pl.col("_proc").is_null())
    by_stream = (own.filter(pl.col("proc").is_null())
                 .join(unknown.select("_who", "_close", "_until", "_head", "file_id",
                                      stream="_stream", _file="file_id"),
                       on=["file_id", "stream"], nulls_equal=True)
                 .filter(window & other_record))
    return pl.concat([by_proc["_who"], by_stream["_who"]]).unique().to_list()


def _named(ctx: Context, closing: pl.DataFrame, said: pl.DataFrame, rows: pl.DataFrame
           ) -> pl.DataFrame:
    """`closing` with `_until` (the position of the first launcher line after the exception
    line that names the process dead, else past the end) and `_by_file` / `_by_line` (that
    line)."""
    end = rows.height
    placed = said.join(rows.select("file_id", "line", "part", "_pos"),
                       on=["file_id", "line", "part"])
    by_pid = _procs_by_pid(ctx)
    by_rank = _procs_by_rank(ctx)
    until: list[int] = []
    by: list[tuple[int | None, int | None]] = []
    for row in closing.iter_rows(named=True):
        found = None
        for notice in placed.filter(pl.col("_pos") > row["_close"]).sort("_pos").iter_rows(
                named=True):
            if _names(notice, row, by_pid, by_rank):
                found = notice
                break
        until.append(found["_pos"] if found else end + 1)
        by.append((found["file_id"], found["line"]) if found else (None, None))
    return closing.with_columns(
        _until=pl.Series(until, dtype=pl.UInt32),
        _by_file=pl.Series([b[0] for b in by], dtype=pl.UInt32),
        _by_line=pl.Series([b[1] for b in by], dtype=pl.UInt32))


def _names(notice: dict[str, Any], candidate: dict[str, Any], by_pid: dict[int, int],
           by_rank: dict[int, int]) -> bool:
    """Whether a launcher's notice names the candidate's process (or its stream) dead."""
    proc, stream = candidate["_proc"], candidate["_stream"]
    if stream is not None and stream in (notice["_streams"] or []):
        return True
    if proc is None:
        return False
    return ((notice["_pid"] is not None and by_pid.get(notice["_pid"]) == proc)
            or (notice["_rank"] is not None and by_rank.get(notice["_rank"]) == proc))


def _procs_by_pid(ctx: Context) -> dict[int, int]:
    """PID -> the one process whose lines show it."""
    seen: dict[int, set[int]] = {}
    for proc, person in ctx.people.items():
        if person.get("pid") is not None:
            seen.setdefault(int(person["pid"]), set()).add(proc)
    return {pid: next(iter(p)) for pid, p in seen.items() if len(p) == 1}


def _procs_by_rank(ctx: Context) -> dict[int, int]:
    """World rank -> the one process that has it (one world: no native-DP replicas)."""
    seen: dict[int, set[int]] = {}
    for proc, person in ctx.people.items():
        if person.get("world_rank") is not None and not person.get("replica"):
            seen.setdefault(int(person["world_rank"]), set()).add(proc)
    return {rank: next(iter(p)) for rank, p in seen.items() if len(p) == 1}


def notices(ctx: Context) -> pl.DataFrame:
    """Launchers' lines naming processes dead: (file_id, line, part, order) with `_streams`
    (srun tasks, as streams `task=N`), `_rank` (a world rank) and `_pid`."""
    events = ctx.events
    text = pl.col("text")
    exits = events.filter(_contains_any(LAUNCHER_EXIT_STEMS) | text.str.contains("crashed")
                          | text.str.contains("exitcode  : ", literal=True))
    rows: list[dict[str, Any]] = []
    failures = {(f["file_id"], f["line"]): f for f in elastic_failures(ctx)}
    for row in exits.iter_rows(named=True):
        line = str(row["text"])
        streams = [f"task={n}" for n in _task_list(line)]
        found = _PID_DEAD.search(line)
        pid = next((int(g) for g in found.groups() if g), None) if found else None
        failure = failures.get((row["file_id"], row["line"]))
        rank = failure["rank"] if failure else None
        pid = failure["pid"] if failure else pid
        if streams or pid is not None or rank is not None:
            rows.append({"file_id": row["file_id"], "line": row["line"], "part": row["part"],
                         "order": row["order"], "_streams": streams, "_rank": rank,
                         "_pid": pid})
    return pl.DataFrame(rows, schema={"file_id": pl.UInt32, "line": pl.UInt32,
                                      "part": pl.UInt16, "order": pl.UInt64,
                                      "_streams": pl.List(pl.String), "_rank": pl.Int64,
                                      "_pid": pl.Int64})


def _task_list(line: str) -> list[int]:
    """The srun tasks a non-zero exit line names (`task 7`, `tasks 0-3,8`).

    >>> _task_list("srun: error: node-3: tasks 0-2,8: Exited with exit code 1")
    [0, 1, 2, 8]
    >>> _task_list("srun: error: node-3: task 5: Exited with exit code 0")
    []
    """
    found = _TASKS.search(line)
    if not found or int(found.group(2)) == 0:
        return []
    tasks: list[int] = []
    for piece in found.group(1).split(","):
        first, _, last = piece.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            tasks += range(int(first), int(last or first) + 1)
    return tasks


def elastic_failures(ctx: Context) -> list[dict[str, Any]]:
    """torch elastic's `ChildFailedError` summary, one dict per failure: `rank`,
    `local_rank`, `pid`, `exitcode`, `host`, `time` (as printed), `root` (under `Root Cause
    (first observed failure):`), and the `file_id` / `line` / `order` of its `exitcode` line
    (the agent's lines: they name a process, they are not its own)."""
    rows = ctx.events.filter(_contains_any(ELASTIC_STEMS)).sort("order")
    failures: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    root_after: dict[int, int] = {}
    last_line: dict[int, int] = {}
    for row in rows.iter_rows(named=True):
        text, file_id, line = str(row["text"]), int(row["file_id"]), int(row["line"])
        if last_line.get(file_id) is not None and line > last_line[file_id] + 1:
            fields = {}  # (the fields of one failure are consecutive lines)
        last_line[file_id] = line
        if "Root Cause (first observed failure)" in text:
            root_after[file_id] = line
            continue
        found = _FIELD.match(text)
        if not found:
            continue
        fields[found.group(1)] = found.group(2)
        if found.group(1) != "exitcode":
            continue
        failure = _failure(fields)
        fields = {}
        if failure is not None:
            root = root_after.get(file_id)
            failure.update(file_id=file_id, line=line, order=row["order"],
                           root=root is not None and 0 < line - root <= 7)
            failures.append(failure)
    return failures


def _failure(fields: dict[str, str]) -> dict[str, Any] | None:
    """One failure of the summary from its fields (None when its rank or PID is unreadable).

    >>> _failure({"time": "2026-11-29_10:05:03", "host": "node-1", "rank": "11 (local_rank: 3)",
    ...           "exitcode": "1 (pid: 5012)"})["pid"]
    5012
    """
    rank = _RANK.match(fields.get("rank", ""))
    code = _CODE.match(fields.get("exitcode", ""))
    if not rank or not code:
        return None
    return {"rank": int(rank.group(1)), "local_rank": int(rank.group(2)),
            "exitcode": int(code.group(1)), "pid": int(code.group(2)),
            "host": fields.get("host") or None, "time": fields.get("time") or None}


def same_exception(deaths: pl.DataFrame, root: dict[str, Any]) -> list[int]:
    """The processes that died of the root's exception (the same exception line) within a
    second of it (FAN_OUT): when more than the root, no single root can be told."""
    if root.get("_exc") is None or root.get("_at") is None:
        return []
    at: datetime = root["_at"]
    same = deaths.filter((pl.col("_exc").str.strip_chars() == str(root["_exc"]).strip())
                         & pl.col("proc").is_not_null() & pl.col("_at").is_not_null()
                         & ((pl.col("_at") - at).abs() <= FAN_OUT))
    return sorted({int(p) for p in same["proc"].to_list()})
