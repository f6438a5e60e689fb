"""Command line: parse options, call the library (`logcorr.commands`), print. The only modules
that print or exit are these two.

Exit codes: 0 success; 1 findings of severity error with --exit-code, or a failed `check`;
2 bad usage or bad input (one `logcorr: error: ...` line on stderr, never a traceback).

This module imports nothing heavy: a command's handler imports `logcorr.commands` (polars,
rich) when it runs, and `analyze` first starts reading the files, so the core parses them
while those modules load (about 0.3 s of one core).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import io
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from logcorr import __version__, cleanup
from logcorr.errors import InputError, LogcorrError

if TYPE_CHECKING:
    from logcorr.start import Started

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
    command.set_defaults(handler=_command("run_topology"))


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
    command.set_defaults(handler=_command("run_check"))


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
    new.set_defaults(handler=_command("run_fixture_new"))


def _add_lnav_format(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = commands.add_parser(
        "lnav-format", help="print or install the lnav format for the jsonl timeline",
        description="Print the lnav log format for `analyze --format jsonl` output, or install "
        "it where lnav reads formats (then `lnav timeline.jsonl` and its SQL table "
        "logcorr_jsonl: SELECT ... WHERE tp_rank = 3).")
    command.add_argument("--install", action="store_true", help=(
        "write it to lnav's formats/installed/ folder (~/.lnav or ~/.config/lnav)"))
    command.add_argument("--dir", metavar="DIR", help="with --install: write it to DIR instead")
    command.set_defaults(handler=_command("run_lnav_format"))


def _command(name: str) -> Handler:
    """The handler `name` of logcorr.commands, imported when the command runs."""
    def run(args: argparse.Namespace) -> int:
        from logcorr import commands

        handler: Handler = getattr(commands, name)
        return handler(args)

    return run


def _run_analyze(args: argparse.Namespace) -> int:
    started = _head_start(args)
    from logcorr.commands import run_analyze

    return run_analyze(args, started)


def _head_start(args: argparse.Namespace) -> Started | None:
    """A local analysis's pass 1, started before the heavy modules are imported. Whatever
    would fail here (a bad config, no files) is left to the analysis, which reports it after
    the options it checks first: the same error, in the same order."""
    if args.engine != "local" or args.ray_address is not None or args.ray_cpus is not None:
        return None
    from logcorr.start import given_topology, start_reading

    try:
        given = given_topology(args.config, args.sglang_version, not args.no_validate)
        return start_reading(args.paths, given, None, None)
    except LogcorrError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run logcorr; return the exit code. Errors from bad input become one stderr line."""
    if sys.stdout is None:  # (started with standard output closed: `>&-`)
        sys.stdout = _ClosedOutput()
    _arrived.clear()  # (a run's own signals: the tests run many in one process)
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.handler
        return handler(args)
    except Terminated:
        return _ended_by(signal.SIGTERM)
    except KeyboardInterrupt:
        return _ended_by(signal.SIGINT)
    except Exception as error:
        if _arrived:
            # (the signal's exception raised inside a library that turned it into one of its
            # own: polars, asked for a dtype while the signal arrived, raises a TypeError)
            return _ended_by(_arrived[-1])
        if isinstance(error, LogcorrError):
            sys.stderr.write(f"logcorr: error: {error}\n")
            return 2
        if isinstance(error, OSError):  # the output: a closed pipe, a full disk, closed stdout
            return _unwritten(error)
        raise


def _ended_by(signum: int) -> int:
    """Report that a signal ended the run; its exit code."""
    if signum == signal.SIGTERM:
        _said.set()
        sys.stderr.write("logcorr: terminated\n")
        return 143
    _say_interrupted()
    return 130


def _drop_output() -> None:
    """Point standard output at /dev/null: what Python still holds for it would otherwise be
    flushed into the broken pipe at exit, which prints an "Exception ignored" traceback."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # (no descriptor to point: nothing will be flushed there)
        pass


class _ClosedBytes(io.RawIOBase):
    """Standard output's bytes when it is closed: a write fails as on a closed descriptor."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


class _ClosedOutput(io.TextIOWrapper):
    """Standard output when the process started with it closed (Python leaves `sys.stdout`
    None): what is written to it fails with one error line, not an AttributeError."""

    def __init__(self) -> None:
        super().__init__(io.BufferedWriter(_ClosedBytes()), write_through=True)

    def flush(self) -> None:  # (nothing can be written: nothing is waiting)
        pass


def _os_error_code(message: str) -> int | None:
    """The error number in the message of an OSError polars raises (`No space left on device
    (os error 28)`: it sets no `errno`)."""
    found = re.search(r"\(os error (\d+)\)$", message)
    return int(found.group(1)) if found else None


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
    ignored" with a traceback and go on: the signal is sent again a moment later instead.
    The signal is noted (`_arrived`): whatever the run raises from now on is its unwinding."""
    _arrived.append(signum)
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
            return
        frame = frame.f_back
    raise error


def _unraisable(info: sys.UnraisableHookArgs) -> None:
    """A signal's exception raised where it cannot propagate (C code that checks for signals
    while it cannot fail, as the `regex` package compiling a pattern; a finalizer) would be
    printed as "Exception ignored" with a traceback and lost: the signal is sent again a
    moment later instead, to be raised where it can be. Anything else is reported as Python
    reports it."""
    error = info.exc_value
    if isinstance(error, KeyboardInterrupt):
        signum = signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT
        threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
        return
    sys.__unraisablehook__(info)


# A signal raises in the main thread only when it next runs Python code; inside a long polars
# call (or waiting for worker threads that are in one) that can take many seconds. The
# watchdog hears the signal at once (the wakeup fd is written by the C-level handler), gives
# the run this long to unwind by itself, then removes the spill folder and any temporary
# output file and ends the process.
GRACE_SECONDS = 1.0
_EXIT_CODES: dict[int, int] = {signal.SIGINT.value: 130, signal.SIGTERM.value: 143}
_said = threading.Event()  # the main thread has reported the interrupt itself
_arrived: list[int] = []  # the signals that arrived (SIGINT, SIGTERM), in order


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
    sys.unraisablehook = _unraisable
    _watchdog()
    code = main()
    # the work is done: a signal now must not interrupt the clean-up at exit with a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _leave(code)


def _leave(code: int) -> NoReturn:
    """End the process with `code` after what Python's exit does that matters here: wait for
    the threads that are not daemons, run the exit handlers (the spill folder's removal, a
    Ray session's end) and flush standard output and error. What is skipped is the teardown
    of every module and object, which costs about 0.15 s after a run of any size (most of it
    polars'): a tiny set's whole run took 0.9 s."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except OSError as error:  # (what the run wrote fitted its buffer: written only now)
        code = _unwritten(error)
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _unwritten(error: OSError) -> int:
    """The exit code when standard output could not be written: 0 for a pipe whose reader
    has gone (`| head`), else 2 with one error line."""
    code = error.errno or _os_error_code(str(error))
    if isinstance(error, BrokenPipeError) or code == errno.EPIPE:  # (`| head` is done)
        _drop_output()
        return 0
    reason = re.sub(r"^\[Errno \d+\]\s*|\s*\(os error \d+\)$", "",
                    error.strerror or str(error))
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"logcorr: error: cannot write the output: {reason}\n")
    return 2
