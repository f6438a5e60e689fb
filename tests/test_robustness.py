"""Totality of `logcorr analyze`: any bytes in any file give exit 0 and one record per line.

A file is either processed, and then its records reproduce its physical lines exactly (the
texts of a line's parts concatenate to the line; undecodable bytes become U+FFFD), or skipped,
and then exactly one warning names it. Two generators feed this: byte strings built from the
pieces logs are made of (plus raw random bytes), and real lines from the fixtures with random
damage (cuts, glue, hard wraps, NULs, invalid UTF-8, CR, ANSI/OSC sequences). The long run
(10^5 inputs) is `benchmarks/fuzz.py`.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logcorr.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "analyze"
CONFIG = FIXTURES / "tp16-dpattn8-ep-hang-per-node" / "args.json"

# Pieces logs are made of, and pieces that break naive splitters and decoders.
PIECES: tuple[bytes, ...] = (
    b"\n", b"\r\n", b"\r", b"\x00", b"\t", b" ", b"x", b"hello world", b"\xff", b"\xc3",
    b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf", b"\x1f", b'"', b"#",
    b"\x1b[31m", b"\x1b[0m", b"\x1b]8;;http://x\x1b\\", b"\x07", b"\xe2\x80\xae",
    b"\xee\x80\x80",  # U+E000, the parts splitter's sentinel
    b"[2026-11-29 10:00:00] ", b"[2026-11-29 10:00:00.123 TP3] ", b"[2026-11-29 10:00:00 DP1 TP9 EP9] ",
    b"gpu-node-0:3416006:3416006 [0] NCCL INFO ", b" NCCL ", b"[20", b"[rank3]:",
    b'{"log":"', b'\\n","stream":"stderr","time":"2026-11-29T02:00:00.1Z"}', b'\\"', b"\\u001b",
    b"[rank3]:[E1129 10:00:01.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] ",
    b"I1129 10:00:01.000000 123 file.cc:12] ", b"Traceback (most recent call last):",
    b'  File "/x.py", line 3, in f', b"(SchedulerDisaggregation pid=123) ", b"Process 123: ",
    b"Pyspy dump for PID 123", b"sglang::scheduler_DP0_TP0", b"server_args=ServerArgs(tp_size=16, ",
    b"tp_size=", b"1e400", b"-8", b"99999999999999999999", b"[bold]", b"[/tmp/x]", b"\\",
)  # fmt: skip

# Damage inserted into real lines: invalid UTF-8, NULs, CR, colour and OSC sequences.
INSERTS: tuple[bytes, ...] = (
    b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x00", b"\x00\x00\x00", b"\r",
    b"\x1b[31m", b"\x1b[0m", b"\x1b[2J\x1b[H", b"\x1b]52;c;aGk=\x07", b"\x07", b"\xe2\x80\xae",
)  # fmt: skip


def expected_lines(data: bytes) -> list[str]:
    """The physical lines of `data` as the README defines them.

    >>> expected_lines(b"a\\r\\nb\\rc\\n\\xff\\nend\\r")
    ['a', 'b\\rc', '\\ufffd', 'end\\r']
    """
    if not data:
        return []
    pieces = data.split(b"\n")
    if data.endswith(b"\n"):
        pieces.pop()
    ended = [p.removesuffix(b"\r") for p in pieces[:-1]]
    last = pieces[-1].removesuffix(b"\r") if data.endswith(b"\n") else pieces[-1]
    return [p.decode("utf-8", errors="replace") for p in [*ended, last]]


def _real_lines() -> list[bytes]:
    lines: set[bytes] = set()
    for path in sorted(FIXTURES.glob("*/logs/**/*")):
        if path.is_file() and not path.name.endswith(".gz"):
            lines.update(line for line in path.read_bytes().split(b"\n") if line)
    return sorted(lines)


REAL_LINES = _real_lines()


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`logcorr.cli.main(argv)` with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def analyze_files(files: dict[str, bytes], *extra: str) -> tuple[list[dict[str, object]], str]:
    """Write `files` into a fresh folder, run `analyze --format jsonl` on it; records, stderr."""
    folder = Path(tempfile.mkdtemp(prefix="logcorr-robust-"))
    try:
        logs = folder / "logs"
        logs.mkdir()
        for name, data in files.items():
            (logs / name).write_bytes(data)
        out = folder / "out.jsonl"
        code, _, err = run_cli(["analyze", str(logs), "--format", "jsonl", "-o", str(out), *extra])
        assert code == 0, err
        assert "Traceback" not in err
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        text_code, text, text_err = run_cli(["analyze", str(logs), "--format", "text", *extra])
        assert text_code == 0, text_err
        return records, text
    finally:
        shutil.rmtree(folder)


def skipped_files(text: str) -> dict[str, str]:
    """file name -> reason, from the `warning: NAME: skipped: …` lines of the text header."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("warning: ") and ": " in line[9:]:
            name, _, reason = line[9:].partition(": ")
            assert name not in found, f"two warnings for {name}"
            found[name] = reason
    return found


def check_total(files: dict[str, bytes], records: list[dict[str, object]], text: str) -> None:
    """Every file is processed line for line, or skipped with exactly one warning."""
    by_file: dict[str, dict[int, list[tuple[int, str]]]] = {}
    for record in records:
        lines = by_file.setdefault(str(record["file"]), {})
        lines.setdefault(int(record["line"]), []).append((int(record["part"]), str(record["text"])))  # type: ignore[arg-type]
    assert sorted(int(r["order"]) for r in records) == list(range(len(records)))  # type: ignore[arg-type]
    warned = skipped_files(text)
    assert set(by_file) <= set(files)
    for name, data in files.items():
        if name in warned:
            assert name not in by_file, f"{name} skipped and also processed"
            continue
        lines = by_file.get(name, {})
        assert sorted(lines) == list(range(1, len(lines) + 1))
        for parts in lines.values():
            assert sorted(p for p, _ in parts) == list(range(len(parts)))
        got = ["".join(t for _, t in sorted(lines[n])) for n in sorted(lines)]
        assert got == expected_lines(data), name


def generated_bytes() -> st.SearchStrategy[bytes]:
    pieced = st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join)
    return st.one_of(pieced, st.binary(max_size=200))


@st.composite
def damaged_log(draw: st.DrawFn) -> bytes:
    """Real fixture lines with up to eight random cuts, glues, wraps and inserts."""
    lines = draw(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=12))
    data = bytearray(b"\n".join(lines) + b"\n")
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(("cut", "glue", "wrap", "insert", "crlf")))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "cut":  # a line loses its tail (a killed writer)
            end = data.find(b"\n", at)
            del data[at : end if end >= 0 else len(data)]
        elif kind == "glue" and (nl := data.find(b"\n", at)) >= 0:
            del data[nl]
        elif kind == "wrap":
            data[at:at] = b"\n"
        elif kind == "crlf" and (nl := data.find(b"\n", at)) >= 0:
            data[nl:nl] = b"\r"
        else:
            data[at:at] = draw(st.sampled_from(INSERTS))
    return bytes(data)


_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class TestTotality:
    @_SETTINGS
    @given(st.lists(generated_bytes(), min_size=1, max_size=3))
    def test_any_bytes(self, contents: list[bytes]) -> None:
        """Any bytes: exit 0; each file processed line for line or skipped with one warning."""
        files = {f"f{i}.log": data for i, data in enumerate(contents)}
        records, text = analyze_files(files)
        check_total(files, records, text)

    @_SETTINGS
    @given(damaged_log(), st.booleans())
    def test_damaged_real_lines(self, data: bytes, with_config: bool) -> None:
        """Real lines with damage are processed (never skipped as binary), line for line."""
        files = {"node0.log": data}
        records, text = analyze_files(files, *(("--config", str(CONFIG)) if with_config else ()))
        check_total(files, records, text)
        assert "node0.log" not in skipped_files(text) or len(data) < 200

    def test_init_hang_without_topology(self) -> None:
        """Prefixed init lines without any topology: exit 0, every line kept."""
        files = {"node0.log": b"[2026-11-29 10:00:03 DP4 TP9 EP9] Init torch distributed begin.\n"
                 b"[2026-11-29 10:00:03 DP6 TP12 EP12] Init torch distributed begin.\n"
                 b"[2026-11-29 10:00:05 DP3 TP6 EP6] Init torch distributed ends. elapsed=2.76 s, "
                 b"mem usage=0.43 GB\n"}
        records, text = analyze_files(files)
        check_total(files, records, text)

    def test_bom_kept(self) -> None:
        """A UTF-8 byte order mark stays in the first line's text (it is not a line ending)."""
        files = {"a.log": b"\xef\xbb\xbf[2026-11-29 10:00:00] hello\nnext\n"}
        records, text = analyze_files(files)
        check_total(files, records, text)

    def test_sentinel_and_separator(self) -> None:
        """The parts splitter's sentinel and the CSV path's separator are ordinary text."""
        files = {"a.log": "x\ue000[2026-11-29 10:00:00 TP1] b\na\x1fb[2026-11-29 10:00:00 TP2] c\n"
                 .encode()}
        records, text = analyze_files(files)
        check_total(files, records, text)


class TestOnceCrashing:
    """Inputs the fuzzer once crashed on."""

    def test_proctitle_rank_past_int32(self) -> None:
        """A proctitle with an absurd rank is kept as an unattributed line."""
        files = {"a.log": b"Process 123: sglang::scheduler_DP0_TP99999999999999999999\n"}
        records, text = analyze_files(files)
        check_total(files, records, text)
