"""The commands of the command line (`logcorr.cli` parses the options and calls these): call
the library, print. Imported only when a command runs, so that polars and rich load after
`analyze` has started reading the files (see `logcorr.start`)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

import polars as pl
from rich.console import Console as RichConsole
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from logcorr.api import KEEP_ROWS, STAGES, Analysis, RayOptions, analyze, select_rows
from logcorr.config import LaunchConfig, load_config
from logcorr.errors import ConfigError, InputError
from logcorr.fixtures import Comparison, compare, new_fixture, open_fixture, write_expected
from logcorr.fixtures import run as run_fixture
from logcorr.output import (
    MACHINE_FORMATS,
    parse_clock_offsets,
    write_json,
    write_machine,
    write_text,
)
from logcorr.render_check import render_comparison
from logcorr.render_timeline import (
    findings_view,
    head_tail,
    header,
    inert,
    text_lines,
    timeline_view,
)
from logcorr.render_topology import render_rank, render_topology
from logcorr.selector import parse_selector
from logcorr.start import Started
from logcorr.topology import build_topology, check_config, topology_to_json


class Console(RichConsole):
    """rich's console, but a pipe whose reader has gone (`| head`) is left to the command line,
    which ends every output format alike (exit 0, nothing said); rich would exit 1."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def run_topology(args: argparse.Namespace) -> int:
    config = load_config(args.config, sglang_version=args.sglang_version,
                         validate=not args.no_validate)
    topology = build_topology(config, validate=not args.no_validate)
    if args.no_validate:
        _warn_if_refused(config)
    processes = list(topology.processes)
    if args.rank:
        processes = topology.select(parse_selector(args.rank).criteria())
        if not processes:
            raise InputError(f"no process matches --rank {args.rank!r} in this topology "
                             f"({len(topology.processes)} schedulers)")
    if args.format == "json":
        document = topology_to_json(topology)
        if args.rank:
            keys = {p.key for p in processes}
            document["processes"] = [d for d, p in zip(document["processes"],  # type: ignore
                                                       topology.processes) if p.key in keys]
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return 0
    console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)
    console.print(render_rank(topology, processes) if args.rank else render_topology(topology))
    return 0


def _warn_if_refused(config: LaunchConfig) -> None:
    """--no-validate: say loudly when SGLang itself would not launch this layout."""
    try:
        check_config(config)
    except ConfigError as error:
        sys.stderr.write(f"logcorr: warning: SGLang would refuse to launch this layout ({error}); "
                         "coordinates computed anyway because of --no-validate\n")


def run_analyze(args: argparse.Namespace, started: Started | None = None) -> int:
    if args.engine == "ray" or args.ray_address is not None or args.ray_cpus is not None:
        return _run_analyze_on_ray(args)
    selector = parse_selector(args.select) if args.select else None
    offsets = parse_clock_offsets(args.clock_offset)
    fmt = args.format or ("rich" if sys.stdout.isatty() else "text")
    filtered = selector is not None or args.since is not None or args.until is not None
    # (a terminal's view of the whole timeline shows its head and tail: no runs are written)
    lean = fmt in ("rich", "text") and not filtered and not args.html and args.limit > 0
    with _progress_bar() as progress:
        analysis = analyze(args.paths, config=args.config, sglang_version=args.sglang_version,
                           clock_offsets=offsets, validate=not args.no_validate,
                           progress=progress,
                           keep=max(KEEP_ROWS, args.limit // 2) if lean else None,
                           started=started)
    if fmt == "perfetto" and filtered:
        raise InputError("--select, --since and --until do not apply to --format perfetto "
                         "(the trace shows every process)")
    batches = select_rows(analysis, selector, args.since, args.until)
    if args.report:
        write_json(analysis.report(), args.report)
    if args.html or fmt == "perfetto":
        _write_pictures(analysis, args.html, args.output if fmt == "perfetto" else None,
                        fmt == "perfetto")
    if fmt in (*MACHINE_FORMATS, "perfetto"):
        for warning in analysis.warnings:  # the header that carries them is not printed
            sys.stderr.write(f"logcorr: warning: {inert(warning)}\n")
        if fmt != "perfetto":
            write_machine(batches, fmt, args.output)
    else:
        with _text_stream(args.output) as stream:
            tty = stream is sys.stdout and sys.stdout.isatty()
            console = Console(file=stream, soft_wrap=True, highlight=False,
                              force_terminal=None if tty else False, width=None if tty else 160)
            print_timeline(console, analysis, batches if filtered else None, fmt, args.limit)
    failed = any(f.severity == "error" for f in analysis.findings)
    return 1 if args.exit_code and failed else 0


def _run_analyze_on_ray(args: argparse.Namespace) -> int:
    """`analyze --engine ray`: the timeline as parquet partitions in the folder -o OUT/, the
    findings in --report; nothing on stdout."""
    if args.engine != "ray":
        raise InputError("--ray-address and --ray-cpus go with --engine ray")
    if args.ray_cpus is not None and args.ray_cpus < 1:
        raise InputError(f"--ray-cpus {args.ray_cpus}: give a number of CPUs, at least 1")
    unsupported = [name for name, value in (("--select", args.select), ("--since", args.since),
                                            ("--until", args.until), ("--html", args.html))
                   if value is not None]
    if unsupported:
        raise InputError(f"{unsupported[0]} does not apply with --engine ray (it writes the "
                         "whole timeline as parquet partitions: filter them when reading)")
    if args.format not in (None, "parquet"):
        raise InputError(f"--format {args.format} does not apply with --engine ray: it writes "
                         "parquet partitions (--format parquet -o OUT/)")
    if not args.output:
        raise InputError("--engine ray writes the timeline as parquet partitions into a "
                         "folder: add -o OUT/")
    offsets = parse_clock_offsets(args.clock_offset)
    options = RayOptions(address=args.ray_address, cpus=args.ray_cpus, output=args.output)
    with _progress_bar() as progress:
        analysis = analyze(args.paths, config=args.config, sglang_version=args.sglang_version,
                           clock_offsets=offsets, validate=not args.no_validate,
                           progress=progress, engine="ray", ray=options)
    if args.report:
        write_json(analysis.report(), args.report)
    for warning in analysis.warnings:
        sys.stderr.write(f"logcorr: warning: {inert(warning)}\n")
    failed = any(f.severity == "error" for f in analysis.findings)
    return 1 if args.exit_code and failed else 0


def _write_pictures(analysis: Analysis, html_path: str | None, trace_path: str | None,
                    trace: bool) -> None:
    """The HTML report and / or the Perfetto trace, from one pass over the timeline."""
    from logcorr.digest import digest
    from logcorr.perfetto import write_trace
    from logcorr.report_html import write_html

    gathered = digest(analysis)
    if html_path:
        write_html(analysis, gathered, html_path)
    if trace:
        with _text_stream(trace_path) as stream:
            write_trace(gathered, stream)


@contextlib.contextmanager
def _progress_bar() -> Iterator[Callable[[str, int, int], None] | None]:
    """A stage progress bar on stderr, only when stderr is a terminal (never in output)."""
    if not sys.stderr.isatty():
        yield None
        return
    with Progress(TextColumn("logcorr: {task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("reading", total=len(STAGES) - 1)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        yield update


def print_timeline(console: Console, analysis: Analysis,
                    batches: Iterator[pl.DataFrame] | None, fmt: str, limit: int) -> None:
    console.print(findings_view(analysis))
    console.print(header(analysis, analysis.tally.lines if batches is None else None, limit))
    for piece in head_tail(analysis, batches, limit):
        if isinstance(piece, str):
            console.print(Text(piece, style="dim"))
        elif fmt == "rich":
            console.print(timeline_view(piece, analysis.topology, console))
        else:
            console.file.writelines(f"{line}\n" for line in text_lines(piece, analysis.topology))


@contextlib.contextmanager
def _text_stream(output: str | None) -> Iterator[TextIO]:
    """stdout, or a buffer written to `output` atomically once everything is rendered (an
    interrupted run leaves no partial file under that name)."""
    if output is None:
        yield sys.stdout
        return
    buffer = io.StringIO()
    yield buffer
    write_text(buffer.getvalue(), output)


def run_lnav_format(args: argparse.Namespace) -> int:
    from logcorr.lnav_format import install, lnav_format_text

    if args.dir and not args.install:
        raise InputError("--dir goes with --install")
    if not args.install:
        sys.stdout.write(lnav_format_text())
        return 0
    try:
        path = install(args.dir)
    except OSError as error:
        raise InputError(f"cannot install the lnav format: {error}") from None
    sys.stdout.write(f"installed {path}; open a timeline with `lnav timeline.jsonl`\n")
    return 0


def run_check(args: argparse.Namespace) -> int:
    fixtures = [open_fixture(path, need_expected=not args.update) for path in args.fixtures]
    results = []
    for fixture in sorted(fixtures, key=lambda f: str(f.path)):
        sys.stderr.write(f"logcorr: checking {fixture.path} ...\n")
        analysis = run_fixture(fixture)
        if args.update:
            before = compare(fixture, analysis) if (fixture.expected / "report.json").exists() \
                and (fixture.expected / "timeline.jsonl").exists() else None
            write_expected(fixture, analysis)
            sys.stderr.write(f"logcorr: updated {fixture.expected}: "
                             f"{_update_summary(before)}\n")
            continue
        results.append(compare(fixture, analysis))
    if args.update:
        return 0
    if args.format == "json":
        sys.stdout.write(json.dumps({"fixtures": [r.to_json() for r in results]}, indent=1,
                                    sort_keys=True) + "\n")
    else:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
        for result in results:
            console.print(render_comparison(result))
    return 0 if all(r.matches for r in results) else 1


def _update_summary(before: Comparison | None) -> str:
    if before is None:
        return "written for the first time"
    if before.matches:
        return "no change"
    return (f"{len(before.findings_changed)} finding change(s), {before.lines_changed} line(s) "
            f"changed attribution, {before.lines_added} added, {before.lines_removed} removed")


def run_fixture_new(args: argparse.Namespace) -> int:
    fixture = new_fixture(args.logs, args.config, args.output)
    report = json.loads((fixture.expected / "report.json").read_text())
    sys.stdout.write(f"created fixture {fixture.path}: {len(report['findings'])} finding(s); "
                     f"check it with `logcorr check {fixture.path}`\n")
    return 0
