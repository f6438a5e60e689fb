"""Where the time goes: CPU seconds per stage of `logcorr analyze`, beside polars' floor.

    python benchmarks/stages.py SET [--formats parquet,jsonl]

SET is a folder with `logs/` and `args.json` (as `run.py` makes them under DATA/sets/<size>/).
The analysis runs once in this process and the process's CPU time (the core's workers and
polars' threads included) is charged to the stage running at the time; each stage is charged
its own time only (a stage called inside another is not counted twice). The core's workers go
on attributing the next chunks while Python sorts and stores the last ones, so part of their
time is charged to order and store. The stages:

* survey     the core's first pass: files read and parsed, key rows and whole-set tables
* resolve    the whole-set step: launch config, topology, key rows -> processes
* attribute  the core's second pass: files read and parsed again, every line -> its process,
             timestamps completed, sort key, output columns (and the frames made of them)
* store      sorted runs held in memory or spilled (an export's reading of the runs is its
             write's)
* order      each chunk sorted into its run, with the counts and event rows it yields
* diagnose   the findings
* write FMT  the ordered timeline written as FMT: the runs read back and merged, and written
* text view (whole run)  `logcorr analyze --format text` end to end (a second analysis and
             its findings, header, head and tail), the default view's whole cost

Then polars' floor on the same files (`floor.py`'s steps: read every line, one prefix regex,
write parquet), measured the same way. Figures are CPU seconds, so a shared, noisy machine
changes them less than wall time; they add up to more than the wall time of a run, which uses
two cores.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from functools import wraps
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import floor
import polars as pl

from logcorr import api, cli, stream
from logcorr.output import write_machine

CHARGED: Counter[str] = Counter()
_STACK: list[str] = []


def _charge(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        _switch(label)
        try:
            return fn(*args, **kwargs)
        finally:
            _switch(None)
    return timed


_CLOCK = {"at": 0.0}


def _switch(label: str | None) -> None:
    """Charge the time since the last switch to the innermost running stage, then enter
    `label` (or leave the innermost stage when None)."""
    now = time.process_time()
    if _STACK:
        CHARGED[_STACK[-1]] += now - _CLOCK["at"]
    _CLOCK["at"] = now
    if label is None:
        _STACK.pop()
    else:
        _STACK.append(label)


def _outside_writes(charged: Callable[..., Any]) -> Callable[..., Any]:
    """`charged` when called outside an output's write; inside one (the merge reading the
    runs back) its time stays with that write."""
    plain = charged.__wrapped__  # type: ignore[attr-defined]

    @wraps(plain)
    def either(*args: Any, **kwargs: Any) -> Any:
        inside = bool(_STACK) and _STACK[-1].startswith("write ")
        return (plain if inside else charged)(*args, **kwargs)
    return either


def _charged_batches(inner: Callable[..., Iterator[Any]], label: str
                     ) -> Callable[..., Iterator[Any]]:
    """A generator function whose every step is charged to `label`."""
    @wraps(inner)
    def steps(*args: Any, **kwargs: Any) -> Iterator[Any]:
        source = inner(*args, **kwargs)
        while True:
            _switch(label)
            try:
                item = next(source)
            except StopIteration:
                _switch(None)
                return
            _switch(None)
            yield item
    return steps


def instrument() -> None:
    api._survey = _charge("survey", api._survey)
    stream.Workspace.write = _charge("store", stream.Workspace.write)  # type: ignore[method-assign]
    stream.Piece.read = _outside_writes(_charge("store", stream.Piece.read))  # type: ignore[method-assign]
    for name in ("_server_args_lines", "_topology", "_file_nodes", "resolve_keys",
                 "crowded_headers", "attribution_arguments"):
        setattr(api, name, _charge("resolve", getattr(api, name)))
    api._attribute_pass = _charge("attribute", api._attribute_pass)
    api._write = _charge("order", api._write)
    api.diagnose = _charge("diagnose", api.diagnose)


def measure(folder: Path, formats: list[str]) -> tuple[Counter[str], int]:
    instrument()
    analysis = api.analyze([folder / "logs"], config=folder / "args.json")
    with tempfile.TemporaryDirectory() as out:
        for fmt in formats:
            _charge(f"write {fmt}", write_machine)(analysis.batches(), fmt,
                                                   str(Path(out) / f"timeline.{fmt}"))
    before = CHARGED.copy()
    start = time.process_time()
    with redirect_stdout(io.StringIO()):
        cli.main(["analyze", str(folder / "logs"), "--config", str(folder / "args.json"),
                  "--format", "text"])
    charged = before + Counter({"text view (whole run)": time.process_time() - start})
    return charged, analysis.tally.lines


def floor_stages(folder: Path) -> dict[str, float]:
    """floor.py's steps, in CPU seconds."""
    clock = time.process_time
    files = floor.log_files(folder)
    start = clock()
    lines = floor.read_lines(files)
    read = clock()
    tp = floor.one_regex(lines)
    matched = clock()
    with tempfile.TemporaryDirectory() as out:
        floor.write(lines, tp, Path(out))
    return {"read": read - start, "regex": matched - read, "write parquet": clock() - matched}


def render(charged: Counter[str], lines: int, floor_cpu: dict[str, float]) -> str:
    order = ["survey", "resolve", "attribute", "store", "order", "diagnose"]
    analysis = sum(charged[s] for s in order)
    floor_of = {"survey": f"read {floor_cpu['read']:.2f} + regex {floor_cpu['regex']:.2f}",
                "write parquet": f"write parquet {floor_cpu['write parquet']:.2f}"}
    rows = [(s, charged[s]) for s in order]
    rows += [(s, v) for s, v in sorted(charged.items()) if s not in order]
    out = ["| stage | CPU s | s per M lines | share of analysis | polars floor (CPU s) |",
           "|---|---|---|---|---|"]
    for stage, seconds in rows:
        share = f"{100 * seconds / analysis:.0f}%" if stage in order and analysis else "-"
        out.append(f"| {stage} | {seconds:.2f} | {seconds / max(lines, 1) * 1e6:.2f} | {share} "
                   f"| {floor_of.get(stage, '-')} |")
    out.append(f"| analysis (sum) | {analysis:.2f} | {analysis / max(lines, 1) * 1e6:.2f} | 100% "
               f"| {sum(floor_cpu.values()):.2f} (all three steps) |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--formats", default="parquet,jsonl")
    args = parser.parse_args(argv)
    floor_cpu = floor_stages(args.set)
    charged, lines = measure(args.set, [f for f in args.formats.split(",") if f])
    print(f"{lines:,} lines, {sum(p.stat().st_size for p in floor.log_files(args.set)) / 1e6:,.0f}"
          f" MB, polars {pl.__version__}")
    print(render(charged, lines, floor_cpu))
    size = sum(p.stat().st_size for p in floor.log_files(args.set))
    for stage in ("survey", "attribute"):
        if charged[stage]:
            print(f"{stage}: the core's scan at {size / 1e6 / charged[stage]:,.0f} MB/s per core "
                  "(every byte read and parsed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
