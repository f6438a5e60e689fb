"""One streaming pass over an analysis's timeline that keeps what the pictures need.

The HTML report (`report_html`) and the Perfetto trace (`perfetto`) both draw the timeline per
process over time. Neither may hold 10M lines, so `digest` reads `Analysis.batches` a batch at a
time and keeps, per process row:

* line counts in time bins (the bin width doubles whenever the table grows past `MAX_CELLS`, so
  memory stays bounded whatever the span and the number of processes);
* event marks (warning, error, watchdog, NCCL communicator init, py-spy dump, startup phase), at
  most one per kind per row and bin, with their file:line and text; every line a finding cites;
* the lines that begin or end a phase (startup phases, NCCL communicator init, a watchdog's
  timeout), and batch statistics (running requests, tokens, token usage) as per-bin maxima;
* its first and last time and its last line.

Lines that print no time take the time of the line before them in the timeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from logcorr.diagnose.context import CRASH_STEMS, PHASES, SGLANG_WATCHDOG_STEMS, TIMEOUT_STEMS
from logcorr.model import COORDINATES, ROLES

if TYPE_CHECKING:
    from logcorr.api import Analysis
    from logcorr.topology import Process, Topology

# The columns read from the timeline.
COLUMNS = ("file", "line", "part", "ts", "source", "role", "host", "pid", *COORDINATES, "text")
# What identifies a row while streaming (mapped to process rows at the end).
# (with a topology, replica and world rank say the rest; without one, the prefix's ranks do)
GROUP_COLUMNS = ("role", "host", "replica", "world_rank", "dp_rank", "pp_rank", "attn_cp_rank",
                 "moe_dp_rank", "tp_rank", "moe_ep_rank")
MAX_CELLS = 1_500_000  # (row, bin) cells kept before the bin width doubles
START_BIN_US = 1_000  # 1 ms
CHUNK_ROWS = 200_000  # timeline rows worked on at once
TEXT_CHARS = 2_000  # longer line texts are cut (the cut is said) in marks

# Event kinds drawn as marks, most important first (a line gets the first kind it matches).
KINDS = ("evidence", "watchdog", "error", "pyspy", "nccl-init", "phase", "warning")
WATCHDOG_STEMS = (*TIMEOUT_STEMS, *SGLANG_WATCHDOG_STEMS, "Heartbeat monitor timed out")
ERROR_STEMS = (*CRASH_STEMS, "Traceback (most recent call last)", " ERROR ", "] ERROR",
               ":[E", "Error: ", "Exception: ")
WARNING_STEMS = (" WARNING ", "] WARNING", "NCCL WARN", ":[W", "Warning: ")
NCCL_INIT_STEMS = ("Init START", "Init COMPLETE")
PHASE_STEMS = tuple(sorted({s for _, begins, ends in PHASES for s in (*begins, *ends)}))
PYSPY_STEMS = ("Pyspy dump for PID", "py-spy dump")
BATCH_STEMS = ("] Decode batch", "] Prefill batch")
# lines the Perfetto trace turns into slices
SLICE_STEMS = (*PHASE_STEMS, *NCCL_INIT_STEMS, "ran for ")
ALL_STEMS = tuple(sorted({*WATCHDOG_STEMS, *ERROR_STEMS, *WARNING_STEMS, *NCCL_INIT_STEMS,
                          *PHASE_STEMS, *PYSPY_STEMS, *BATCH_STEMS, *SLICE_STEMS}))
ROLE_ORDER = {role: i for i, role in enumerate(("main", *[r for r in ROLES if r != "main"]))}


@dataclass
class Row:
    """One swimlane / track: a scheduler process, another process role, or the unattributed."""

    key: tuple[Any, ...]
    label: str
    role: str | None
    coords: dict[str, Any] = field(default_factory=dict)  # COORDINATES (+ host, pid)
    state: str = "healthy"  # healthy, waiting, unknown, culprit, suspect, crashed, missing
    lines: int = 0
    first_us: int | None = None
    last_us: int | None = None
    last_line: tuple[str, int, str] | None = None  # file, line, text
    findings: list[int] = field(default_factory=list)


@dataclass
class Digest:
    """What `digest` gathered: rows in topology order, and per-row frames keyed by `row`."""

    rows: list[Row]
    base_us: int  # the earliest time (microseconds since the epoch, naive local time)
    end_us: int
    bin_us: int  # the width of the bins in `density` and `metrics`
    density: pl.DataFrame  # row, bin (start, µs), n
    marks: pl.DataFrame  # row, t, kind, file, line, text, n (lines of that kind in its bin)
    slices: pl.DataFrame  # row, t, timed, file, line, text
    metrics: pl.DataFrame  # row, bin, running, tokens, usage
    evidence: dict[tuple[str, int], str]  # (file, line) -> text of every cited line
    findings: list[dict[str, Any]]
    first_error: tuple[int, str, int, str] | None  # t, file, line, text
    timed_lines: int
    lines: int

    def iso(self, us: int) -> str:
        return to_iso(us)


def to_us(value: str | None) -> int | None:
    """An ISO time (as the timeline and findings print it) in microseconds since the epoch."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment.replace(tzinfo=None) - _EPOCH) // timedelta(microseconds=1)


def to_iso(us: int) -> str:
    text = (_EPOCH + timedelta(microseconds=us)).isoformat()
    return text[:-3] if "." in text and text.endswith("000") else text


_EPOCH = datetime(1970, 1, 1)


def digest(analysis: Analysis) -> Digest:
    """Read the timeline once (a batch at a time) and keep what the pictures need."""
    findings = [f.to_json() for f in analysis.findings]
    cited = {(str(e.get("file")), int(e.get("line") or 0)) for f in findings
             for e in f.get("evidence") or [] if e.get("file") is not None}
    gather = _Gather(cited)
    for batch in analysis.batches(list(COLUMNS)):
        gather.add(batch)
    return gather.finish(analysis.topology, findings)


class _Gather:
    """The state of the pass. Each line's group (`gid`) is an integer: a scheduler of the
    topology is replica x 2^20 + world rank (no hashing of text); any other distinct set of
    GROUP_COLUMNS values gets the next number past 2^40."""

    def __init__(self, cited: set[tuple[str, int]]) -> None:
        self.bin_us = START_BIN_US
        self.carry: int | None = None
        self.cited = pl.DataFrame({"file": [f for f, _ in cited],
                                   "line": [n for _, n in cited], "_cited": [True] * len(cited)},
                                  schema={"file": pl.String, "line": pl.UInt32,
                                          "_cited": pl.Boolean})
        self.other_gids: dict[tuple[Any, ...], int] = {}
        self.density: list[pl.DataFrame] = []  # gid, bin, n, first, last
        self.density_rows = 0
        self.marks: list[pl.DataFrame] = []
        self.marks_rows = 0
        self.metrics: list[pl.DataFrame] = []
        self.slices: list[pl.DataFrame] = []
        self.evidence: list[pl.DataFrame] = []
        self.ends: list[pl.DataFrame] = []  # gid, GROUP_COLUMNS, file, line, text
        self.untimed_head = 0
        self.untimed: list[pl.DataFrame] = []  # gid, n: lines before the first timed one
        self.buffer: list[pl.DataFrame] = []
        self.buffered = 0
        self.first_error: tuple[int, str, int, str] | None = None
        self.timed = 0
        self.lines = 0

    def add(self, batch: pl.DataFrame) -> None:
        """Take a batch of the timeline (worked on in chunks of CHUNK_ROWS: the merge's batches
        are small, and each step costs per call)."""
        self.buffer.append(batch)
        self.buffered += batch.height
        if self.buffered >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        batch = pl.concat(self.buffer) if len(self.buffer) > 1 else self.buffer[0]
        self.buffer, self.buffered = [], 0
        self._add(batch)

    def _gids(self, frame: pl.DataFrame) -> pl.Series:
        known = pl.col("replica").is_not_null() & pl.col("world_rank").is_not_null()
        gid = frame.select(pl.when(known).then(pl.col("replica").cast(pl.Int64) * _KNOWN
                                               + pl.col("world_rank").cast(pl.Int64))
                           .alias("gid")).to_series()
        rest = frame.with_row_index("_i").filter(~known)
        if rest.height == 0:
            return gid
        keys = list(GROUP_COLUMNS)
        distinct = rest.select(keys).unique(maintain_order=True)
        ids = [self.other_gids.setdefault(values, _OTHER + len(self.other_gids))
               for values in distinct.iter_rows()]
        found = rest.select("_i", *keys).join(
            distinct.with_columns(pl.Series("gid", ids, dtype=pl.Int64)), on=keys, how="left",
            nulls_equal=True)
        return gid.scatter(found.get_column("_i"), found.get_column("gid"))

    def _cited(self, frame: pl.DataFrame) -> pl.Series:
        """Whether each row is a line a finding cites (by line number first: cheap)."""
        flags = pl.repeat(False, frame.height, eager=True)
        if self.cited.height == 0:
            return flags
        maybe = frame.select("file", "line").with_row_index("_i").filter(
            pl.col("line").is_in(self.cited.get_column("line").implode()))
        if maybe.height == 0:
            return flags
        hits = maybe.join(self.cited, on=["file", "line"], how="semi").get_column("_i")
        return flags.scatter(hits, True) if hits.len() else flags

    def _add(self, batch: pl.DataFrame) -> None:
        self.lines += batch.height
        if batch.height == 0:
            return
        t = batch.get_column("ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False,
                                                    time_unit="us").dt.epoch("us")
        self.timed += int(t.is_not_null().sum())
        t = t.fill_null(strategy="forward")
        if self.carry is not None:
            t = t.fill_null(self.carry)
        elif t.null_count() < t.len():  # the set's opening lines take its first time
            t = t.fill_null(strategy="backward")
        if t.null_count() == t.len():  # nothing timed yet at all: counted, drawn nowhere
            self.untimed_head += batch.height
            frame = batch.select("file", "line", "text").with_columns(self._gids(batch))
            counted = frame.with_row_index("_i").group_by("gid").agg(
                pl.len().alias("n"), pl.col("_i").max())
            self.untimed.append(counted.select("gid", "n"))
            rows = counted.get_column("_i").sort()
            self.ends.append(pl.concat([batch[rows].select(GROUP_COLUMNS), frame[rows].select(
                "gid", "file", "line", pl.col("text").str.slice(0, TEXT_CHARS))],
                how="horizontal"))
            return
        self.carry = int(t[-1])
        text = pl.col("text")
        frame = batch.select("file", "line", "part", "text").with_columns(
            self._gids(batch), t.alias("t"), batch.get_column("ts").is_not_null().alias("timed"))
        bin_ = (pl.col("t") // self.bin_us * self.bin_us).alias("bin")
        dens = frame.with_row_index("_i").group_by("gid", bin_).agg(
            pl.len().alias("n"), pl.col("t").min().alias("first"),
            pl.col("t").max().alias("last"), pl.col("_i").max())
        self.density.append(dens.drop("_i"))
        self.density_rows += dens.height
        lasts = dens.group_by("gid").agg(pl.col("_i").max()).get_column("_i").sort()
        self.ends.append(pl.concat([batch[lasts].select(GROUP_COLUMNS), frame[lasts].select(
            "gid", "file", "line", text.str.slice(0, TEXT_CHARS))], how="horizontal"))
        if self.density_rows > MAX_CELLS or self.marks_rows > 4 * MAX_CELLS:
            self._compact()
        # the few lines any mark, slice or counter needs: one literal scan over all the text
        wanted = text.str.contains_any(list(ALL_STEMS))
        frame = frame.with_columns(self._cited(frame).alias("_cited"))
        cited = frame.filter(pl.col("_cited"))
        if cited.height:
            self.evidence.append(cited.select("file", "line", "part", "text"))
        frame = frame.filter(wanted | pl.col("_cited"))
        if frame.height == 0:
            return
        # batch statistics lines (most of a serving log's lines) are counters, not marks
        batch_line = text.str.contains_any(list(BATCH_STEMS))
        frame = frame.with_columns(batch_line.alias("_batch"))
        batches = frame.filter(pl.col("_batch"))
        if batches.height:
            self.metrics.append(batches.select("gid", bin_, *_metric_exprs()).group_by(
                "gid", "bin").agg(pl.col("running", "tokens", "usage").max()))
        frame = frame.filter(~pl.col("_batch") | pl.col("_cited"))
        if frame.height == 0:
            return
        kind = (pl.when(pl.col("_cited")).then(pl.lit("evidence"))
                .when(text.str.contains_any(list(WATCHDOG_STEMS))).then(pl.lit("watchdog"))
                .when(text.str.contains_any(list(ERROR_STEMS))).then(pl.lit("error"))
                .when(text.str.contains_any(list(PYSPY_STEMS))).then(pl.lit("pyspy"))
                .when(text.str.contains_any(list(NCCL_INIT_STEMS))).then(pl.lit("nccl-init"))
                .when(text.str.contains_any(list(PHASE_STEMS))).then(pl.lit("phase"))
                .when(text.str.contains_any(list(WARNING_STEMS))).then(pl.lit("warning")))
        frame = frame.with_columns(kind.alias("kind"))
        marked = frame.filter(pl.col("kind").is_not_null())
        if marked.height:
            cut = [pl.col("t", "file", "line"), pl.col("text").str.slice(0, TEXT_CHARS),
                   pl.col("text").str.len_chars().cast(pl.UInt32).alias("chars")]
            cited = marked.filter(pl.col("_cited")).select(
                "gid", "kind", bin_, *cut, pl.lit(1, pl.UInt32).alias("n"))
            marks = (marked.filter(~pl.col("_cited")).group_by("gid", "kind", bin_,
                                                               maintain_order=True)
                     .agg(*(e.first() for e in cut), pl.len().alias("n")))
            self.marks.extend([cited, marks])
            self.marks_rows += marks.height + cited.height
            errors = marked.filter(text.str.contains_any([*WATCHDOG_STEMS, *ERROR_STEMS]))
            if errors.height:
                first = errors.sort("t", maintain_order=True).row(0, named=True)
                if self.first_error is None or first["t"] < self.first_error[0]:
                    self.first_error = (int(first["t"]), first["file"], int(first["line"]),
                                        first["text"][:TEXT_CHARS])
        slices = frame.filter(text.str.contains_any(list(SLICE_STEMS)))
        if slices.height:
            self.slices.append(slices.select("gid", "t", "timed", "file", "line",
                                             text.str.slice(0, TEXT_CHARS)))

    def _compact(self) -> None:
        """Fold the per-chunk tables; widen the bins until they fit."""
        folded = (pl.col("n").sum(), pl.col("first").min(), pl.col("last").max())
        density = pl.concat(self.density).group_by("gid", "bin").agg(*folded)
        while density.height > MAX_CELLS // 2:
            self.bin_us *= 2
            density = density.with_columns(pl.col("bin") // self.bin_us * self.bin_us).group_by(
                "gid", "bin").agg(*folded)
        self.density, self.density_rows = [density], density.height
        if self.marks:
            marks = _fold_marks(pl.concat(self.marks), self.bin_us)
            self.marks, self.marks_rows = [marks], marks.height
        if self.metrics:
            self.metrics = [_fold_metrics(pl.concat(self.metrics), self.bin_us)]
        ends = pl.concat(self.ends)
        self.ends = [ends.filter(pl.col("gid").is_last_distinct())]

    def finish(self, topology: Topology | None, findings: list[dict[str, Any]]) -> Digest:
        self.flush()
        if self.density:
            self._compact()
        ends = self.ends[0] if self.ends else pl.DataFrame(
            schema={"gid": pl.Int64, **{c: pl.Int32 for c in GROUP_COLUMNS}, "file": pl.String,
                    "line": pl.UInt32, "text": pl.String})
        rows, index = _rows(topology, ends.select(GROUP_COLUMNS), findings)
        group_ids = pl.DataFrame({"gid": ends.get_column("gid"), "row": index},
                                 schema={"gid": pl.Int64, "row": pl.UInt32})

        def to_rows(frame: pl.DataFrame | None, empty: dict[str, Any]) -> pl.DataFrame:
            if frame is None or frame.height == 0:
                return pl.DataFrame(schema={"row": pl.UInt32, **empty})
            return frame.join(group_ids, on="gid", how="left").drop("gid")

        density = to_rows(self.density[0] if self.density else None,
                          {"bin": pl.Int64, "n": pl.UInt32, "first": pl.Int64,
                           "last": pl.Int64}).group_by("row", "bin").agg(
            pl.col("n").sum(), pl.col("first").min(), pl.col("last").max()).sort("row", "bin")
        marks = to_rows(_fold_marks(pl.concat(self.marks), self.bin_us)
                        if self.marks else None,
                        {"kind": pl.String, "bin": pl.Int64, "t": pl.Int64, "file": pl.String,
                         "line": pl.UInt32, "text": pl.String, "chars": pl.UInt32,
                         "n": pl.UInt32}).sort("row", "t")
        slices = to_rows(pl.concat(self.slices) if self.slices else None,
                         {"t": pl.Int64, "timed": pl.Boolean, "file": pl.String,
                          "line": pl.UInt32, "text": pl.String})
        metrics = to_rows(self.metrics[0] if self.metrics else None,
                          {"bin": pl.Int64, "running": pl.Int64, "tokens": pl.Int64,
                           "usage": pl.Float64}).group_by("row", "bin").agg(
            pl.col("running", "tokens", "usage").max()).sort("row", "bin")
        spans = density.group_by("row").agg(pl.col("n").sum(), pl.col("first").min(),
                                            pl.col("last").max())
        for row, lines, first, last in spans.iter_rows():
            rows[row].lines, rows[row].first_us, rows[row].last_us = int(lines), first, last
        if self.untimed:
            for row, lines in to_rows(pl.concat(self.untimed), {"n": pl.UInt32}).group_by(
                    "row").agg(pl.col("n").sum()).iter_rows():
                rows[row].lines += int(lines)
        lasts = to_rows(ends.select("gid", "file", "line", "text"), {}).group_by(
            "row", maintain_order=True).agg(pl.col("file", "line", "text").last())
        for row, file, line, text in lasts.iter_rows():
            rows[row].last_line = (file, int(line), text)
        for row in rows:
            if row.role == "scheduler" and row.lines == 0 and row.state == "healthy":
                row.state = "missing"
        evidence: dict[tuple[str, int], str] = {}
        if self.evidence:
            joined = (pl.concat(self.evidence).sort("file", "line", "part")
                      .group_by("file", "line", maintain_order=True).agg(pl.col("text").str.join("")))
            evidence = {(f, int(n)): t for f, n, t in joined.iter_rows()}
        base = min((r.first_us for r in rows if r.first_us is not None), default=0)
        end = max((r.last_us for r in rows if r.last_us is not None), default=base)
        return Digest(rows, base, max(end, base + 1), self.bin_us, density, marks, slices,
                      metrics, evidence, findings, self.first_error, self.timed, self.lines)


_KNOWN = 1 << 20
_OTHER = 1 << 40


def _metric_exprs() -> list[pl.Expr]:
    text = pl.col("text")
    return [text.str.extract(r"#running-req: (\d+)").cast(pl.Int64, strict=False).alias("running"),
            text.str.extract(r"#token: (\d+)").cast(pl.Int64, strict=False).alias("tokens"),
            text.str.extract(r"token usage: ([0-9.]+)").cast(pl.Float64, strict=False)
            .alias("usage")]


def _fold_marks(marks: pl.DataFrame, bin_us: int) -> pl.DataFrame:
    """At most one mark per row, kind and bin (the first), with the count of its bin; marks
    of cited lines are all kept."""
    marks = marks.with_columns(pl.col("bin") // bin_us * bin_us)
    cited = marks.filter(pl.col("kind") == "evidence")
    other = (marks.filter(pl.col("kind") != "evidence").sort("t", maintain_order=True)
             .group_by("gid", "kind", "bin", maintain_order=True)
             .agg(pl.col("t", "file", "line", "text", "chars").first(), pl.col("n").sum()))
    return pl.concat([cited, other.select(cited.columns)]) if cited.height else other


def _fold_metrics(metrics: pl.DataFrame, bin_us: int) -> pl.DataFrame:
    return (metrics.with_columns(pl.col("bin") // bin_us * bin_us)
            .group_by("gid", "bin").agg(pl.col("running", "tokens", "usage").max()))


# ------------------------------------------------------------------------------------ rows


def process_order(p: Process) -> tuple[int, ...]:
    """Topology order: replica, PP, attention DP / DP, TP."""
    return (p.replica, p.pp_rank, p.attn_dp_rank if p.dp_rank is None else p.dp_rank,
            p.tp_rank, p.world_rank)


def coords_label(coords: dict[str, Any], topology: Topology | None) -> str:
    """`n1 g2 w10 DP5 TP10 EP10`: the coordinates that say something in this topology."""
    widths = topology.tag_widths() if topology is not None else {}
    parts = []
    for column, tag in (("node_rank", "n"), ("gpu_id", "g"), ("replica", "r"),
                        ("world_rank", "w"), ("dp_rank", "DP"), ("pp_rank", "PP"),
                        ("attn_cp_rank", "ATTN_CP"), ("moe_dp_rank", "MOE_DP"),
                        ("tp_rank", "TP"), ("moe_ep_rank", "EP")):
        value = coords.get(column)
        if value is not None and widths.get(column, 2) > 1:
            parts.append(f"{tag}{value}")
    return " ".join(parts)


def _row_key(values: dict[str, Any]) -> tuple[Any, ...]:
    role = values.get("role")
    # (a torch job's rank: a process with a world rank and no role of SGLang's)
    if role == "scheduler" or (role is None and values.get("world_rank") is not None):
        if values.get("replica") is not None and values.get("world_rank") is not None:
            return ("s", values["replica"], values["world_rank"])
        return ("s?", values.get("host"), *(values.get(c) for c in COORDINATES))
    if role is not None:
        return ("r", role, values.get("host"))
    return ("u",)


def _rows(topology: Topology | None, groups: pl.DataFrame, findings: list[dict[str, Any]]
          ) -> tuple[list[Row], list[int]]:
    """Rows in topology order, and the row of each group (a row of `groups`)."""
    rows: list[Row] = []
    by_key: dict[tuple[Any, ...], int] = {}
    if topology is not None:
        for p in sorted(topology.processes, key=process_order):
            coords = {c: getattr(p, c) for c in COORDINATES}
            key = ("s", p.replica, p.world_rank)
            by_key[key] = len(rows)
            rows.append(Row(key, coords_label(coords, topology), "scheduler", coords))
    group_rows = groups.to_dicts()
    extra: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in group_rows:
        key = _row_key(values)
        if key not in by_key and key not in extra:
            extra[key] = values

    def extra_order(item: tuple[tuple[Any, ...], dict[str, Any]]) -> tuple[Any, ...]:
        key, values = item
        rank = {"s": 0, "s?": 1, "r": 2, "u": 3}[key[0]]
        sub: tuple[Any, ...]
        if key[0] in ("s", "s?"):
            sub = tuple(-1 if values.get(c) is None else values[c]
                        for c in ("replica", "pp_rank", "dp_rank", "tp_rank", "world_rank"))
            sub = (*sub, str(values.get("host") or ""))
        elif key[0] == "r":
            sub = (ROLE_ORDER.get(key[1], 99), str(key[1]), str(key[2] or ""))
        else:
            sub = ()
        return (rank, sub)

    for key, values in sorted(extra.items(), key=extra_order):
        by_key[key] = len(rows)
        coords = {c: values.get(c) for c in COORDINATES}
        if key[0] in ("s", "s?"):
            label = coords_label(coords, topology) or "scheduler"
            rows.append(Row(key, label, "scheduler", coords))
        elif key[0] == "r":
            label = f"{key[1]} @ {key[2]}" if key[2] else str(key[1])
            rows.append(Row(key, label, str(key[1]), {"host": key[2]}))
        else:
            rows.append(Row(key, "unattributed", None))
    if ("u",) not in by_key:
        by_key[("u",)] = len(rows)
        rows.append(Row(("u",), "unattributed", None))
    for values in group_rows:  # hosts of the schedulers' own lines
        row = rows[by_key[_row_key(values)]]
        if row.role == "scheduler" and values.get("host") and "host" not in row.coords:
            row.coords["host"] = values["host"]
    _states(rows, by_key, findings)
    return rows, [by_key[_row_key(v)] for v in group_rows]


def _find(by_key: dict[tuple[Any, ...], int], process: dict[str, Any]) -> int | None:
    if process.get("replica") is not None and process.get("world_rank") is not None:
        return by_key.get(("s", process["replica"], process["world_rank"]))
    if process.get("role"):
        return by_key.get(("r", process["role"], process.get("host")))
    return None


def _states(rows: list[Row], by_key: dict[tuple[Any, ...], int],
            findings: list[dict[str, Any]]) -> None:
    """Each row's state from the findings (the worst wins)."""
    rank = {"healthy": 0, "waiting": 1, "unknown": 2, "suspect": 3, "missing": 4,
            "culprit": 5, "crashed": 6}

    def mark(processes: Iterable[dict[str, Any]], state: str, finding: int) -> None:
        for process in processes:
            where = _find(by_key, process)
            if where is None:
                continue
            row = rows[where]
            if finding not in row.findings:
                row.findings.append(finding)
            if rank[state] > rank[row.state]:
                row.state = state

    for i, finding in enumerate(findings):
        kind = finding.get("kind")
        named = finding.get("processes") or []
        if kind == "crash":
            mark(named, "crashed", i)
        elif kind == "missing-process":
            mark(named, "missing", i)
        elif finding.get("severity") == "error":
            mark(named, "culprit", i)
        else:
            mark(named, "suspect", i)
        mark(finding.get("waiting") or [], "waiting", i)
        mark(finding.get("unknown_processes") or [], "unknown", i)


def culprit_rows(digest: Digest) -> list[int]:
    return [i for i, r in enumerate(digest.rows) if r.state in ("culprit", "crashed", "suspect")]


def rows_of(digest: Digest, processes: Sequence[dict[str, Any]]) -> list[int]:
    by_key = {r.key: i for i, r in enumerate(digest.rows)}
    found = (_find(by_key, p) for p in processes)
    return [i for i in found if i is not None]
