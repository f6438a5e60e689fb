"""Bad input through `logcorr.cli.main()`: exit 2, exactly one `logcorr: error:` line, no traceback.

Each case is a command line whose inputs (config files, paths) are written into a fresh folder.
Inputs that once crashed are kept as cases of their own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest
from test_robustness import run_cli

from logcorr.api import analyze
from logcorr.errors import CoreError

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "analyze" / "tp8-crash-per-node" / "logs"
GOOD = ROOT / "fixtures" / "analyze" / "tp8-crash-per-node" / "args.json"
PER_RANK = ROOT / "fixtures" / "analyze" / "tp8-crash-per-rank"

# name -> config file content (run through topology, topology --no-validate where it must
# still fail, and analyze).
BAD_CONFIGS: dict[str, str] = {
    "malformed-json": "{tp_size: 8",
    "truncated-json": '{"tp_size": 8, "dp_size"',
    "wrong-type-list": json.dumps({"tp_size": [8]}),
    "wrong-type-text": json.dumps({"tp_size": "eight"}),
    "wrong-type-object": json.dumps({"tp_size": {"n": 8}}),
    "wrong-type-bool-size": json.dumps({"tp_size": True}),
    "wrong-type-flag": json.dumps({"tp_size": 8, "enable_dp_attention": "maybe"}),
    "wrong-type-timeout": json.dumps({"tp_size": 8, "watchdog_timeout": "soon"}),
    "fractional-size": json.dumps({"tp_size": 8.5}),
    "negative-size": json.dumps({"tp_size": -8}),
    "zero-size": json.dumps({"tp_size": 0}),
    "negative-dp": json.dumps({"tp_size": 8, "dp_size": -2}),
    "negative-node-rank": json.dumps({"tp_size": 8, "node_rank": -1}),
    "node-rank-outside": json.dumps({"tp_size": 8, "nnodes": 2, "node_rank": 5}),
    "negative-gpu": json.dumps({"tp_size": 8, "base_gpu_id": -1}),
    "zero-gpu-step": json.dumps({"tp_size": 8, "gpu_id_step": 0}),
    "unknown-version": json.dumps({"tp_size": 8, "sglang_version": "9.9.9"}),
    "garbage-version": json.dumps({"tp_size": 8, "sglang_version": "latest"}),
    "number-version": json.dumps({"tp_size": 8, "sglang_version": 5}),
    "sglang-rejects-dp": json.dumps({"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}),
    "sglang-rejects-ep": json.dumps({"tp_size": 8, "ep_size": 3}),
    "sglang-rejects-nnodes": json.dumps({"tp_size": 8, "nnodes": 3}),
    "json-number": "42",
    "json-null": "null",
    "json-array-of-numbers": "[1, 2]",
    "empty": "",
    "blank": "  \n\t\n",
    "binary": "\x00\x01\x02\ufffd",
    "prose": "hello world",
    "command-bad-quote": "python -m sglang.launch_server --tp '16",
    "command-bad-value": "python -m sglang.launch_server --tp x",
    "server-args-bad-value": "[2026-11-29 10:00:00] server_args=ServerArgs(tp_size='abc')",
    "nested-bad": json.dumps({"server_args": {"dp_size": "x"}}),
}
# Also rejected by `topology --no-validate` (they cannot be read at all).
UNREADABLE = {name for name in BAD_CONFIGS if not name.startswith(
    ("negative-", "zero-", "node-rank-", "sglang-rejects-"))}

# Once crashed (OverflowError, RecursionError), hung (10**12 processes) or passed silently.
KNOWN_BAD: dict[str, str] = {
    "infinite-size": json.dumps({"tp_size": "inf"}),
    "nan-size": json.dumps({"tp_size": "nan"}),
    "overflowing-size": json.dumps({"tp_size": "1e400"}),
    "deeply-nested-json": "[" * 100_000 + "]" * 100_000,
    "huge-size": json.dumps({"tp_size": 10**12}),
    "command-flag-without-value": "python -m sglang.launch_server --tp",
}


class _Timeout(Exception):
    pass


@pytest.fixture(autouse=True)
def time_limit() -> Iterator[None]:
    """No case may take more than 8 s (a hang is a failure, not a stuck suite)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Timeout("took more than 8 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(8)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_one_error(argv: list[str], code: int = 2) -> str:
    """Run `main(argv)`; exit `code`, one `logcorr: error:` line, no traceback. The message."""
    got, _, err = run_cli(argv)
    assert got == code, err
    errors = [line for line in err.splitlines() if line.startswith("logcorr: error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in err
    return errors[0]


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "args.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


class TestConfigErrors:
    @pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
    def test_topology(self, tmp_path: Path, name: str) -> None:
        """`topology --config BAD` names the problem in one line."""
        assert_one_error(["topology", "--config", _config(tmp_path, BAD_CONFIGS[name])])

    @pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
    def test_analyze(self, tmp_path: Path, name: str) -> None:
        """`analyze LOGS --config BAD` fails before reading logs, in one line."""
        config = _config(tmp_path, BAD_CONFIGS[name])
        assert_one_error(["analyze", str(LOGS), "--config", config, "--format", "jsonl",
                          "-o", str(tmp_path / "out.jsonl")])
        assert not (tmp_path / "out.jsonl").exists()

    @pytest.mark.parametrize("name", sorted(UNREADABLE))
    def test_no_validate_still_needs_a_readable_config(self, tmp_path: Path, name: str) -> None:
        """--no-validate skips SGLang's rules, not reading the file."""
        assert_one_error(["topology", "--no-validate", "--config",
                          _config(tmp_path, BAD_CONFIGS[name])])

    @pytest.mark.parametrize("name", sorted(KNOWN_BAD))
    def test_once_crashing_configs(self, tmp_path: Path, name: str) -> None:
        """Configs that once crashed, hung or passed silently (the reasons name the bug)."""
        assert_one_error(["topology", "--config", _config(tmp_path, KNOWN_BAD[name])])

    def test_no_validate_zero_width(self, tmp_path: Path) -> None:
        """--no-validate with a zero width is still an input error, not a crash."""
        config = _config(tmp_path, json.dumps({"tp_size": 8, "attn_cp_size": 0}))
        assert_one_error(["topology", "--no-validate", "--config", config])

    def test_missing_and_folder_config(self, tmp_path: Path) -> None:
        """A config path that does not exist, or is a folder."""
        assert "does not exist" in assert_one_error(
            ["topology", "--config", str(tmp_path / "nope.json")])
        assert_one_error(["topology", "--config", str(tmp_path)])

    @pytest.mark.parametrize("version", ["x", "0.0.1", "99.0.0"])
    def test_bad_sglang_version_option(self, version: str) -> None:
        """--sglang-version must be a version logcorr knows."""
        assert_one_error(["topology", "--config", str(GOOD), "--sglang-version", version])


Argv = Callable[[Path], list[str]]
BAD_COMMANDS: dict[str, Argv] = {
    "no-command": lambda t: [],
    "unknown-command": lambda t: ["bogus"],
    "analyze-without-path": lambda t: ["analyze"],
    "unknown-option": lambda t: ["analyze", str(LOGS), "--bogus"],
    "limit-not-a-number": lambda t: ["analyze", str(LOGS), "--limit", "abc"],
    "unknown-format": lambda t: ["analyze", str(LOGS), "--format", "xml"],
    "missing-path": lambda t: ["analyze", str(t / "nope")],
    "missing-path-among-good": lambda t: ["analyze", str(LOGS), str(t / "nope")],
    "output-folder-missing": lambda t: ["analyze", str(LOGS), "--format", "jsonl",
                                        "-o", str(t / "nope" / "x.jsonl")],
    "output-is-a-folder": lambda t: ["analyze", str(LOGS), "--format", "jsonl", "-o", str(t)],
    "text-output-is-a-folder": lambda t: ["analyze", str(LOGS), "--format", "text", "-o", str(t)],
    "text-output-folder-missing": lambda t: ["analyze", str(LOGS), "--format", "text",
                                             "-o", str(t / "nope" / "x.txt")],
    "parquet-to-stdout": lambda t: ["analyze", str(LOGS), "--format", "parquet"],
    "report-is-a-folder": lambda t: ["analyze", str(LOGS), "--format", "jsonl",
                                     "-o", str(t / "o.jsonl"), "--report", str(t)],
    "report-folder-missing": lambda t: ["analyze", str(LOGS), "--report",
                                        str(t / "nope" / "r.json")],
    "select-garbage": lambda t: ["analyze", str(LOGS), "--select", "garbage"],
    "select-not-a-number": lambda t: ["analyze", str(LOGS), "--select", "tp=x"],
    "select-unknown-group": lambda t: ["analyze", str(LOGS), "--config", str(GOOD),
                                       "--select", "group=nonsuch:2"],
    "select-group-rank-outside": lambda t: ["analyze", str(LOGS), "--config", str(GOOD),
                                            "--select", "group=tp:999"],
    "since-garbage": lambda t: ["analyze", str(LOGS), "--since", "yesterday"],
    "until-impossible-date": lambda t: ["analyze", str(LOGS), "--until", "2026-13-45"],
    "since-with-zone": lambda t: ["analyze", str(LOGS), "--since", "2026-11-29T10:00:00+05:00"],
    "clock-offset-garbage": lambda t: ["analyze", str(LOGS), "--clock-offset", "abc"],
    "clock-offset-no-host": lambda t: ["analyze", str(LOGS), "--clock-offset", "=2"],
    "clock-offset-nan": lambda t: ["analyze", str(LOGS), "--clock-offset", "h=nan"],
    "clock-offset-inf": lambda t: ["analyze", str(LOGS), "--clock-offset", "h=inf"],
    "clock-offset-huge": lambda t: ["analyze", str(LOGS), "--clock-offset", "h=1e300"],
    "rank-garbage": lambda t: ["topology", "--config", str(GOOD), "--rank", "garbage"],
    "rank-no-match": lambda t: ["topology", "--config", str(GOOD), "--rank", "tp=99"],
    "topology-without-config": lambda t: ["topology"],
}


class TestCommandErrors:
    @pytest.mark.parametrize("name", sorted(BAD_COMMANDS))
    def test_bad_command_line(self, tmp_path: Path, name: str) -> None:
        """Bad options, paths and outputs: exit 2 with one error line."""
        assert_one_error(BAD_COMMANDS[name](tmp_path))

    @pytest.mark.parametrize("argv", [["bogus"], ["analyze", str(LOGS), "--bogus"]])
    def test_usage_hint_names_a_real_command(self, argv: list[str]) -> None:
        """The usage hint is a command that exists."""
        assert "logcorr logcorr" not in assert_one_error(argv)


def test_bad_memory_budget_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOGCORR_MEMORY_BUDGET that is no size is one error saying what it takes."""
    monkeypatch.setenv("LOGCORR_MEMORY_BUDGET", "lots")
    message = assert_one_error(["analyze", str(LOGS), "--format", "jsonl"])
    assert "LOGCORR_MEMORY_BUDGET" in message and "256m" in message


def test_empty_sglang_version_is_refused() -> None:
    """`--sglang-version ""` is not silently the default version."""
    assert "unknown SGLang version" in assert_one_error(
        ["topology", "--config", str(GOOD), "--sglang-version", ""])


def test_no_room_for_temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TMPDIR that cannot hold the spill is one clear error naming TMPDIR."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    monkeypatch.setenv("LOGCORR_MEMORY_BUDGET", "0")  # a set this small is never spilled else
    message = assert_one_error(["analyze", str(LOGS), "--format", "jsonl"])
    assert "TMPDIR" in message and "missing" in message


# The one line a panic in the core ends the run with (LOGCORR_TEST_PANIC=rank3.log asks the core
# to panic where it hands over that file's rows: test-only, see rust/logcorr-py/src/set.rs).
PANIC = (r"internal error while reading [^\n]*\brank3\.log\b[^\n]*: LOGCORR_TEST_PANIC asked "
         r"for a panic on rank3\.log \(at rust/logcorr-py/src/set\.rs:\d+\); please report it "
         r"with the files named")


@pytest.mark.parametrize(("threads", "output"), [
    ("1", []), ("2", []), ("2", ["--format", "jsonl", "-o", "timeline.jsonl"])])
def test_a_panic_in_the_core_is_one_error_line(tmp_path: Path, threads: str,
                                               output: list[str]) -> None:
    """A bug that makes the compiled core panic (asked for here) ends the run as bad input
    does: exit 2 and one line, `logcorr: error: internal error while reading …` naming the file
    and where the panic happened; no traceback, no panic report of Rust's, no abort, no output.
    On one worker and on two, in the terminal view and in an export."""
    env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}  # (asks for Rust's)
    env.update(LOGCORR_THREADS=threads, LOGCORR_TEST_PANIC="rank3.log")
    done = subprocess.run([sys.executable, "-m", "logcorr", "analyze", str(PER_RANK / "logs"),
                           "--config", str(PER_RANK / "args.json"), *output],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(f"logcorr: error: {PANIC}\n", done.stderr), done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("read", ["rows_of", "batches"])
def test_a_panic_reading_files_again_is_a_core_error(monkeypatch: pytest.MonkeyPatch,
                                                     capfd: pytest.CaptureFixture[str],
                                                     read: str) -> None:
    """The terminal view keeps the timeline's ends and reads files again for the rest (a
    finding's rows, the whole timeline): a panic there is the same one error."""
    analysis = analyze([PER_RANK / "logs"], config=PER_RANK / "args.json", keep=5, threads=1)
    rank3 = next(s.file_id for s in analysis.sources if s.display == "rank3.log")
    monkeypatch.delenv("RUST_BACKTRACE", raising=False)
    monkeypatch.setenv("LOGCORR_TEST_PANIC", "rank3.log")
    with pytest.raises(CoreError, match=f"^{PANIC}$"):
        if read == "rows_of":
            analysis.rows_of([rank3])
        else:
            list(analysis.batches())
    assert "panicked" not in capfd.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "rich", "jsonl", "csv"])
@pytest.mark.parametrize("where", ["full", "closed", "pipe"])
def test_output_that_cannot_be_written_is_one_error_line(tmp_path: Path, fmt: str,
                                                         where: str) -> None:
    """Standard output on a full disk (`> /dev/full`) or closed (`>&-`): exit 2 and one
    line, `logcorr: error: cannot write the output: …`, never a traceback; a pipe whose
    reader has gone (`| head`): exit 0 and nothing said, in every format."""
    command = [sys.executable, "-m", "logcorr", "analyze", str(LOGS), "--config", str(GOOD),
               "--format", fmt]
    if where == "pipe":  # (the reader is gone before the first write: every write fails)
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True,
                                  cwd=tmp_path, timeout=60, check=False)
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (0, "")
        return
    if where == "full":
        with open("/dev/full", "wb") as full:  # (Linux: a device whose writes find no room)
            done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True,
                                  cwd=tmp_path, timeout=60, check=False)
        reason = "No space left on device"
    else:
        done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *command],
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=60,
                              check=False)
        reason = "standard output is closed"
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"logcorr: error: cannot write the output: {reason}\n"


def test_a_finished_run_ends_after_its_exit_handlers_with_its_output_whole(
        tmp_path: Path) -> None:
    """The process ends without the interpreter's teardown (`cli._leave`), but only after
    what an exit must do: the exit handlers run (one registered here, the spill folder's
    removal), and standard output flushed whole (the same bytes as the file written with
    `-o`), with the run's exit code."""
    spill = tmp_path / "spill"
    spill.mkdir()
    written = tmp_path / "timeline.csv"
    script = ("import atexit, sys\n"
              "atexit.register(lambda: sys.stderr.write('exit handlers ran\\n'))\n"
              "from logcorr.launch import main\n"
              "main()\n")
    env = dict(os.environ, TMPDIR=str(spill), LOGCORR_MEMORY_BUDGET="0")
    outputs = []
    for extra in (["-o", str(written)], []):
        done = subprocess.run(
            [sys.executable, "-c", script, "analyze", str(LOGS), "--config", str(GOOD),
             "--format", "csv", *extra], capture_output=True, cwd=tmp_path, timeout=120,
            check=False, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stderr.decode().endswith("exit handlers ran\n")
        # (everything was spilled: the folder was made, and removed at exit)
        assert list(spill.iterdir()) == []
        outputs.append(done.stdout)
    assert outputs[0] == b""
    assert outputs[1] == written.read_bytes() and outputs[1].count(b"\n") > 90
    done = subprocess.run([sys.executable, "-c", script, "analyze", str(LOGS), "--config",
                           str(GOOD), "--exit-code"], capture_output=True, cwd=tmp_path,
                          timeout=120, check=False, env=env)
    assert done.returncode == 1 and done.stderr.decode().endswith("exit handlers ran\n")
