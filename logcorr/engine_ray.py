"""`analyze(engine="ray")`: the two passes as Ray tasks over groups of whole files
(logcorr.parts), the whole set resolved on the driver as the local run does, and the
timeline written as parquet partitions in timeline order, without a global sort.

    driver                         tasks (one CPU each)
    discover, number files   ->    scan_part(group)            pass 1, a group of whole files
    merge surveys in order   <-    survey bytes
    api.whole_set, bounds    ->    ray.put(Tables) once
                                   attribute_part(group)       pass 2: rows cut at the bounds,
                                                               a slice per range written to
                                                               OUT's exchange folder
    counts -> offsets        <-    counts, tally, events
                                   merge_range(range)          every group's slice of a range,
                                                               merged, numbered, written
    findings from the tallies and events (api.diagnosed), as the local run

The groups' slices go through files (Arrow, lz4) in the output folder, which every worker
writes anyway, not through Ray's object store: on the 2M-line benchmark set, 12 s against 22 s
(each row pickled into the store and out again).

Ray is imported only here, and only when this engine is asked for. Every worker must see the
inputs, and write the output folder, at the same paths as the driver (shared storage); a task
that does not find a file fails with one line naming it. Ray runs a task again when its worker
dies; a task's output is its return value or a file written under a temporary name and
renamed, so a retry leaves no duplicate and no half-written partition. The output is written
in a temporary folder beside OUT and renamed at the end: an interrupted run leaves nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logcorr import __version__, cleanup, parts
from logcorr.api import (
    EventRows,
    Progress,
    RayOptions,
    WholeSet,
    attribution_arguments,
    diagnosed,
    survey_frames,
    whole_set,
)
from logcorr.errors import CoreError, EngineError, InputError, LogcorrError
from logcorr.ingest import Skipped, Source, discover
from logcorr.start import CHUNK_BYTES
from logcorr.stream import Workspace
from logcorr.topology import Topology

NEEDS_RAY = "--engine ray needs: pip install 'logcorr[ray]'"
RETRIES = 3  # times Ray runs a task again whose worker died
SMALLEST_GROUP = 1 << 20  # bytes: a group smaller than this costs more to send than to read
MANY_ROWS = 1 << 17  # a set of more lines gets at least one range per CPU


def import_ray() -> Any:
    """The `ray` module, or the error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(NEEDS_RAY) from None
    return ray


def analyze_on_ray(paths: Sequence[str | Path], given: tuple[Topology, str] | None,
                   sglang_version: str | None, validate: bool,
                   clock_offsets: dict[str, float] | None, report: Progress,
                   chunk_bytes: int | None, options: RayOptions) -> parts.PartitionedAnalysis:
    """`api.analyze` with `engine="ray"` (its arguments, already checked)."""
    ray = import_ray()
    if options.address is not None and options.cpus is not None:
        raise InputError("--ray-cpus sizes the local cluster logcorr starts: it does not "
                         "apply with --ray-address (the cluster has its own CPUs)")
    if options.address is not None and options.output is None:
        raise InputError("a Ray cluster writes the timeline into a folder on shared storage: "
                         "give one (-o OUT/)")
    report("reading", 0, 1)
    skipped: list[Skipped] = []
    sources, warnings = discover(paths, skipped)
    output = _Output(options.output)
    started, job = False, None
    try:
        started = _connect(ray, options)
        job = _Job(ray, report, max(1, chunk_bytes if chunk_bytes is not None else CHUNK_BYTES))
        files = parts.files_of(sources)
        groups = parts.groups(files, options.group_bytes or job.group_bytes(files))
        survey = job.survey(groups)
        warnings += survey.take_warnings()
        tables = survey_frames(survey.survey_tables())
        whole = whole_set(tables, given, sources, sglang_version, validate)
        arguments = attribution_arguments(whole, tables, sources, clock_offsets)
        ranges = job.ranges(int(tables["lines"]), options.range_rows)
        shared = parts.Tables(survey.keys(), arguments, job.chunk_bytes,
                              tuple(survey.bounds(ranges)))
        detail = options.output is None
        results, written = job.attribute(groups, shared, str(output.folder), detail)
        analysis = _analysis(results, written, whole, sources, warnings, skipped, shared,
                             detail, output)
        report("diagnosing", 0, 1)
        events = EventRows()
        for result in results:
            if result.events.height:
                events.add(result.events)
        diagnosed(analysis, whole, events.rows())
        analysis.partitions = output.finish(analysis, written)
    except BaseException:
        # (a cluster this run started ends with it, its tasks too: force-cancelling them
        # first raced with their replies, a failed check that aborted the driver in Ray 2.60)
        if job is not None and not started:
            job.cancel()
        output.discard()
        raise
    finally:
        if started:
            ray.shutdown()
    report("done", 1, 1)
    return analysis


def _analysis(results: list[parts.AttributedPart], written: list[int], whole: WholeSet,
              sources: list[Source], warnings: list[str], skipped: list[Skipped],
              shared: parts.Tables, detail: bool, output: _Output
              ) -> parts.PartitionedAnalysis:
    """The analysis of the groups' results; the diagnosis's lookups read files again here."""
    tally = parts.merged_tally(r.tally for r in results)
    logs = shared.part(parts.files_of(sources))
    return parts.PartitionedAnalysis(
        [], tally, whole.topology, whole.topology_source, sources, Workspace(), warnings,
        host_nodes=whole.attribution.host_nodes, skipped=skipped, logs=logs,
        partitions=[output.folder / parts.partition_name(i) for i in written],
        detail_stored=detail)


def _connect(ray: Any, options: RayOptions) -> bool:
    """Join the cluster at `options.address`, or start one on this machine; True when this
    call started it (and so ends it). A process already connected keeps its cluster."""
    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if options.address is not None:
            ray.init(address=options.address, **quiet)
        else:
            ray.init(num_cpus=options.cpus, include_dashboard=False, **quiet)
    except (OSError, RuntimeError, ValueError) as error:  # (ConnectionError: an OSError)
        where = f"at {options.address}" if options.address else "on this machine"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise EngineError(f"cannot start or reach a Ray cluster {where}: {first}; start one "
                          "with `ray start --head` and pass --ray-address auto") from None
    return True


@dataclass
class _Job:
    """The tasks of one run: submitted, waited for (progress, Ctrl-C heard within a second),
    and cancelled when the run ends early."""

    ray: Any
    report: Progress
    chunk_bytes: int

    def __post_init__(self) -> None:
        self.outstanding: list[Any] = []
        remote = self.ray.remote
        self.scan = remote(num_cpus=1, max_retries=RETRIES)(parts.scan_part)
        self.attribute_task = remote(num_cpus=1, max_retries=RETRIES)(_attribute_task)
        self.merge_task = remote(num_cpus=1, max_retries=RETRIES)(_merge_task)

    def cpus(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def group_bytes(self, files: list[parts.File]) -> int:
        """Groups small enough to keep every CPU busy (two a CPU), large enough that a task
        costs more than its sending."""
        total = sum(parts.size_of(f) for f in files)
        return max(SMALLEST_GROUP, min(parts.GROUP_BYTES, math.ceil(total / (2 * self.cpus()))))

    def ranges(self, lines: int, range_rows: int) -> int:
        """How many ranges the timeline is cut into: about `range_rows` rows each, and one a
        CPU at least on a large set (the ranges are merged at once)."""
        count = max(1, math.ceil(lines / max(1, range_rows)))
        return max(count, self.cpus()) if lines > MANY_ROWS else count

    def survey(self, groups: list[list[parts.File]]) -> Any:
        """Pass 1: a task a group; the surveys merged in file order."""
        sizes = [sum(parts.size_of(f) for f in g) for g in groups]
        refs = [self.scan.remote(g, self.chunk_bytes, __version__) for g in groups]
        found = self.wait(refs, "parsing", sizes)
        return parts.whole_tables(found)

    def attribute(self, groups: list[list[parts.File]], tables: parts.Tables, folder: str,
                  detail: bool) -> tuple[list[parts.AttributedPart], list[int]]:
        """Pass 2, a task a group (its rows cut into ranges), then a task a range (every
        group's slice merged, numbered and written): the groups' results, and the ranges
        written (the empty ones are not)."""
        shared = self.ray.put(tables)
        ranges = len(tables.bounds) + 1
        sizes = [sum(parts.size_of(f) for f in g) for g in groups]
        refs = [self.attribute_task.remote(g, shared, folder, i) for i, g in enumerate(groups)]
        results: list[parts.AttributedPart] = self.wait(refs, "attributing", sizes)
        starts = parts.offsets([r.counts for r in results])
        written = [i for i in range(ranges) if any(r.counts[i] for r in results)]
        merges = [self.merge_task.remote(folder, i, starts[i], detail,
                                         [g for g, r in enumerate(results) if r.counts[i]])
                  for i in written]
        self.wait(merges, "writing", [1] * len(merges))
        return results, written

    def wait(self, refs: list[Any], stage: str, sizes: list[int]) -> list[Any]:
        """The tasks' results in their order, waited for as they finish."""
        self.outstanding = list(refs)
        position = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        total, done = max(1, sum(sizes)), 0
        self.report(stage, 0, total)
        pending = list(refs)
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                index = position[ref]
                results[index] = self.get(ref)
                done += sizes[index]
                self.report(stage, min(done, total), total)
        self.outstanding = []
        return results

    def get(self, ref: Any) -> Any:
        """A task's result; its failure as logcorr's one-line error when it is one (bad input,
        a core panic, a cluster that lost the task), else (a bug) as raised."""
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, LogcorrError):
                raise cause from None
            if isinstance(cause, RuntimeError) and "internal error" in str(cause):
                raise CoreError(f"{cause}; please report it with the files named") from None
            raise
        except exceptions.RayError as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise EngineError(f"the Ray cluster could not run a task ({type(error).__name__}"
                              f"{': ' + first if first else ''}); Ray retried it {RETRIES} "
                              "times: check the workers' memory and logs") from None

    def cancel(self) -> None:
        """Stop the tasks still running (the run ends early)."""
        for ref in self.outstanding:
            # (a task that already ended cannot be cancelled: nothing to do)
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self.outstanding = []


def _attribute_task(files: list[parts.File], tables: parts.Tables, folder: str,
                    group: int) -> parts.AttributedPart:
    """Pass 2 over a group: its rows of each range written into `folder`'s exchange."""
    return parts.attribute_part(
        files, tables, lambda index, rows: parts.write_fragment(folder, group, index, rows))


def _merge_task(folder: str, index: int, start: int, detail: bool, groups: list[int]) -> int:
    """Range `index`'s rows of `groups` merged and written as partition `index`; its rows."""
    rows = parts.merge_range(parts.read_fragments(folder, index, groups), start, detail)
    parts.write_partition(rows, folder, index)
    return rows.height


class _Output:
    """Where the partitions go: a temporary folder beside OUT, renamed to OUT at the end (an
    interrupted run leaves nothing under OUT); without OUT, a temporary folder on this
    machine, removed with the analysis."""

    def __init__(self, output: str | Path | None) -> None:
        self.target = None if output is None else Path(output)
        if self.target is None:
            self.folder = Path(tempfile.gettempdir()) / f"logcorr-ray-{secrets.token_hex(6)}"
        else:
            _check_target(self.target)
            self.folder = self.target.parent / \
                f".{self.target.name}.{secrets.token_hex(6)}.partial"
        cleanup.register(str(self.folder))
        try:
            self.folder.mkdir(mode=0o755)
        except OSError as error:
            cleanup.unregister(str(self.folder))
            raise InputError(f"cannot create {self.folder}: {error.strerror or error}") from None

    def finish(self, analysis: parts.PartitionedAnalysis, written: list[int]) -> list[Path]:
        """Put the partitions in place; their paths."""
        folder = self.folder
        shutil.rmtree(folder / parts.EXCHANGE, ignore_errors=True)
        for left in folder.glob(".*.partial"):  # (a worker killed while writing: run again)
            left.unlink(missing_ok=True)
        if self.target is not None:
            if self.target.exists():
                shutil.rmtree(self.target)
            os.replace(self.folder, self.target)
            cleanup.unregister(str(self.folder))
            folder = self.target
        else:
            weakref.finalize(analysis, _remove, str(folder))
        return [folder / parts.partition_name(i) for i in written]

    def discard(self) -> None:
        _remove(str(self.folder))


def _remove(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    cleanup.unregister(folder)


def _check_target(target: Path) -> None:
    """OUT may be new, an empty folder or an earlier run's partitions (replaced); nothing
    else is overwritten."""
    if not target.parent.is_dir():
        raise InputError(f"cannot write {target}: folder {target.parent} does not exist")
    if target.exists() and not target.is_dir():
        raise InputError(f"cannot write {target}: it is a file; with --engine ray, -o names "
                         "a folder of parquet partitions")
    if target.is_dir():
        others = [p.name for p in target.iterdir()
                  if not (p.name.startswith("part-") and p.name.endswith(".parquet"))]
        if others:
            raise InputError(f"cannot write {target}: it holds other files ({others[0]}, …); "
                             "give a new or empty folder")
