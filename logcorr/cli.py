"""Command line: parse options, call the library, print. The only module that prints or exits.

Exit codes: 0 success; 1 findings of severity error with --exit-code, or a failed `check`;
2 bad usage or bad input (one `logcorr: error: ...` line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TextIO

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from logcorr import __version__, cleanup
from logcorr.api import KEEP_ROWS, STAGES, Analysis, RayOptions, analyze, select_rows
from logcorr.config import LaunchConfig, load_config
from logcorr.errors import ConfigError, InputError, LogcorrError
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
    timeline_table,
)
from logcorr.render_topology import render_rank, render_topology
from logcorr.selector import parse_selector
from logcorr.topology import build_topology, check_config, topology_to_json

Handler = Callable[[argparse.Namespace], int]
FORMATS = ("rich", "text", "jsonl", "csv", "parquet", "perfetto")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as LogcorrError instead of exiting itself."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="logcorr", description=(
        "Align and attribute the logs of a multi-process SGLang deployment."))
    parser.add_argument("--version", action="version", version=f"logcorr {__version__}")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    commands.required = True
    _add_topology(commands)
    _add_analyze(commands)
    _add_check(commands)
    _add_fixture(commands)
    _add_lnav_format(commands)
    return parser


def _add_config_options(command: argparse.ArgumentParser, *, required: bool) -> None:
    command.add_argument("--config", required=required, metavar="FILE", help=(
        "launch args: JSON of ServerArgs fields, a JSON array or text file with the launch "
        "command, or a log holding SGLang's server_args= line"))
    command.add_argument("--sglang-version", metavar="V", help=(
        "SGLang version whose rules apply (default: the config's sglang_version, else 0.5.23)"))
    command.add_argument("--no-validate", action="store_true", help=(
        "compute coordinates even for a layout SGLang would refuse to launch"))


def _add_topology(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser("topology", help="rebuild every process group from launch args",
                                  description="Show every scheduler process with its coordinates "
                                  "and every process group SGLang builds.")
    _add_config_options(command, required=True)
    command.add_argument("--format", choices=("rich", "json"), default="rich",
                         help="rich tables (default) or the JSON document")
    command.add_argument("--rank", metavar="SPEC", help=(
        "explain one process, e.g. tp=10, world=5,replica=1, DP5"))
    command.set_defaults(handler=_run_topology)


def _run_topology(args: argparse.Namespace) -> int:
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


def _add_analyze(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser(
        "analyze", help="parse, attribute and align a folder of logs",
        description="Turn log files into one aligned timeline, every line tagged with the "
        "process that wrote it.")
    command.add_argument("paths", nargs="+", metavar="PATH", help="log files or directories")
    _add_config_options(command, required=False)
    command.add_argument("--format", choices=FORMATS, default=None, help=(
        "rich (default on a terminal), text (default otherwise), jsonl, csv, parquet, "
        "perfetto (a trace for Perfetto UI / chrome://tracing)"))
    command.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    command.add_argument("--select", metavar="EXPR", help=(
        "only lines of these processes: tp=3, attn_dp=5, replica=1,world=0, "
        "group=moe_ep:2, role=main; or (last) the lines of an output stream: "
        "stream=pod/sglang-0, stream=WorkerDict pid=859188"))
    command.add_argument("--since", metavar="T", help="only lines at or after T (ISO time)")
    command.add_argument("--until", metavar="T", help="only lines at or before T (ISO time)")
    command.add_argument("--clock-offset", action="append", default=[], metavar="HOST=SECONDS",
                         help="shift HOST's lines by SECONDS when ordering (repeatable)")
    command.add_argument("--limit", type=int, default=2000, metavar="N", help=(
        "terminal views show at most N lines, head and tail (default 2000; 0 = all)"))
    command.add_argument("--report", metavar="FILE", help=(
        "write the findings and coverage as JSON to FILE"))
    command.add_argument("--exit-code", action="store_true", help=(
        "exit 1 when any finding has severity error"))
    command.add_argument("--html", metavar="FILE", help=(
        "also write a self-contained HTML report (findings, swimlanes, state grids) to FILE"))
    command.add_argument("--engine", choices=("local", "ray"), default="local", help=(
        "local (default): this process; ray: tasks on a Ray cluster, the timeline written "
        "as parquet partitions into the folder -o OUT/ (pip install 'logcorr[ray]')"))
    command.add_argument("--ray-address", metavar="ADDR", help=(
        "with --engine ray: the cluster to join (auto: the one this machine belongs to; "
        "default: start one on this machine)"))
    command.add_argument("--ray-cpus", type=int, metavar="N", help=(
        "with --engine ray: CPUs of the cluster started on this machine (default: all)"))
    command.set_defaults(handler=_run_analyze)


def _run_analyze(args: argparse.Namespace) -> int:
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
                           keep=max(KEEP_ROWS, args.limit // 2) if lean else None)
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
            _print_timeline(console, analysis, batches if filtered else None, fmt, args.limit)
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


def _print_timeline(console: Console, analysis: Analysis,
                    batches: Iterator[pl.DataFrame] | None, fmt: str, limit: int) -> None:
    console.print(findings_view(analysis))
    console.print(header(analysis, analysis.tally.lines if batches is None else None, limit))
    for piece in head_tail(analysis, batches, limit):
        if isinstance(piece, str):
            console.print(Text(piece, style="dim"))
        elif fmt == "rich":
            console.print(timeline_table(piece, analysis.topology))
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


def _add_check(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser(
        "check", help="re-run fixtures and compare with their accepted results",
        description="Re-run the analysis of each fixture folder (logs/, args.json, expected/) and "
        "compare the timeline's attribution and the findings with expected/. Exit 0 when all "
        "match, 1 when any differs, 2 for a malformed fixture.")
    command.add_argument("fixtures", nargs="+", metavar="FIXTURE", help="fixture folders")
    command.add_argument("--update", action="store_true",
                         help="rewrite expected/ from the current analysis")
    command.add_argument("--format", choices=("rich", "json"), default="rich")
    command.set_defaults(handler=_run_check)


def _add_fixture(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser("fixture", help="create regression fixtures")
    actions = command.add_subparsers(dest="action", parser_class=_Parser, metavar="ACTION")
    actions.required = True
    new = actions.add_parser("new", help="turn an incident's logs into a fixture",
                             description="Copy LOGS (and the config) into a new fixture folder "
                             "and write expected/ from the current analysis.")
    new.add_argument("logs", metavar="LOGS")
    new.add_argument("--config", metavar="ARGS", help="launch args (optional with server_args)")
    new.add_argument("-o", "--output", required=True, metavar="DIR", help="new fixture folder")
    new.set_defaults(handler=_run_fixture_new)


def _add_lnav_format(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser(
        "lnav-format", help="print or install the lnav format for the jsonl timeline",
        description="Print the lnav log format for `analyze --format jsonl` output, or install "
        "it where lnav reads formats (then `lnav timeline.jsonl` and its SQL table "
        "logcorr_jsonl: SELECT ... WHERE tp_rank = 3).")
    command.add_argument("--install", action="store_true", help=(
        "write it to lnav's formats/installed/ folder (~/.lnav or ~/.config/lnav)"))
    command.add_argument("--dir", metavar="DIR", help="with --install: write it to DIR instead")
    command.set_defaults(handler=_run_lnav_format)


def _run_lnav_format(args: argparse.Namespace) -> int:
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


def _run_check(args: argparse.Namespace) -> int:
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


def _run_fixture_new(args: argparse.Namespace) -> int:
    fixture = new_fixture(args.logs, args.config, args.output)
    report = json.loads((fixture.expected / "report.json").read_text())
    sys.stdout.write(f"created fixture {fixture.path}: {len(report['findings'])} finding(s); "
                     f"check it with `logcorr check {fixture.path}`\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run logcorr; return the exit code. Errors from bad input become one stderr line."""
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.handler
        return handler(args)
    except LogcorrError as error:
        sys.stderr.write(f"logcorr: error: {error}\n")
        return 2
    except Terminated:
        _said.set()
        sys.stderr.write("logcorr: terminated\n")
        return 143
    except KeyboardInterrupt:
        _say_interrupted()
        return 130
    except BrokenPipeError:
        return 0


def _say_interrupted() -> None:
    """Report Ctrl-C; a second Ctrl-C while reporting must not add a traceback."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot be changed here
        previous = None
    _said.set()
    try:
        sys.stderr.write("logcorr: interrupted\n")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job scheduler or `kill`), unwound like Ctrl-C so that partial output and
    temporary files are removed."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    _unwind(signum, frame, Terminated)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _unwind(signum, frame, KeyboardInterrupt)


def _unwind(signum: int, frame: FrameType | None, error: type[BaseException]) -> None:
    """Raise `error` where the signal arrived - unless that is inside a finalizer (`__del__`,
    as when the `regex` package compiles a pattern), where Python would print "Exception
    ignored" with a traceback and go on: the signal is sent again a moment later instead."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
            return
        frame = frame.f_back
    raise error


# A signal raises in the main thread only when it next runs Python code; inside a long polars
# call (or waiting for worker threads that are in one) that can take many seconds. The
# watchdog hears the signal at once (the wakeup fd is written by the C-level handler), gives
# the run this long to unwind by itself, then removes the spill folder and any temporary
# output file and ends the process.
GRACE_SECONDS = 1.0
_EXIT_CODES: dict[int, int] = {signal.SIGINT.value: 130, signal.SIGTERM.value: 143}
_said = threading.Event()  # the main thread has reported the interrupt itself


def _watchdog() -> None:
    """Arm the watchdog: a daemon thread reading the signal wakeup fd."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        return

    def watch() -> None:
        signum = os.read(read, 1)[0]
        if signum not in _EXIT_CODES:
            return
        time.sleep(GRACE_SECONDS)
        cleanup.remove_all()
        if not _said.is_set():
            word = "interrupted" if signum == signal.SIGINT else "terminated"
            os.write(2, f"logcorr: {word}\n".encode())
        os._exit(_EXIT_CODES[signum])

    threading.Thread(target=watch, name="logcorr-signal-watchdog", daemon=True).start()


def main_entry() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _interrupt)
    _watchdog()
    code = main()
    # the work is done: a signal now must not interrupt the clean-up at exit with a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)
