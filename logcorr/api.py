"""`analyze(...)`: the one place the stages are chained, a chunk of lines at a time.

pass 1 (survey):      paths -> the compiled core reads and parses every chunk and keeps only
                      small whole-set tables (key rows, server_args lines, exception headers,
                      each file's first time, the dated times' counts)
whole set:            launch config (given, or the server_args line in the logs) -> topology ->
                      resolve.resolve_keys (a process per distinct key row)
pass 2 (attribution): the core reads and parses each chunk again and attributes it (record
                      grammar, a file's own process, completed time, sort key, contract
                      columns) -> sorted run (stream.py), counts and event rows
diagnosis:            the events and counts gathered per chunk -> findings
The timeline is then read from the runs by their merge (`Analysis.batches`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from logcorr import _core, heap
from logcorr.config import (
    LaunchConfig,
    config_from_fields,
    fields_from_server_args_line,
    with_overrides,
)
from logcorr.diagnose import (
    Context,
    Finding,
    diagnose,
    merge_people,
    thin_events,
)
from logcorr.diagnose.context import ALL_STEMS, CHILD_DIED, GLOG_FATAL, PROGRESS_STEMS, WRAP_MIN
from logcorr.errors import ConfigError, CoreError, InputError
from logcorr.ingest import Skipped, Source
from logcorr.model import COORDINATES, TIMELINE_SCHEMA
from logcorr.output import time_condition
from logcorr.resolve import (
    Attribution,
    crowded_headers,
    resolve_keys,
)
from logcorr.selector import Selector
from logcorr.start import Started, given_topology, start_reading
from logcorr.stream import (
    NO_TIME,
    SORT_COLUMNS,
    Key,
    Piece,
    Run,
    Workspace,
    compact,
    count_at_most,
    count_before,
    key_of,
    memory_budget_for,
    merge,
    numbered,
    piece_rows,
    sorted_by_key,
    write_run,
)
from logcorr.topology import PREFIX_TOKENS, Topology, build_topology, sizes_of

Progress = Callable[[str, int, int], None]
_T = TypeVar("_T")
# Columns the runs keep beside the output contract (for `detail` and record lookups).
DETAIL_COLUMNS = ("file_id", "proc", "record", "why")
STAGES = ("reading", "parsing", "attributing", "diagnosing", "done")
KEEP_ROWS = 1000  # rows of the timeline's head and tail kept for the terminal
PENDING_ROWS = 1_000_000  # a file's untimed opening rows held back waiting for its first time
EVENT_ROWS = 200_000  # event rows read before their repeats are cut again
THIN_CHUNK_ROWS = 4096  # a chunk's event rows whose repeats are cut as they come
EVENT_BYTES = 64 << 20  # event rows held through pass 2 before the rest are stored
LOOSE_BYTES = 4 << 20  # event rows held as the core gave them before they are copied
KEPT_ROWS = 1 << 16  # rows the lean view gathers before cutting them to the timeline's ends


@dataclass
class Tally:
    """Counts gathered chunk by chunk, so the whole timeline never has to be read again."""

    lines: int = 0
    evidence: dict[str, int] = field(default_factory=dict)
    why: dict[str, int] = field(default_factory=dict)
    procs: set[int] = field(default_factory=set)
    file_procs: list[pl.DataFrame] = field(default_factory=list)  # file_id, proc, len, line
    people: list[pl.DataFrame] = field(default_factory=list)
    last: list[pl.DataFrame] = field(default_factory=list)
    # the diagnosis's event rows, their repeats cut as they come (`EventRows`)
    events: pl.DataFrame | None = None
    progress: list[pl.DataFrame] = field(default_factory=list)  # proc, ts_full of batch lines
    # lines whose stamp gave no time, by reason; lines cut short at `parts.MAX_PARTS` parts
    notes: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(counts: dict[str, Any]) -> Tally:
        """The counts the core gathered in pass 2 (`LogSet.tally`)."""
        tally = Tally(lines=int(counts["lines"]), evidence=dict(counts["evidence"]),
                      why=dict(counts["why"]), notes=dict(counts["notes"]),
                      procs=set(counts["procs"]))
        if counts["capped"]:
            tally.notes[f"lines cut at {_core.MAX_PARTS} parts"] = int(counts["capped"])
        tally.people = [pl.DataFrame(counts["people"])]
        tally.last = [pl.DataFrame(counts["last"])]
        tally.progress = [pl.DataFrame(counts["progress"])]
        tally.file_procs = [pl.DataFrame(counts["file_procs"])]
        return tally


@dataclass
class Analysis:
    """Everything `analyze` found. The timeline itself stays in sorted runs on disk and is
    read a batch at a time (`batches`); `timeline` and `detail` read it whole."""

    runs: list[Run]
    tally: Tally
    topology: Topology | None
    topology_source: str | None  # "--config FILE", "server_args line in FILE", or None
    sources: list[Source]
    workspace: Workspace | None = None
    warnings: list[str] = field(default_factory=list)
    contradictions: list[dict[str, object]] = field(default_factory=list)
    host_nodes: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # files not read, with size and why
    _whole: dict[str, pl.DataFrame] = field(default_factory=dict)
    # the lean view (`analyze(keep=…)`): no runs, but the timeline's first and last rows
    # (`kept`) and the files to read again (`logs`) when more is asked for
    kept: pl.DataFrame | None = None
    logs: Any = None
    # with runs: the timeline's first and last KEEP_ROWS rows (`head`, `tail` need no merge)
    ends: pl.DataFrame | None = None

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        """The timeline in order, a batch at a time, with `order`; `columns` selects (default:
        the output contract). Without runs (the lean view), the files are read again."""
        wanted = list(TIMELINE_SCHEMA) if columns is None else list(columns)
        stored = [c for c in wanted if c != "order"]
        if self.kept is not None and not self.runs:
            if self.kept.height == self.tally.lines:
                for batch in numbered([self.kept.select(stored)] if self.kept.height else []):
                    yield batch.select(wanted)
                return
            self.runs = _read_again(self.logs, self.workspace, len(self.sources))
        for batch in numbered(merge(self.runs, stored)):
            yield batch.select(wanted)

    def rows_of(self, files: list[int]) -> pl.LazyFrame:
        """The rows of these files (the runs' columns), for the diagnosis's lookups: the
        stored runs, or (the lean view) the files read again."""
        if self.runs or self.kept is None:
            return _lazy_rows(self.runs).filter(pl.col("file_id").is_in(files))
        return _rows_again(self.logs, files)

    def head(self, count: int) -> pl.DataFrame:
        """The first `count` rows of the timeline (contract columns), without a merge."""
        rows = self._ends().head(count)
        if rows.height == 0:
            return _empty_timeline()
        return rows.with_columns(pl.int_range(rows.height, dtype=pl.UInt64).alias("order")
                                 ).select(list(TIMELINE_SCHEMA))

    def tail(self, count: int) -> pl.DataFrame:
        """The last `count` rows of the timeline (contract columns), without a merge."""
        rows = self._ends().tail(count)
        if rows.height == 0:
            return _empty_timeline()
        start = self.tally.lines - rows.height
        return rows.with_columns(pl.int_range(start, start + rows.height, dtype=pl.UInt64)
                                 .alias("order")).select(list(TIMELINE_SCHEMA))

    def _ends(self) -> pl.DataFrame:
        ends = self.kept if self.kept is not None else self.ends
        return ends if ends is not None else pl.DataFrame()

    @property
    def timeline(self) -> pl.DataFrame:
        """The whole timeline (TIMELINE_SCHEMA) in memory: for small sets and tests."""
        if "timeline" not in self._whole:
            self._whole["timeline"] = _concat(self.batches(), _empty_timeline())
        return self._whole["timeline"]

    @property
    def detail(self) -> pl.DataFrame:
        """The timeline with the resolver's columns (DETAIL_COLUMNS) too, in memory."""
        if "detail" not in self._whole:
            columns = [*TIMELINE_SCHEMA, *DETAIL_COLUMNS]
            self._whole["detail"] = _concat(self.batches(columns), pl.DataFrame())
        return self._whole["detail"]

    def coverage(self) -> dict[str, object]:
        expected = len(self.topology.processes) if self.topology is not None else 0
        return {"expected_processes": expected, "processes_seen": len(self.tally.procs),
                "files": len(self.sources), "lines": self.tally.lines,
                "lines_attributed": sum(self.tally.evidence.values()),
                "files_skipped": [s.to_json() for s in self.skipped],
                "line_notes": dict(sorted(self.tally.notes.items()))}

    def report(self) -> dict[str, object]:
        """The `--report` document: findings and coverage."""
        return {"findings": [f.to_json() for f in self.findings], "coverage": self.coverage()}

    def evidence_counts(self) -> dict[str, int]:
        return dict(self.tally.evidence)

    def unattributed_reasons(self) -> dict[str, int]:
        return dict(self.tally.why)


def _concat(batches: Iterator[pl.DataFrame], empty: pl.DataFrame) -> pl.DataFrame:
    frames = list(batches)
    return pl.concat(frames) if frames else empty


def _empty_timeline() -> pl.DataFrame:
    return pl.DataFrame(schema=TIMELINE_SCHEMA)


def analyze(
    paths: Sequence[str | Path],
    *,
    config: str | Path | LaunchConfig | None = None,
    sglang_version: str | None = None,
    clock_offsets: dict[str, float] | None = None,
    validate: bool = True,
    progress: Progress | None = None,
    chunk_bytes: int | None = None,
    memory_budget: int | None = None,
    keep: int | None = None,
    threads: int | None = None,
    engine: str = "local",
    ray: RayOptions | None = None,
    started: Started | None = None,
) -> Analysis:
    """Parse, attribute and align every line under `paths`, a chunk at a time.

    `progress(stage, done, total)` reports each of the STAGES (parsing and attributing count
    bytes). `chunk_bytes` (default: `start.CHUNK_BYTES`, whatever the set's size) bounds how
    much text is worked on at once. `keep` (the lean view: a terminal shows the timeline's
    head and tail): no runs are written, only the first and last `keep` rows of the timeline
    are kept, and the files are read again for anything more (`Analysis.batches`,
    `Analysis.rows_of`). `threads`: the core's workers (default: LOGCORR_THREADS, else one
    per core); the answers are the same with any number. `engine="ray"` runs the passes as
    tasks on a Ray cluster (`ray`: where, and where the timeline's partitions go; see
    logcorr.engine_ray): the same answers. `started`: the same analysis with its topology
    built and pass 1 already under way (`start.start_reading` on these arguments; the
    command line starts it before importing polars).
    """
    report = progress or (lambda stage, done, total: None)
    if started is None:
        given = given_topology(config, sglang_version, validate)  # (a bad one: before any line)
        if engine != "local":
            from logcorr.engine_ray import analyze_on_ray  # (Ray is imported only when used)

            if engine != "ray":
                raise InputError(f"unknown engine {engine!r}: use local or ray")
            return analyze_on_ray(paths, given, sglang_version, validate, clock_offsets, report,
                                  chunk_bytes, ray or RayOptions())
        report("reading", 0, 1)
        started = start_reading(paths, given, chunk_bytes, threads)
    given, sources, logs, total = started.given, started.sources, started.logs, started.total
    warnings, skipped = started.warnings, started.skipped
    survey = _survey(logs, total, warnings, report)
    workspace = Workspace(memory_budget if memory_budget is not None
                          else memory_budget_for(total, int(survey["lines"])))
    try:
        whole = whole_set(survey, given, sources, sglang_version, validate)
        logs.start_attribution(attribution_arguments(whole, survey, sources, clock_offsets),
                               keep)
        runs, tally, ends = _attribute_pass(logs, total, warnings, workspace,
                                            piece_rows(len(sources)), report, keep)
        analysis = Analysis(runs, tally, whole.topology, whole.topology_source, sources,
                            workspace, warnings, host_nodes=whole.attribution.host_nodes,
                            skipped=skipped, kept=ends if keep is not None else None,
                            logs=logs, ends=ends if keep is None else None)
        report("diagnosing", 0, 1)
        events, tally.events = tally.events, None
        diagnosed(analysis, whole, events if events is not None else pl.DataFrame())
        heap.release_if_above()
    except BaseException:
        workspace.close()
        raise
    report("done", 1, 1)
    return analysis


def _survey(logs: Any, total: int, warnings: list[str], report: Progress) -> dict[str, Any]:
    """Pass 1: every chunk read and parsed by the core, only the whole-set tables kept."""
    done = 0
    report("parsing", 0, max(1, total))
    while (read := _core_call(logs.survey_step)) is not None:
        done += read
        report("parsing", min(done, max(1, total)), max(1, total))
    warnings += logs.take_warnings()
    return survey_frames(logs.survey_tables())


def survey_frames(tables: dict[str, Any]) -> dict[str, Any]:
    """Pass 1's tables (`survey_tables`), the server_args lines and the exception seconds
    as frames."""
    tables["headers"] = pl.DataFrame(tables["headers"])
    tables["server_args"] = pl.DataFrame(
        tables["server_args"], schema={"file_id": pl.UInt32, "line": pl.UInt32,
                                       "text": pl.String}, orient="row")
    return tables


def _core_call(step: Callable[[], _T]) -> _T:
    """A step of the core; a failure it caught (a bug: a panic on some chunk) ends the run as
    one error line naming the files, never a traceback."""
    try:
        done = step()
    except RuntimeError as error:
        raise CoreError(f"{error}; please report it with the files named") from None
    heap.release_if_above()  # (the chunks' freed blocks: see logcorr.heap)
    return done


def _headers(seconds: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The exception seconds (`resolve.crowded_headers`): (second, key row) of every
    exception header with a time, as `_second`, `_key` and the key row's file and stream."""
    return (seconds.with_columns(pl.col("_second").cast(pl.Datetime("us")))
            .join(keys.select("_key", "file_id", "stream"), on="_key", how="left",
                  maintain_order="left"))


@dataclass
class RayOptions:
    """Where `analyze(engine="ray")` runs and writes: `address` of a running cluster (None:
    start one on this machine; "auto": the one this machine belongs to), `cpus` (the local
    cluster's CPUs, or at most this many tasks at once on a cluster), `output` (the folder
    of the timeline's parquet partitions; None: a temporary folder, removed with the
    analysis, and the partitions hold the detail columns too), `range_rows` (rows per
    partition, about), `group_bytes` (bytes of small files a task reads together; None: two
    groups a CPU, at most parts.GROUP_BYTES)."""

    address: str | None = None
    cpus: int | None = None
    output: str | Path | None = None
    range_rows: int = 1 << 19
    group_bytes: int | None = None


@dataclass
class WholeSet:
    """What the whole set says once pass 1 is read: the topology and where it came from,
    each file's node (its server_args line's node_rank), every key row's process, the
    seconds crowded with several processes' exception headers, and the notes (contradictions)
    found on the way."""

    topology: Topology | None
    topology_source: str | None
    file_nodes: dict[int, int]
    attribution: Attribution
    crowded: pl.DataFrame
    notes: list[dict[str, object]]


def whole_set(survey: dict[str, Any], given: tuple[Topology, str] | None,
              sources: list[Source], sglang_version: str | None, validate: bool) -> WholeSet:
    """The whole set's tables from pass 1's (`LogSet.survey_tables`): small, whatever the
    number of lines, and the same whatever order the parts of the set were read in (pass 1
    merges them in file order)."""
    declared, notes = _server_args_lines([survey["server_args"]], sources, sglang_version)
    topology, topology_source = _topology(given, declared, validate, notes)
    file_nodes = _file_nodes(declared, topology, notes)
    keys = pl.DataFrame(survey["keys"])
    attribution = resolve_keys(keys, topology, file_nodes, survey.get("rank_spans"))
    crowded = crowded_headers(_headers(survey["headers"], keys), attribution)
    return WholeSet(topology, topology_source, file_nodes, attribution, crowded, notes)


def diagnosed(analysis: Analysis, whole: WholeSet, events: pl.DataFrame) -> None:
    """Set the contradictions and findings of an analysis whose two passes are done
    (`events`: the event rows gathered, their repeats cut)."""
    tally, sources, attribution = analysis.tally, analysis.sources, whole.attribution
    contradictions = [*attribution.contradictions, *whole.notes,
                      *_node_mismatches(tally, attribution, whole.file_nodes)]
    analysis.contradictions = [_name_file(c, sources) for c in contradictions]
    context = Context(analysis.rows_of, whole.topology,
                      {s.file_id: s.display for s in sources}, merge_people(tally.people),
                      events, _last_lines(tally.last), _progress_times(tally.progress),
                      _stack(tally.file_procs).select("file_id", "proc").unique())
    analysis.findings = diagnose(context, analysis.contradictions)


def attribution_arguments(whole: WholeSet, survey: dict[str, Any], sources: list[Source],
                          clock_offsets: dict[str, float] | None) -> dict[str, Any]:
    """What the core's `start_attribution` is handed of the whole set: per key row its
    process, evidence, role and host; the files that belong to one process or to several;
    the processes' coordinates; the clock; what makes a line an event row (plain values:
    they travel to other machines)."""
    attribution, crowded, file_nodes = whole.attribution, whole.crowded, whole.file_nodes
    table = attribution.table.sort("_key")
    if table.get_column("_key").to_list() != list(range(table.height)):
        raise AssertionError("every key row is resolved once")  # a bug, never the input's
    rows = attribution.processes.iter_rows(named=True)
    known = {int(row["proc"]): tuple(row[c] for c in COORDINATES) for row in rows}
    coordinates = [known.get(proc, (None,) * len(COORDINATES))
                   for proc in range(max(known, default=-1) + 1)]
    return {
        "proc": table.get_column("proc").to_list(),
        "evidence": table.get_column("evidence").to_list(),
        "conflict": table.get_column("conflict").to_list(),
        "roles": table.get_column("_role").to_list(),
        "eff_host": table.get_column("eff_host").to_list(),
        "crowded": [(f, s, _micros(t)) for f, s, t in crowded.iter_rows()],
        "shared": attribution.shared_files,
        "file_procs": [tuple(r) for r in attribution.file_procs.iter_rows()],
        "local_ranks": None if attribution.local_ranks is None
        else [tuple(r) for r in attribution.local_ranks.iter_rows()],
        "processes": coordinates,
        "file_nodes": list(file_nodes.items()),
        "file_names": [(s.file_id, s.display) for s in sources],
        "first_dated": survey["first_dated"],
        "median": survey["median"],
        "wrap_default": survey["wrap_default"],
        "clock_offsets": [(host, timedelta(seconds=seconds) // timedelta(microseconds=1))
                          for host, seconds in (clock_offsets or {}).items()],
        "events": (list(ALL_STEMS), CHILD_DIED, GLOG_FATAL, list(PROGRESS_STEMS), WRAP_MIN),
        "plain": attribution.plain,
    }


def _micros(value: datetime) -> int:
    return (value - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def _attribute_pass(logs: Any, total: int, warnings: list[str], workspace: Workspace,
                    rows: int, report: Progress, keep: int | None = None
                    ) -> tuple[list[Run], Tally, pl.DataFrame]:
    """Pass 2: each chunk attributed by the core, sorted and written as a run (the next
    chunk of the same file extends it), its event rows gathered. A file's opening rows that
    have no time yet wait (stored like the chunks) for its first time. Also gives the
    timeline's first and last rows: KEEP_ROWS of each, or with `keep` (the lean view, which
    writes no run) `keep` of each and the rows of files still waiting for their time."""
    runs: list[Run] = []
    events = EventRows(workspace)
    waiting: dict[int, _Pending] = {}
    kept = _Kept(KEEP_ROWS if keep is None else keep)
    done = 0

    def write(frame: pl.DataFrame) -> None:
        _write(workspace, frame, runs, rows, kept)

    report("attributing", 0, max(1, total))
    while (step := _core_call(logs.attribute_step)) is not None:
        batch, settled, read = step
        frame = pl.DataFrame(batch)
        if keep is not None:
            kept.add(frame[_STORED], settled)
        else:
            untimed = frame.get_column("_sk").is_null()
            if untimed.any():
                for (file_id,), held in frame.filter(untimed).group_by("file_id",
                                                                       maintain_order=True):
                    waiting.setdefault(int(file_id), _Pending(workspace, int(file_id))
                                       ).add(held)
                frame = frame.filter(~untimed)
            for file_id, key in settled:
                if file_id in waiting:
                    waiting.pop(file_id).write(key, write)
            write(frame)
        events.add_chunk(pl.DataFrame(logs.take_events()))
        done += read
        report("attributing", min(done, max(1, total)), max(1, total))
    if waiting:
        raise AssertionError("the core settles every waiting file")  # a bug, not the input's
    # (what was stored - an export's runs, event rows - is read back next, on top of the
    # pages the chunks freed: those go back first; the lean view reads little more, and a
    # trim of half a GB of free pages costs it 0.05 s)
    if keep is None or events.stored:
        heap.release()
    else:
        heap.release_if_above()
    warnings += logs.take_warnings()
    tally = Tally.of(logs.tally())
    tally.events = events.rows()
    return [r for r in runs if r.rows], tally, kept.rows()


# The columns the runs store: the output contract (but `order`, given by the merge), the
# resolver's detail, the message under a wrapper (for the diagnosis's reading of records) and
# the sort key.
_STORED = [*(c for c in TIMELINE_SCHEMA if c != "order"), *DETAIL_COLUMNS, "msg", "_sk"]


class _Kept:
    """The timeline's first and last `keep` rows so far, and (the lean view) the rows of
    files that still wait for their first time (their place is not known yet).

    Few rows come a chunk (in the lean view, each file's first and last `keep` the core hands
    over; else a sorted chunk's first and last `keep`), in buffers of their own: they are
    gathered as they come and cut down to the ends only when more than KEPT_ROWS wait, when a
    waiting file's time comes, and at the end."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.frames: list[pl.DataFrame] = []
        self.held = 0
        self.settled: dict[int, int] = {}  # file -> the key its waiting rows take
        # the keys of the `keep`-th timed row from the start and from the end (when as many
        # are held): a row after the first or before the second can be in neither end
        self.low: Key | None = None
        self.high: Key | None = None

    def offer(self, frame: pl.DataFrame) -> None:
        """The rows of `frame` (sorted by the timeline key, every row timed) that may be among
        the timeline's ends, copied (most chunks of a long set offer none)."""
        keep, height = self.keep, frame.height
        head = keep if self.low is None else min(keep, count_before(frame, self.low))
        tail = keep if self.high is None else min(keep, height - count_at_most(frame, self.high))
        if head + tail >= height:
            rows = frame
        elif head + tail == 0:
            return
        else:
            rows = pl.concat([frame.head(head), frame.tail(tail)])
        self.add(compact(rows), [])
        if self.held > 4 * keep:  # (the bounds tighten)
            self._cut()

    def add(self, rows: pl.DataFrame, settled: list[tuple[int, int | None]]) -> None:
        if rows.height or not self.frames:
            self.frames.append(rows)
            self.held += rows.height
        for file_id, key in settled:
            self.settled[file_id] = NO_TIME if key is None else key
        # (settled rows take their key at once: a file's later rows may wait again)
        if self.settled or self.held > max(KEPT_ROWS, 8 * self.keep):
            self._cut()

    def _cut(self) -> None:
        frame = pl.concat(self.frames, how="vertical_relaxed") if len(self.frames) > 1 \
            else self.frames[0]
        if self.settled:
            files = pl.DataFrame({"file_id": list(self.settled), "_key": list(self.settled.values())},
                                 schema={"file_id": frame.schema["file_id"], "_key": pl.Int64})
            frame = (frame.join(files, on="file_id", how="left", maintain_order="left")
                     .with_columns(pl.col("_sk").fill_null(pl.col("_key"))).drop("_key"))
            self.settled = {}
        timed = frame.filter(pl.col("_sk").is_not_null()).sort(SORT_COLUMNS)
        ends = pl.concat([timed.head(self.keep), timed.tail(self.keep)]) \
            if timed.height > 2 * self.keep else timed
        if timed.height >= self.keep:
            self.low = key_of(timed, self.keep - 1)
            self.high = key_of(timed, timed.height - self.keep)
        waiting = frame.filter(pl.col("_sk").is_null())
        if waiting.height > 2 * self.keep:
            # (a waiting file's rows will all take one key: only its first and last `keep`
            # rows can be among the timeline's ends)
            waiting = waiting.sort(SORT_COLUMNS[1:])
            at, size = pl.int_range(pl.len()).over("file_id"), pl.len().over("file_id")
            waiting = waiting.filter((at < self.keep) | (at >= size - self.keep))
        self.frames = [compact(pl.concat([ends.unique(["file_id", "line", "part"],
                                                      maintain_order=True), waiting]))]
        self.held = self.frames[0].height

    def rows(self) -> pl.DataFrame:
        if self.frames:
            self._cut()
        frame = self.frames[0] if self.frames else pl.DataFrame()
        return frame.sort(SORT_COLUMNS) if frame.height else \
            pl.DataFrame(schema={**TIMELINE_SCHEMA, "_sk": pl.Int64}).drop("order")


def _read_again(logs: Any, workspace: Workspace | None, files: int) -> list[Run]:
    """The runs of the whole timeline, from the files read again (the lean view, asked for
    every row)."""
    runs: list[Run] = []
    store = workspace if workspace is not None else Workspace()
    reading = logs.rows_of(list(range(files)))
    while (batch := _core_call(reading.next_chunk)) is not None:
        frame = pl.DataFrame(batch)[_STORED]
        _write(store, frame.with_columns(pl.col("_sk").fill_null(NO_TIME)), runs,
               piece_rows(files))
    return [r for r in runs if r.rows]


def _rows_again(logs: Any, files: list[int]) -> pl.LazyFrame:
    """The rows of some files, read again."""
    reading = logs.rows_of(files)
    frames = []
    while (batch := _core_call(reading.next_chunk)) is not None:
        frames.append(pl.DataFrame(batch)[_STORED])
    if not frames:
        return _lazy_rows([])
    return pl.concat(frames).lazy()


class _Pending:
    """A file's opening rows that have no time yet, stored like the chunks (a file with no
    time at all, an NCCL debug file, would otherwise be held whole in memory) until the
    core says which sort key they take."""

    def __init__(self, workspace: Workspace, file_id: int) -> None:
        self.workspace = workspace
        self.file_id = file_id
        self.pieces: list[Piece] = []

    def add(self, held: pl.DataFrame) -> None:
        self.pieces.append(self.workspace.write(held, "pending"))

    def write(self, key: int | None, write: Callable[[pl.DataFrame], None]) -> None:
        """Hand the held rows to `write` with the sort key `key` (None: after every timed
        row), letting each piece go once read."""
        for piece in self.pieces:
            rows = piece.read()
            self.workspace.release(piece)
            write(rows.with_columns(pl.lit(NO_TIME if key is None else key, pl.Int64)
                                    .alias("_sk")))
        self.pieces = []


def _write(workspace: Workspace, frame: pl.DataFrame, runs: list[Run], rows: int,
           ends: _Kept | None = None) -> None:
    """`frame` sorted and written as a run; its first and last rows offered to `ends`."""
    if frame.height == 0:
        return
    frame = sorted_by_key(frame.with_columns(pl.col("_sk").fill_null(NO_TIME)))[_STORED]
    write_run(workspace, frame, runs, rows)
    if ends is not None:
        ends.offer(frame)


class EventRows:
    """The diagnosis's event rows as the chunks give them, their repeats cut (`thin_events`):
    a chunk's when it has more than THIN_CHUNK_ROWS, and all held whenever more than
    EVENT_ROWS, and twice as many as the last cut kept, are held. So as many rows are held as
    say different things, whatever the size of the set. Past EVENT_BYTES held (a set of
    many different event lines), the chunks' rows are stored in `workspace` like the chunks
    and read back at the end, in the same order, so the cuts are the same."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self.workspace = workspace
        self.frames: list[pl.DataFrame] = []
        self.held = 0  # rows
        self.bytes = 0
        self.kept = 0
        self.loose = 0  # frames at the end of `frames` as the core gave them, and their bytes
        self.loose_bytes = 0
        self.stored: list[Piece] = []

    def add_chunk(self, events: pl.DataFrame) -> None:
        if events.height > THIN_CHUNK_ROWS:  # (a copy: the cut rows keep the chunk's buffers)
            events = compact(thin_events(events))
        if self.workspace is not None and (self.stored or self.bytes > EVENT_BYTES):
            self.stored.append(self.workspace.write(compact(events), "events"))
        else:
            self.add(events)

    def add(self, events: pl.DataFrame) -> None:
        if events.height == 0 and self.frames:
            return
        self.frames.append(events)
        self.held += events.height
        size = int(events.estimated_size())
        self.bytes += size
        self.loose += 1
        self.loose_bytes += size
        if self.loose_bytes > LOOSE_BYTES:
            # (the core's frames cost more than their rows: the chunks' since the last copy
            # are copied together)
            self.frames[-self.loose:] = [compact(_stack(self.frames[-self.loose:]))]
            self.loose = self.loose_bytes = 0
        if self.held > max(EVENT_ROWS, 2 * self.kept):
            # (a copy: a cut frame would keep the buffers of the rows it left out)
            self.frames = [compact(thin_events(_stack(self.frames)))]
            self.held = self.kept = self.frames[0].height
            self.bytes = int(self.frames[0].estimated_size())
            self.loose = self.loose_bytes = 0

    def rows(self) -> pl.DataFrame:
        for piece in self.stored:
            self.add(piece.read())
            if self.workspace is not None:
                self.workspace.release(piece)
        self.stored = []
        return thin_events(_stack(self.frames)) if self.frames else _stack(self.frames)


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The frames one under the other (an empty one keeps the columns of the first)."""
    full = [f for f in frames if f.height]
    if not full:
        return frames[0] if frames else pl.DataFrame()
    return pl.concat(full, how="diagonal_relaxed")


def _lazy_rows(runs: list[Run]) -> pl.LazyFrame:
    pieces = [p.scan() for r in runs for p in r.pieces]
    if not pieces:
        return pl.LazyFrame(schema={**TIMELINE_SCHEMA, "file_id": pl.UInt32, "proc": pl.UInt32,
                                    "record": pl.UInt32, "msg": pl.String})
    return pl.concat(pieces)


def _last_lines(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """proc -> its latest time and its last line in timeline order."""
    frame = _stack(parts)
    if frame.height == 0:
        return pl.DataFrame(schema={"proc": pl.UInt32, "ts_full": pl.Datetime("us"),
                                    "file_id": pl.UInt32, "line": pl.UInt32})
    return (frame.sort(SORT_COLUMNS).group_by("proc")
            .agg(pl.col("ts_full").max(), pl.col("file_id").last(), pl.col("line").last()))


def _progress_times(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """proc -> the time of its latest batch-statistics line."""
    frame = _stack(parts)
    if frame.height == 0:
        return pl.DataFrame(schema={"proc": pl.UInt32, "ts_full": pl.Datetime("us")})
    return frame.group_by("proc").agg(pl.col("ts_full").max())


@dataclass(frozen=True)
class _Declared:
    """A server_args line found in the logs, read into a launch config."""

    file_id: int
    line: int
    where: str
    config: LaunchConfig


def _server_args_lines(found: list[pl.DataFrame], sources: list[Source], version: str | None
                       ) -> tuple[list[_Declared], list[dict[str, object]]]:
    """Every readable server_args line; an unreadable one is a contradiction, not an error."""
    declared: list[_Declared] = []
    notes: list[dict[str, object]] = []
    rows = _stack(found)
    for file_id, line, text in (rows.iter_rows() if rows.height else ()):
        where = f"{sources[file_id].display}:{line}"
        try:
            values = fields_from_server_args_line(text)
            config = config_from_fields(values, source=f"server_args line in {where}",
                                        sglang_version=version)
        except ConfigError as error:
            notes.append(_note("server-args-unreadable", f"{error}; the line is ignored",
                               file_id, line))
            continue
        declared.append(_Declared(file_id, line, where, config))
    layouts = {tuple(asdict(sizes_of(d.config)).values()): d.where for d in declared}
    if len(layouts) > 1:
        notes.append(_note("server-args-differ", "server_args lines disagree on the layout: "
                           + "; ".join(sorted(layouts.values())) + " (the first one is used)"))
    return declared, notes


def _note(kind: str, detail: str, file_id: int | None = None, line: int | None = None
          ) -> dict[str, object]:
    return {"kind": kind, "count": 1, "detail": detail, "file_id": file_id, "line": line}


def _topology(given: tuple[Topology, str] | None, declared: list[_Declared], validate: bool,
              notes: list[dict[str, object]]) -> tuple[Topology | None, str | None]:
    """The topology from --config (`given`), else from the first server_args line in the
    logs (a bad one is a contradiction; analysis goes on without)."""
    if given is not None:
        ours = asdict(given[0].sizes)
        for found in declared:
            theirs = asdict(sizes_of(found.config))
            differs = [k for k in ours if ours[k] != theirs[k]]
            if differs:
                notes.append(_note("config-differs-from-logs", (
                    f"the server_args line in {found.where} gives "
                    + ", ".join(f"{k} {theirs[k]}" for k in differs) + " but the config gives "
                    + ", ".join(f"{k} {ours[k]}" for k in differs)), found.file_id, found.line))
        return given
    if not declared:
        return None, None
    first = declared[0]
    try:
        topology = build_topology(with_overrides(first.config, node_rank=None),
                                  validate=validate)
    except ConfigError as error:
        notes.append(_note("server-args-rejected", f"{error}; analysed without a topology",
                           first.file_id, first.line))
        return None, None
    return topology, f"server_args line in {first.where.rsplit(':', 1)[0]}"


def _file_nodes(declared: list[_Declared], topology: Topology | None,
                notes: list[dict[str, object]]) -> dict[int, int]:
    """file_id -> node_rank its server_args lines name (when they agree and the node exists)."""
    nodes: dict[int, set[int]] = {}
    for found in declared:
        node = found.config.node_rank
        if node is None:
            continue
        if topology is not None and not 0 <= node < topology.sizes.nnodes:
            notes.append(_note("node-rank-outside-topology", (
                f"the server_args line in {found.where} says node_rank {node}, outside the "
                f"topology's {topology.sizes.nnodes} node(s)"), found.file_id, found.line))
            continue
        nodes.setdefault(found.file_id, set()).add(node)
    return {f: next(iter(n)) for f, n in nodes.items() if len(n) == 1}


def _node_mismatches(tally: Tally, attribution: Attribution, file_nodes: dict[int, int]
                     ) -> list[dict[str, object]]:
    """Files whose server_args node_rank disagrees with the node of the processes in them."""
    counts = _stack(tally.file_procs)
    if not file_nodes or counts.height == 0:
        return []
    counts = counts.filter(pl.col("file_id").is_in(list(file_nodes)))
    nodes = attribution.processes.select("proc", "node_rank")
    rows = (counts.group_by("file_id", "proc").agg(pl.col("len").sum(), pl.col("line").min())
            .join(nodes, on="proc").sort("file_id", "line"))
    notes: list[dict[str, object]] = []
    for (file_id,), group in rows.group_by("file_id", maintain_order=True):
        declared = file_nodes[int(file_id)]
        other = group.filter(pl.col("node_rank") != declared)
        if other.height:
            lines = int(other["len"].sum())
            notes.append({"kind": "node-rank-mismatch", "count": lines,
                          "file_id": int(file_id), "line": int(other.select(pl.col("line").min()).item()),
                          "detail": f"the server_args line says node_rank {declared} but "
                          f"{lines} line(s) come from processes the topology puts on "
                          f"node(s) {sorted(set(other['node_rank'].to_list()))}; their node and "
                          "GPU are left empty"})
    return notes


def _name_file(contradiction: dict[str, object], sources: list[Source]) -> dict[str, object]:
    file_id = contradiction.get("file_id")
    named = dict(contradiction)
    named["file"] = sources[file_id].display if isinstance(file_id, int) else None
    named.pop("file_id", None)
    return named


def select_rows(analysis: Analysis, selector: Selector | None = None,
                since: str | None = None, until: str | None = None) -> Iterator[pl.DataFrame]:
    """Timeline batches (contract columns) whose coordinates match `selector` (see
    logcorr.selector) and whose own time is inside [since, until]. Bad options raise here,
    before the first batch."""
    if selector is None and since is None and until is None:
        return analysis.batches()
    condition = pl.lit(True)
    if selector is not None:
        for column, value in selector.values.items():
            condition &= pl.col(column) == value
        for token, value in selector.tokens.items():
            condition &= pl.col(PREFIX_TOKENS[token]) == value
        if selector.role is not None:
            condition &= pl.col("role") == selector.role
        if selector.stream is not None:
            condition &= pl.col("stream").str.contains(selector.stream, literal=True)
        if selector.group is not None:
            condition &= _group_condition(analysis.topology, *selector.group)
    if since is not None or until is not None:
        condition &= time_condition(since, until)
    return _filtered(analysis.batches(), condition.fill_null(False))


def _filtered(batches: Iterator[pl.DataFrame], condition: pl.Expr) -> Iterator[pl.DataFrame]:
    for batch in batches:
        kept = batch.filter(condition)
        if kept.height:
            yield kept


def _group_condition(topology: Topology | None, name: str, world_rank: int) -> pl.Expr:
    from logcorr.errors import InputError

    if topology is None:
        raise InputError("--select group=... needs the topology: pass --config or logs with a "
                         "server_args line")
    members = list(topology.group_instance(name, world_rank))
    return pl.col("world_rank").is_in(members)
