"""`analyze(...)`: the one place the stages are chained, a chunk of lines at a time.

parse pass:       paths -> ingest (lines, in chunks) -> formats (fields) -> spill, plus the
                  small whole-set tables (key rows, server_args lines, exception headers)
whole set:        launch config (given, or the server_args line in the logs) -> topology ->
                  resolve.resolve_keys (a process per distinct key row)
attribution pass: spilled chunk -> resolve.attribute -> timeline (completed time, sort key)
                  -> output contract (model.TIMELINE_SCHEMA) -> sorted run (stream.py)
diagnosis:        the events and counts gathered per chunk -> findings
The timeline is then read from the runs by their merge (`Analysis.batches`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import chain, pairwise
from pathlib import Path
from typing import Any

import polars as pl

from logcorr.config import (
    LaunchConfig,
    config_from_fields,
    fields_from_server_args_line,
    load_config,
    with_overrides,
)
from logcorr.diagnose import (
    PROGRESS_STEMS,
    Context,
    Finding,
    diagnose,
    event_rows,
    merge_people,
    thin_events,
)
from logcorr.errors import ConfigError
from logcorr.formats import parse
from logcorr.formats.parts import MAX_PARTS
from logcorr.ingest import Skipped, Source, discover, empty_lines
from logcorr.model import COORDINATES, TIMELINE_SCHEMA
from logcorr.output import time_condition
from logcorr.resolve import (
    Attribution,
    attribute,
    crowded_headers,
    exception_seconds,
    key_rows,
    local_columns,
    merge_key_rows,
    next_ghost,
    resolve_keys,
)
from logcorr.selector import Selector
from logcorr.stream import (
    CHUNK_BYTES,
    SORT_COLUMNS,
    Piece,
    Run,
    Workspace,
    compact,
    head,
    line_batches,
    memory_budget_for,
    merge,
    numbered,
    piece_rows,
    sorted_by_key,
    tail,
    time_key,
    write_run,
)
from logcorr.timeline import (
    Carry,
    Clock,
    clock_of,
    complete_timestamps,
    file_values,
    first_dated_rows,
    fully_dated,
    next_carry,
    sort_key,
    ts_text,
)
from logcorr.topology import PREFIX_TOKENS, Topology, build_topology, sizes_of

Progress = Callable[[str, int, int], None]
# Columns the runs keep beside the output contract (for `detail` and record lookups).
DETAIL_COLUMNS = ("file_id", "proc", "record", "why")
# Columns a chunk carries until its events and counts are taken.
_CHUNK_COLUMNS = (*DETAIL_COLUMNS, "msg", "ts_full", "torch_rank", "pg_desc", "pg_rank", "seq", "op",
                  "last_enqueued", "last_completed", "comm", "comm_id", "comm_rank",
                  "comm_nranks", "nccl_phase", "starts_record",
                  "ts_note", "capped")  # (counted: see Tally.notes)
STAGES = ("reading", "parsing", "attributing", "diagnosing", "done")
WORKERS = 2  # chunks parsed at once
PARSE_GROUP = 4  # chunks in a row parsed together (see `_parse_pass`)
PARSE_BYTES = 40 << 20  # and at most this many bytes of them (peak memory grows with it)
CONTEXT_LINES = 2  # lines of the previous chunk a chunk's parse may look back at
KEEP_ROWS = 1000  # rows each run keeps in memory for the terminal's head and tail
PENDING_ROWS = 1_000_000  # a file's untimed opening rows held back waiting for its first time
EVENT_ROWS = 200_000  # event rows read before their repeats are cut again
THIN_CHUNK_ROWS = 4096  # a chunk's event rows whose repeats are cut before they are stored


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
    # the diagnosis's event rows of each chunk, stored like the chunks (they grow with the
    # set: kept in memory through the attribution pass, they raised its peak)
    events: list[Piece] = field(default_factory=list)
    progress: list[pl.DataFrame] = field(default_factory=list)  # proc, ts_full of batch lines
    # lines whose stamp gave no time, by reason; lines cut short at `parts.MAX_PARTS` parts
    notes: dict[str, int] = field(default_factory=dict)

    def add(self, frame: pl.DataFrame, files_with_nodes: list[int]) -> None:
        """Count one sorted chunk of the run frame (one batch of queries: they share the
        scan of the chunk and its rows with a process, and run side by side)."""
        self.lines += frame.height
        needed = {"proc", "file_id", "line", "host", "pid", "ts_full", *COORDINATES,
                  *SORT_COLUMNS}
        lazy = frame.lazy()
        known = lazy.select(c for c in frame.columns if c in needed).filter(
            pl.col("proc").is_not_null())
        progress = (pl.col("text").str.contains_any(PROGRESS_STEMS) & pl.col("proc").is_not_null()
                    & pl.col("ts_full").is_not_null())
        queries = [
            *(lazy.group_by(column).len() for column in ("evidence", "why", "ts_note")),
            lazy.select(pl.col("capped").fill_null(False).sum()),
            known.select(pl.col("proc").unique()),
            known.group_by("proc", "host", "pid").agg(
                pl.len(), *(pl.col(c).first() for c in (*COORDINATES, *SORT_COLUMNS))),
            known.filter(pl.col("ts_full").is_not_null()).group_by("proc").agg(
                pl.col("ts_full").max(), *(pl.col(c).last() for c in SORT_COLUMNS)),
            lazy.filter(progress).group_by("proc").agg(pl.col("ts_full").max()),
        ]
        if files_with_nodes:
            queries.append(known.filter(pl.col("file_id").is_in(files_with_nodes))
                           .group_by("file_id", "proc").agg(pl.len(), pl.col("line").min()))
        evidence, why, notes, capped, procs, people, last, batches, *by_file = \
            pl.collect_all(queries)
        for counted, counts in ((evidence, self.evidence), (why, self.why),
                                (notes, self.notes)):
            for value, n in counted.iter_rows():
                if value is not None:
                    counts[value] = counts.get(value, 0) + n
        cut = int(capped.item() or 0)
        if cut:
            key = f"lines cut at {MAX_PARTS} parts"
            self.notes[key] = self.notes.get(key, 0) + cut
        self.procs.update(procs.get_column("proc").to_list())
        self.file_procs += by_file
        self.people.append(compact(people))
        self.last.append(last)
        if batches.height:
            self.progress.append(batches)

    def extend(self, other: Tally) -> None:
        """Add the counts of the chunks after these."""
        self.lines += other.lines
        for mine, theirs in ((self.evidence, other.evidence), (self.why, other.why),
                             (self.notes, other.notes)):
            for value, n in theirs.items():
                mine[value] = mine.get(value, 0) + n
        self.procs |= other.procs
        for name in ("file_procs", "people", "last", "events", "progress"):
            getattr(self, name).extend(getattr(other, name))


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

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        """The timeline in order, a batch at a time, with `order`; `columns` selects (default:
        the output contract)."""
        wanted = list(TIMELINE_SCHEMA) if columns is None else list(columns)
        stored = [c for c in wanted if c != "order"]
        for batch in numbered(merge(self.runs, stored)):
            yield batch.select(wanted)

    def head(self, count: int) -> pl.DataFrame:
        """The first `count` rows of the timeline (contract columns), without a merge."""
        rows = head(self.runs, count)
        if rows.height == 0:
            return _empty_timeline()
        return rows.with_columns(pl.int_range(rows.height, dtype=pl.UInt64).alias("order")
                                 ).select(list(TIMELINE_SCHEMA))

    def tail(self, count: int) -> pl.DataFrame:
        """The last `count` rows of the timeline (contract columns), without a merge."""
        rows = tail(self.runs, count)
        if rows.height == 0:
            return _empty_timeline()
        start = self.tally.lines - rows.height
        return rows.with_columns(pl.int_range(start, start + rows.height, dtype=pl.UInt64)
                                 .alias("order")).select(list(TIMELINE_SCHEMA))

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


@dataclass
class _Scan:
    """What the parse pass keeps of the whole set: small tables only."""

    chunks: list[Piece] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # each chunk's first, last file
    firsts: list[pl.DataFrame] = field(default_factory=list)  # each chunk's first row
    keys: list[pl.DataFrame] = field(default_factory=list)
    server_args: list[pl.DataFrame] = field(default_factory=list)
    headers: list[pl.DataFrame] = field(default_factory=list)
    first_dated: list[pl.DataFrame] = field(default_factory=list)

    def add(self, parsed: _Parsed) -> None:
        self.chunks += parsed.pieces
        self.spans += parsed.spans
        self.firsts += parsed.firsts
        self.keys.append(parsed.keys)
        self.server_args.append(parsed.server_args)
        self.headers.append(parsed.headers)
        self.first_dated.append(parsed.first_dated)


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
) -> Analysis:
    """Parse, attribute and align every line under `paths`, a chunk at a time.

    `progress(stage, done, total)` reports each of the STAGES (parsing counts bytes,
    attributing chunks). `chunk_bytes` (default: `stream.CHUNK_BYTES`, whatever the
    set's size) bounds how much text is worked on at once.
    """
    report = progress or (lambda stage, done, total: None)
    given = _given_topology(config, sglang_version, validate)  # (a bad one: before any line)
    report("reading", 0, 1)
    skipped: list[Skipped] = []
    sources, warnings = discover(paths, skipped)
    total = sum(_size(s) for s in sources)
    workspace = Workspace(memory_budget if memory_budget is not None
                          else memory_budget_for(total))
    try:
        chunk = chunk_bytes if chunk_bytes is not None else CHUNK_BYTES
        scan = _parse_pass(sources, chunk, total, warnings, workspace, report)
        declared, notes = _server_args_lines(scan.server_args, sources, sglang_version)
        topology, topology_source = _topology(given, declared, validate, notes)
        file_nodes = _file_nodes(declared, topology, notes)
        attribution = resolve_keys(merge_key_rows(scan.keys), topology, file_nodes)
        crowded = crowded_headers(_stack(scan.headers), attribution)
        clock = clock_of(scan.first_dated, _median_dated(scan.chunks))
        chunks, spans, firsts = scan.chunks, scan.spans, scan.firsts
        del scan  # (its tables are read)
        runs, tally = _attribute_pass(chunks, spans, firsts, attribution, crowded, clock,
                                      clock_offsets, sources, file_nodes, workspace, report)
        contradictions = [*attribution.contradictions, *notes,
                          *_node_mismatches(tally, attribution, file_nodes)]
        contradictions = [_name_file(c, sources) for c in contradictions]
        report("diagnosing", 0, 1)
        context = Context(_lazy_rows(runs), topology, {s.file_id: s.display for s in sources},
                          merge_people(tally.people), _read_events(tally.events, workspace),
                          _last_lines(tally.last), _progress_times(tally.progress))
        findings = diagnose(context, contradictions)
    except BaseException:
        workspace.close()
        raise
    report("done", 1, 1)
    return Analysis(runs, tally, topology, topology_source, sources, workspace, warnings,
                    contradictions, attribution.host_nodes, findings, skipped=skipped)


def _read_events(pieces: list[Piece], workspace: Workspace) -> pl.DataFrame:
    """The stored event rows one under the other, let go as they are read, their repeats cut
    (`thin_events`) whenever more than EVENT_ROWS, and twice as many as the last cut kept,
    are held: as many rows as say different things, whatever the size of the set."""
    frames: list[pl.DataFrame] = []
    rows, kept = 0, 0
    for piece in pieces:
        frames.append(piece.read())
        workspace.release(piece)
        rows += frames[-1].height
        if rows > max(EVENT_ROWS, 2 * kept):
            frames = [thin_events(_stack(frames))]
            rows = kept = frames[0].height
    return thin_events(_stack(frames)) if frames else _stack(frames)


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The frames one under the other (an empty one keeps the columns of the first)."""
    full = [f for f in frames if f.height]
    if not full:
        return frames[0] if frames else pl.DataFrame()
    return pl.concat(full, how="diagonal_relaxed")


def _parse_pass(sources: list[Source], chunk_bytes: int, total: int, warnings: list[str],
                workspace: Workspace, report: Progress) -> _Scan:
    """Parse chunk by chunk; spill each parsed chunk and keep only the small whole-set tables.

    Up to PARSE_GROUP chunks in a row (at most PARSE_BYTES of them) are parsed as one: a
    parse costs about as much per call as per line on a few MB, and its working set is a
    fraction of the attribution's; the parsed rows are stored cut back into the chunks they
    came from, which the attribution pass then works on one at a time.
    WORKERS groups are parsed at once (polars works outside the GIL, and much of its string
    work runs on one core per call); results are taken in chunk order."""
    scan = _Scan()
    total = max(1, total)
    done = 0
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        running: deque[Future[_Parsed]] = deque()
        before: pl.DataFrame | None = None  # the previous chunk's last lines
        for group in chain(_groups(line_batches(sources, chunk_bytes, warnings)), [None]):
            if group is None:  # the end: an empty chunk gives the tables their columns
                if scan.keys or running:
                    break
                group = [empty_lines()]
            lines = pl.concat(group) if len(group) > 1 else group[0]
            done += int(lines.get_column("text").str.len_bytes().sum() or 0) + lines.height
            report("parsing", min(done, total), total)
            running.append(pool.submit(_parse_chunk, lines, workspace, before,
                                       [_first_key(g) for g in group[1:]]))
            # (a chunk may be shorter than the context; compact: not the whole chunk's text)
            seen = lines if before is None else pl.concat([before, lines.tail(CONTEXT_LINES)])
            before = compact(seen.tail(CONTEXT_LINES))
            if len(running) >= WORKERS:
                scan.add(running.popleft().result())
        while running:
            scan.add(running.popleft().result())
    return scan


def _groups(batches: Iterable[pl.DataFrame]) -> Iterator[list[pl.DataFrame]]:
    """Consecutive chunks parsed together: at most PARSE_GROUP, and at most PARSE_BYTES."""
    group: list[pl.DataFrame] = []
    size = 0
    for batch in batches:
        grown = int(batch.estimated_size())
        if group and (len(group) >= PARSE_GROUP or size + grown > PARSE_BYTES):
            yield group
            group, size = [], 0
        group.append(batch)
        size += grown
    if group:
        yield group


def _line_key(file_id: pl.Expr, line: pl.Expr) -> pl.Expr:
    return file_id.cast(pl.UInt64) * (1 << 32) + line.cast(pl.UInt64)


def _first_key(lines: pl.DataFrame) -> int:
    """The (file, line) of a chunk's first line, as one number (`_line_key`)."""
    return int(lines.select(_line_key(pl.col("file_id"), pl.col("line")).first()).item())


@dataclass
class _Parsed:
    """A parsed group of chunks: where each chunk was stored, and their part of the whole-set
    tables."""

    pieces: list[Piece]
    spans: list[tuple[int, int]]  # each stored chunk's first and last file
    firsts: list[pl.DataFrame]  # each stored chunk's first row (_AFTER), for the one before
    keys: pl.DataFrame
    server_args: pl.DataFrame
    headers: pl.DataFrame
    first_dated: pl.DataFrame


def _parse_chunk(lines: pl.DataFrame, workspace: Workspace, before: pl.DataFrame | None = None,
                 cuts: Sequence[int] = ()) -> _Parsed:
    """Parse `lines` and store the parsed rows cut before each line of `cuts` (`_first_key`
    of the chunks after the first): the chunks the lines were gathered from."""
    parsed = local_columns(parse(lines, before))
    pieces = [p for p in _cut(parsed, cuts) if p.height]
    return _Parsed(
        [workspace.write(p, "parsed") for p in pieces],
        [_span(p) for p in pieces],
        [compact(p.head(1).select(_AFTER)) for p in pieces],
        compact(key_rows(parsed)),
        compact(parsed.filter(pl.col("server_args").fill_null(False))
                .select("file_id", "line", pl.coalesce("msg", "text").alias("text"))),
        exception_seconds(parsed),
        first_dated_rows(parsed))


def _cut(parsed: pl.DataFrame, cuts: Sequence[int]) -> list[pl.DataFrame]:
    """`parsed` cut before the first row of each line of `cuts` (rows are in file order; every
    row of a physical line has its file and line number, so a line is never cut apart)."""
    if not cuts:
        return [parsed]
    keys = parsed.select(_line_key(pl.col("file_id"), pl.col("line"))).to_series()
    at = [0, *keys.search_sorted(pl.Series(list(cuts), dtype=pl.UInt64), side="left").to_list(),
          parsed.height]
    return [parsed.slice(a, b - a) for a, b in pairwise(at)]


def _span(frame: pl.DataFrame) -> tuple[int, int]:
    if frame.height == 0:
        return (0, 0)
    files = frame.get_column("file_id")
    return int(files[0]), int(files[-1])


def _linked(spans: list[tuple[int, int]]) -> list[range]:
    """The chunks in runs that carry state from one to the next: a chunk goes on from the one
    before when it starts in the file that one ends in."""
    starts = [i for i in range(len(spans)) if i == 0 or spans[i][0] != spans[i - 1][1]]
    return [range(a, b) for a, b in zip(starts, [*starts[1:], len(spans)])]


def _size(source: Source) -> int:
    try:
        return source.path.stat().st_size
    except OSError:
        return 0


def _median_dated(chunks: list[Piece]) -> Any:
    if not chunks:
        return None
    return (pl.concat([c.scan() for c in chunks]).filter(fully_dated())
            .select(pl.col("ts").median()).collect(engine="streaming").item())


def _attribute_pass(chunks: list[Piece], spans: list[tuple[int, int]],
                    firsts: list[pl.DataFrame], attribution: Attribution, crowded: pl.DataFrame, clock: Clock,
                    clock_offsets: dict[str, float] | None, sources: list[Source],
                    file_nodes: dict[int, int], workspace: Workspace, report: Progress
                    ) -> tuple[list[Run], Tally]:
    """Attribute and time each stored chunk, carrying each file's state into the next chunk;
    write every chunk as a sorted run.

    The carried state makes a run of chunks that share files (`_linked`) sequential; WORKERS
    such runs are worked on at once (the chunks of two large files share nothing). Each run
    of chunks keeps its own runs and counts, put together in chunk order at the end: the
    same as one pass over all chunks would give."""
    step = _Step(chunks, attribution, crowded, clock, clock_offsets, _file_names(sources),
                 file_nodes, workspace, piece_rows(min(len(chunks), len(sources))), report,
                 firsts)
    report("attributing", 0, len(chunks))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        parts = [f.result() for f in [pool.submit(step.linked, linked)
                                      for linked in _linked(spans)]]
    report("attributing", len(chunks), len(chunks))
    tally = Tally()
    for _, part in parts:
        tally.extend(part)
    return [r for runs, _ in parts for r in runs if r.rows], tally


@dataclass
class _Step:
    """What attributing a run of chunks reads (the whole-set tables), and the progress."""

    chunks: list[Piece]
    attribution: Attribution
    crowded: pl.DataFrame
    clock: Clock
    clock_offsets: dict[str, float] | None
    names: pl.DataFrame
    file_nodes: dict[int, int]
    workspace: Workspace
    rows: int
    report: Progress
    firsts: list[pl.DataFrame]  # each chunk's first row (`_AFTER`)
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def linked(self, indices: range) -> tuple[list[Run], Tally]:
        """Attribute chunks that carry state one to the next; reading the next chunk and
        sorting, counting and writing the previous one run beside it on other threads."""
        chunks = self.chunks
        tally = Tally()
        runs: list[Run] = []
        ghost: pl.DataFrame | None = None
        carry: Carry | None = None
        pending: _Pending | None = None  # a file's opening rows that have no time yet
        with ThreadPoolExecutor(max_workers=1) as reader, \
                ThreadPoolExecutor(max_workers=1) as writer:
            written: list[Future[None]] = []

            def write(frame: pl.DataFrame) -> None:
                if len(written) > 1:
                    written[-2].result()  # at most two chunks waiting to be written
                written.append(writer.submit(_write, self.workspace, frame, runs, tally,
                                             self.file_nodes, self.rows))

            upcoming = reader.submit(chunks[indices[0]].read) if indices else None
            for index in indices:
                chunk = upcoming.result() if upcoming is not None else chunks[index].read()
                self.workspace.release(chunks[index])
                more = index + 1 < len(chunks)
                upcoming = (reader.submit(chunks[index + 1].read)
                            if index + 1 in indices else None)
                first_file = int(chunk["file_id"][0])
                if ghost is not None and int(ghost["file_id"][0]) != first_file:
                    ghost = None
                after = _after(chunk, self.firsts[index + 1] if more else None)
                chunk = chunk.with_columns(_before_warn=_blank_before_warn(chunk, after))
                attributed = attribute(chunk, self.attribution, self.crowded, ghost)
                ghost = next_ghost(chunk, ghost, attributed)
                attributed = _real_rows(attributed)
                if pending is not None and pending.file_id != first_file:
                    pending.write(write)  # its file ended without a time
                    pending = None
                frame = complete_timestamps(attributed, self.clock, carry)
                frame = sort_key(frame, self.clock_offsets, carry)
                carry = next_carry(frame, carry)
                frame = _contract(frame, self.attribution, self.names, self.file_nodes)
                frame = frame.with_columns(_following(frame, after))
                if pending is not None:
                    pending.take_key(frame)
                frame, held = _hold_untimed(frame, carry, more, pending)
                held_file = int(held["file_id"][0]) if held is not None else None
                if pending is not None and pending.file_id != held_file:
                    pending.write(write)  # (before the chunk's rows, as they came)
                    pending = None
                if held is not None and held_file is not None:
                    pending = pending or _Pending(self.workspace, held_file)
                    pending.add(held)
                write(frame)
                with self.lock:
                    self.done += 1
                    self.report("attributing", self.done, len(chunks))
            if pending is not None:
                pending.write(write)
            for future in written:
                future.result()
        return runs, tally


def _real_rows(attributed: pl.DataFrame) -> pl.DataFrame:
    """The chunk's own rows (not the carried ghosts, which stand in front of them), without
    the resolver's working columns."""
    ghost = attributed.get_column("_ghost")
    ghosts = int(ghost.sum())
    own = attributed.select(c for c in attributed.columns if not c.startswith("_"))
    if ghost.head(ghosts).all():  # (a slice: no copy of the chunk)
        return own.slice(ghosts)
    return own.filter(~ghost)


class _Pending:
    """A file's opening rows that have no time yet, held back (stored like the chunks: a file
    with no time at all, an NCCL debug file, would otherwise be held whole in memory) until
    they take the first time of the file's next rows. Each time the file's rows go on in a
    chunk, every row held so far takes the sort key of the file's first row there; the rows
    held from that chunk keep their own until the next one."""

    def __init__(self, workspace: Workspace, file_id: int) -> None:
        self.workspace = workspace
        self.file_id = file_id
        self.rows = 0
        self.pieces: list[tuple[Piece, int | None]] = []  # (held rows, the sort key they take)

    def add(self, held: pl.DataFrame) -> None:
        self.pieces.append((self.workspace.write(held, "pending"), None))
        self.rows += held.height

    def take_key(self, frame: pl.DataFrame) -> None:
        """Every held row takes the sort key of the file's first row in `frame` (if any)."""
        keys = frame.filter(pl.col("file_id") == self.file_id).get_column("_sk")
        first = keys[0] if keys.len() else None
        if first is not None:
            self.pieces = [(piece, int(first)) for piece, _ in self.pieces]

    def write(self, write: Callable[[pl.DataFrame], None]) -> None:
        """Hand the held rows to `write` (the timeline order is the key's: where they are
        written does not change it), letting each piece go once read."""
        for piece, key in self.pieces:
            rows = piece.read()
            self.workspace.release(piece)
            write(rows if key is None else rows.with_columns(pl.lit(key, pl.Int64).alias("_sk")))
        self.pieces, self.rows = [], 0


def _hold_untimed(frame: pl.DataFrame, carry: Carry | None, more: bool,
                  pending: _Pending | None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The last file's rows when it has had no time at all yet and goes on in the next chunk:
    their place is its first time, which is still to come. With the rows already held of
    that file (`pending`), at most PENDING_ROWS are held."""
    before = pending.rows if pending is not None and carry is not None and \
        pending.file_id == carry.file_id else 0
    if not more or carry is None or carry.running is not None or frame.height + before == 0:
        return frame, None
    mine = pl.col("file_id") == carry.file_id
    held = frame.filter(mine)
    if held.height + before == 0 or held.height + before > PENDING_ROWS:
        return frame, None
    return frame.filter(~mine), held


def _write(workspace: Workspace, frame: pl.DataFrame, runs: list[Run], tally: Tally,
           file_nodes: dict[int, int], rows: int) -> None:
    frame = sorted_by_key(frame)
    tally.add(frame, list(file_nodes))
    events = event_rows(frame)
    if events.height > THIN_CHUNK_ROWS:  # (most of a chunk repeating itself: cut it here)
        events = thin_events(events)
    tally.events.append(workspace.write(compact(events), "events"))
    # (`msg`, the message under a wrapper, for the diagnosis's reading of records)
    stored = [c for c in TIMELINE_SCHEMA if c != "order"] + [*DETAIL_COLUMNS, "msg", "_sk"]
    write_run(workspace, frame.select(stored), runs, KEEP_ROWS, rows)


_AFTER = ["file_id", "line", "part", "starts_record", "text"]


def _after(frame: pl.DataFrame, first: pl.DataFrame | None) -> pl.DataFrame:
    """The row after each row (file_id, line, part, starts_record, text); `first` (the next
    chunk's first line, kept by the parse pass) is the last row's. Rows keep the chunk's
    order, which the attribution does not change."""
    after = frame.select(pl.col(_AFTER).shift(-1))
    if first is not None and frame.height and first.height:
        after = pl.concat([after.head(frame.height - 1), first], how="vertical_relaxed",
                          rechunk=False)
    return after


def _next_line(frame: pl.DataFrame, after: pl.DataFrame) -> pl.Series:
    """Whether the row after each row is the next physical line of the same file."""
    return ((after["file_id"] == frame["file_id"]) & (after["line"] == frame["line"] + 1)
            & (after["part"] == 0)).fill_null(False)


def _blank_before_warn(frame: pl.DataFrame, after: pl.DataFrame) -> pl.Series:
    """A blank line right before an NCCL WARN line: NCCL starts every WARN with a newline, so
    the blank line is the WARN's writer's, not the line before's."""
    warn = after["text"].str.contains(" NCCL WARN ", literal=True).fill_null(False)
    if not warn.any():
        return pl.repeat(False, frame.height, eager=True)
    blank = frame["text"].str.strip_chars() == ""
    return blank & warn & _next_line(frame, after)


def _following(frame: pl.DataFrame, after: pl.DataFrame) -> pl.Series:
    """`_next`: the text of the next physical line of the same file when it continues this
    one (no header of its own), for fields a hard wrap cut (`after`: from `_after`)."""
    cont = _next_line(frame, after) & ~after["starts_record"].fill_null(False)
    return after.select(pl.when(pl.lit(cont)).then(pl.col("text")).alias("_next")).to_series()


def _file_names(sources: list[Source]) -> pl.DataFrame:
    return pl.DataFrame({"file_id": [s.file_id for s in sources],
                         "file": [s.display for s in sources]},
                        schema={"file_id": pl.UInt32, "file": pl.String})


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


def _given_topology(config: str | Path | LaunchConfig | None, version: str | None,
                    validate: bool) -> tuple[Topology, str] | None:
    """The topology of --config and where it came from; a bad config (or one past the
    sizes logcorr builds) is an input error, raised before anything else is read or built."""
    if config is None:
        return None
    launch = config if isinstance(config, LaunchConfig) else load_config(
        config, sglang_version=version, validate=validate)
    source = launch.source if isinstance(config, LaunchConfig) else f"--config {config}"
    return build_topology(launch, validate=validate), source


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


def _contract(frame: pl.DataFrame, attribution: Attribution, names: pl.DataFrame,
              file_nodes: dict[int, int]) -> pl.DataFrame:
    """A chunk as the runs store it: the output contract's columns (but `order`, given by the
    merge) in its types, DETAIL_COLUMNS, and the sort key `_sk`."""
    procs = attribution.processes.select("proc", *COORDINATES)
    node_of_file = pl.DataFrame({"file_id": list(file_nodes), "file_node": list(file_nodes.values())},
                                schema={"file_id": pl.UInt32, "file_node": pl.Int32})
    of_file = file_values(frame.get_column("file_id"),
                          names.join(node_of_file, on="file_id", how="left"))
    frame = frame.with_columns(*_by_proc(frame.get_column("proc"), procs),
                               *(value.alias(name) for name, value in of_file.items()),
                               ts_text(frame.get_column("ts_full")), time_key())
    # a line of a process the topology puts on another node than its file's server_args line
    # says: the node (and so the GPU) is contradicted, the process is not
    wrong_node = (pl.col("node_rank") != pl.col("file_node")).fill_null(False)
    frame = frame.with_columns(
        pl.when(pl.col("proc").is_not_null()).then(pl.lit("scheduler"))
        .otherwise(pl.col("role")).alias("role"),
        pl.when(wrong_node).then(None)
        .otherwise(pl.coalesce("node_rank", "file_node")).alias("node_rank"),
        pl.when(wrong_node).then(None).otherwise(pl.col("gpu_id")).alias("gpu_id"),
        pl.col("eff_host").alias("host"),
        pl.coalesce("stream", pl.when(pl.col("file_id").is_in(
            attribution.file_procs.get_column("file_id").implode())).then(pl.col("file")))
        .alias("stream"),
    )
    return frame.select(*(pl.col(name).cast(dtype) for name, dtype in TIMELINE_SCHEMA.items()
                          if name != "order"), *_CHUNK_COLUMNS, "_sk")


def _by_proc(procs: pl.Series, table: pl.DataFrame) -> list[pl.Series]:
    """The columns of `table` (proc -> coordinates) for each row's process: gathered by proc
    id, which is the table's row number (a join where some id is not)."""
    ids = table.get_column("proc")
    top = procs.max()
    dense = ids.to_list() == list(range(ids.len()))
    if dense and (top is None or int(top) < ids.len()):  # type: ignore[arg-type]
        return table.drop("proc")[procs].get_columns()
    return (procs.to_frame().join(table, on="proc", how="left", maintain_order="left")
            .drop("proc").get_columns())


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
