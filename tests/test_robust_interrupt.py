"""Interrupted runs never leave a partial file under the output name.

Machine formats and --report are written to a temporary file in the target folder and renamed
at the end: after Ctrl-C the output is either absent (or the previous file, untouched) or
complete, and no temporary file is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl
import pytest
from test_robustness import run_cli

import logcorr.cli
import logcorr.commands
import logcorr.output

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-rank"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 16-rank hang of about 2 MB: analyze takes long enough to interrupt."""
    root = tmp_path_factory.mktemp("interrupt")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate.py"), str(root / "g"),
                    "--config", str(FIXTURE / "args.json"), "--layout", "per-rank",
                    "--steps", "2000", "--seed", "3", "--incident", "hang"],
                   check=True, capture_output=True, cwd=ROOT)
    return root / "g" / "logs"


class TestSigint:
    def test_sigint_during_analyze(self, logs: Path, tmp_path: Path) -> None:
        """SIGINT at several moments: exit 130 and no output, or exit 0 and the full output
        (the core on two workers)."""
        command = [sys.executable, "-m", "logcorr", "analyze", str(logs), "--format", "jsonl"]
        threaded = dict(os.environ, LOGCORR_THREADS="2")
        reference = tmp_path / "reference.jsonl"
        started = time.monotonic()
        subprocess.run([*command, "-o", str(reference)], check=True, timeout=300, env=threaded)
        took = time.monotonic() - started
        complete = reference.read_bytes()
        outcomes = set()
        for delay in (took * f for f in (0.3, 0.5, 0.7, 0.9)):  # from imports to writing
            target = tmp_path / f"out-{delay}.jsonl"
            process = subprocess.Popen([*command, "-o", str(target)], stderr=subprocess.PIPE,
                                       env=threaded)
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=300)
            outcomes.add(process.returncode)
            if process.returncode != 0:  # interrupted, possibly just after the rename
                assert process.returncode in (130, -signal.SIGINT), err
            if process.returncode == 0 or target.exists():
                assert target.read_bytes() == complete, "a partial file under the output name"
        assert _leftovers(tmp_path) == []
        assert outcomes & {130, -signal.SIGINT}, "no run was interrupted; raise the log size"

    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
    def test_signal_removes_temporary_files(self, logs: Path, tmp_path: Path,
                                            signum: int) -> None:
        """Ctrl-C or SIGTERM in the middle of the analysis leaves no spill folder in TMPDIR
        and exits 130 / 143 (or dies of the signal before the handler is installed)."""
        spill = tmp_path / "spill"
        spill.mkdir()
        command = [sys.executable, "-m", "logcorr", "analyze", str(logs), "--format", "jsonl",
                   "-o", str(tmp_path / "out.jsonl")]
        expected = {130: signal.SIGINT, 143: signal.SIGTERM}
        codes = set()
        for pause in (0.0, 0.05):
            process = subprocess.Popen(command, stderr=subprocess.PIPE,
                                       env=dict(os.environ, TMPDIR=str(spill),
                                                LOGCORR_MEMORY_BUDGET="0", LOGCORR_THREADS="2"))
            deadline = time.monotonic() + 60
            while not list(spill.iterdir()) and time.monotonic() < deadline:
                time.sleep(0.005)  # until the analysis has made its spill folder
            time.sleep(pause)
            process.send_signal(signum)
            _, err = process.communicate(timeout=300)
            codes.add(process.returncode)
            assert process.returncode == 0 or expected.get(process.returncode) == signum, err
            assert b"Traceback" not in err
            assert list(spill.iterdir()) == [], (process.returncode, err)
        assert codes - {0}, "no run was interrupted; raise the log size"

    def test_output_mode_follows_umask(self, tmp_path: Path) -> None:
        """The renamed output is readable like any new file (umask), not 0600 from mkstemp."""
        old = os.umask(0o022)
        try:
            target = tmp_path / "out.jsonl"
            code, _, err = run_cli(["analyze", str(FIXTURE / "logs"), "--format", "jsonl",
                                    "-o", str(target), "--report", str(tmp_path / "r.json")])
        finally:
            os.umask(old)
        assert code == 0, err
        assert (target.stat().st_mode & 0o777) == 0o644
        assert ((tmp_path / "r.json").stat().st_mode & 0o777) == 0o644


class TestInterruptedWrite:
    @pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
    def test_machine_format(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            fmt: str) -> None:
        """Ctrl-C in the middle of writing: no new file, the old one untouched, no temp file."""
        target = tmp_path / f"out.{fmt}"
        target.write_bytes(b"previous complete output")

        def half_then_interrupt(batches: Iterable[pl.DataFrame], fmt: str, path: str) -> None:
            with open(path, "wb") as stream:
                stream.write(b'{"file": "half')
            raise KeyboardInterrupt

        monkeypatch.setattr(logcorr.output, "_write", half_then_interrupt)
        code, _, err = run_cli(["analyze", str(FIXTURE / "logs"), "--format", fmt,
                                "-o", str(target)])
        assert code == 130 and "interrupted" in err
        assert target.read_bytes() == b"previous complete output"
        assert _leftovers(tmp_path) == []

    def test_report(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An interrupted --report write leaves no report file."""
        report = tmp_path / "report.json"

        def interrupt(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(logcorr.output.json, "dumps", interrupt)
        code, _, _ = run_cli(["analyze", str(FIXTURE / "logs"), "--format", "jsonl",
                              "-o", str(tmp_path / "out.jsonl"), "--report", str(report)])
        assert code == 130
        assert sorted(p.name for p in tmp_path.iterdir()) == []

    @pytest.mark.parametrize("fmt", ["text", "rich"])
    def test_text_formats(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          fmt: str) -> None:
        """Ctrl-C while printing the timeline to -o leaves no file under that name."""
        target = tmp_path / "out.txt"

        def interrupt(*args: object, **kwargs: object) -> Iterator[pl.DataFrame | str]:
            yield "... some lines ..."
            raise KeyboardInterrupt

        monkeypatch.setattr(logcorr.commands, "head_tail", interrupt)
        code, _, _ = run_cli(["analyze", str(FIXTURE / "logs"), "--format", fmt,
                              "-o", str(target)])
        assert code == 130
        assert not target.exists()
        assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("module", ["logcorr.cli", "logcorr.commands"])
def test_ctrl_c_while_importing_is_not_a_traceback(module: str) -> None:
    """Ctrl-C before the heavy modules are loaded (logcorr.commands: after the analysis has
    started reading the files): `logcorr: interrupted`, exit 130."""
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r}:\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from logcorr.launch import main\n"
        "main()\n")
    done = subprocess.run([sys.executable, "-c", script, "analyze", str(FIXTURE / "logs")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 130
    assert done.stderr == "logcorr: interrupted\n"


@pytest.mark.parametrize(("given", "expected"), [(None, "muzzy_decay_ms:0"),
                                                 ("dirty_decay_ms:0", "dirty_decay_ms:0")])
def test_entry_sets_the_allocator_before_polars_loads(given: str | None, expected: str) -> None:
    """The console entry asks polars' jemalloc to release freed pages at once (lower peak RSS),
    before polars is imported; a setting the user made is kept."""
    script = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print(os.environ.get('_RJEM_MALLOC_CONF'),\n"
        "                              'polars-preloaded' if PRE else 'polars-after'))\n"
        "PRE = 'polars' in sys.modules\n"
        "from logcorr.launch import main\n"
        "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if given is not None:
        env["_RJEM_MALLOC_CONF"] = given
    done = subprocess.run([sys.executable, "-c", script, "--version"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=False, env=env)
    assert done.returncode == 0
    conf, loaded = done.stdout.splitlines()[-1].split()
    # polars puts its own defaults first; jemalloc takes the last value of an option
    assert conf.split(",")[-1] == expected
    assert loaded == "polars-after"


def test_a_signal_inside_a_finalizer_is_sent_again() -> None:
    """A signal that arrives inside a `__del__` (the `regex` package compiling a pattern) is
    not raised there - Python would print "Exception ignored" with a traceback and go on - but
    sent again a moment later; anywhere else it is raised."""
    cli = logcorr.cli

    got: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    try:
        class Finalized:
            def __del__(self) -> None:
                cli._unwind(signal.SIGUSR1, sys._getframe(), cli.Terminated)

        Finalized()
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == [signal.SIGUSR1]
        with pytest.raises(cli.Terminated):
            cli._unwind(signal.SIGUSR1, sys._getframe(), cli.Terminated)
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                      (signal.SIGTERM, 143, "terminated")])
def test_an_error_raised_while_a_signal_unwinds_the_run_is_the_signal(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], signum: int,
        code: int, said: str) -> None:
    """A signal's exception raised inside a library that turns it into one of its own (polars,
    asked for a dtype as the signal arrived: `TypeError: '<unprintable str object>' is not a
    Polars data type`, seen once under SIGTERM) ends the run as the signal does: its line and
    exit code, no traceback. Without a signal, such an error is still a bug and propagates."""
    cli = logcorr.cli

    def failing(args: object) -> int:
        with pytest.raises(cli.Terminated if signum == signal.SIGTERM else KeyboardInterrupt):
            cli._unwind(signum, sys._getframe(), cli.Terminated if signum == signal.SIGTERM
                        else KeyboardInterrupt)
        raise TypeError("'<unprintable str object>' is not a Polars data type")

    monkeypatch.setattr(logcorr.commands, "run_topology", failing)
    assert cli.main(["topology", "--config", str(ROOT / "fixtures" / "analyze" /
                                                 "tp8-crash-per-node" / "args.json")]) == code
    assert capsys.readouterr().err == f"logcorr: {said}\n"
    monkeypatch.setattr(logcorr.commands, "run_topology",
                        lambda args: (_ for _ in ()).throw(TypeError("a bug")))
    with pytest.raises(TypeError, match="a bug"):
        cli.main(["topology", "--config", str(ROOT / "fixtures" / "analyze" /
                                              "tp8-crash-per-node" / "args.json")])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_run_inside_a_polars_call(tmp_path: Path, signum: int) -> None:
    """A signal while the main thread is inside a polars call that does not return (here:
    opening a FIFO nobody writes to; Rust retries the interrupted open, so Python's handler
    never runs) still ends the run within 2 s: exit 130/143, one line on stderr, no spill folder and
    no temporary output left."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    script = (
        "import sys, polars as pl, logcorr.api\n"
        f"logcorr.api.diagnosed = lambda *args: pl.read_ipc({str(fifo)!r})\n"
        "from logcorr.launch import main\n"
        "main()\n")
    process = subprocess.Popen(
        [sys.executable, "-c", script, "analyze", str(FIXTURE / "logs"), "--format", "jsonl",
         "-o", str(out / "timeline.jsonl")], stderr=subprocess.PIPE, cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(spill), LOGCORR_MEMORY_BUDGET="0"))
    main_thread = Path(f"/proc/{process.pid}/wchan")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError):
            if main_thread.read_text() == "wait_for_partner":  # (blocked opening the FIFO)
                break
        time.sleep(0.02)
    assert process.poll() is None
    assert [p for p in spill.glob("logcorr-*") if any(p.iterdir())], "no spill to remove"
    sent = time.monotonic()
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=10)
    finally:
        process.kill()
    took = time.monotonic() - sent
    assert took < 2.0, took
    assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err
    assert err.decode() in ("logcorr: interrupted\n", "logcorr: terminated\n")
    assert list(spill.glob("logcorr-*")) == [] and list(out.iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_run_inside_the_core(tmp_path: Path, signum: int) -> None:
    """A signal while the line core's threads (two workers here, and the thread that reads
    the files) hold the run - one of them blocked opening a file that never comes (a FIFO
    put in the place of a log after the folder was read: a hung network mount) - still ends
    the run within 2 s: exit 130/143, one line on stderr, nothing left behind."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURE / "logs", logs)
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    script = (
        "import os, logcorr.start as start\n"
        "found = start.discover\n"
        "def discover(paths, skipped):\n"
        "    sources, warnings = found(paths, skipped)\n"
        "    os.remove(sources[-1].path)\n"
        "    os.mkfifo(sources[-1].path)\n"
        "    return sources, warnings\n"
        "start.discover = discover\n"
        "from logcorr.launch import main\n"
        "main()\n")
    process = subprocess.Popen(
        [sys.executable, "-c", script, "analyze", str(logs), "--format", "jsonl",
         "-o", str(out / "timeline.jsonl")], stderr=subprocess.PIPE, cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(spill), LOGCORR_THREADS="2"))
    tasks = Path(f"/proc/{process.pid}/task")
    deadline = time.monotonic() + 120
    blocked = False
    while time.monotonic() < deadline and process.poll() is None and not blocked:
        with contextlib.suppress(OSError):  # (a thread may end while it is read)
            blocked = any((task / "wchan").read_text() == "wait_for_partner"
                          for task in tasks.iterdir())
        time.sleep(0.02)
    assert blocked and process.poll() is None, "the core never opened the FIFO"
    sent = time.monotonic()
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=10)
    finally:
        process.kill()
    took = time.monotonic() - sent
    assert took < 2.0, took
    assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err
    assert err.decode() in ("logcorr: interrupted\n", "logcorr: terminated\n")
    assert list(spill.glob("logcorr-*")) == [] and list(out.iterdir()) == []


@pytest.mark.parametrize(("raised", "signum"), [(logcorr.cli.Terminated, signal.SIGTERM),
                                                 (KeyboardInterrupt, signal.SIGINT)])
def test_a_signal_raised_where_it_cannot_propagate_is_sent_again(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        raised: type[BaseException], signum: int) -> None:
    """The signal handler's exception raised inside code that cannot pass it on (a
    finalizer here; the `regex` package's C code compiling a pattern in a real run) is not
    printed as "Exception ignored" with a traceback and lost: the signal is sent again, to be
    raised where it can be. Other such errors are reported as Python reports them."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(logcorr.cli.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(sys, "unraisablehook", logcorr.cli._unraisable)

    class Dying:
        def __init__(self, error: BaseException) -> None:
            self.error = error

        def __del__(self) -> None:
            raise self.error

    Dying(raised())
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent == [(os.getpid(), signum)]
    assert "Traceback" not in capsys.readouterr().err
    Dying(ValueError("a bug in a finalizer"))
    assert "ValueError: a bug in a finalizer" in capsys.readouterr().err
