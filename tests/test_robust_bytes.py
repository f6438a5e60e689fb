"""Hostile bytes and names: every stamp, name and line has a defined outcome, no file is lost
silently, and a pathological line costs about its own size.

Each class pins what a run used to do wrong: a traceback (a stamp past year 9999 after a zone
shift, `E0229` completed into a common year, a file name that is not UTF-8, a line of more than
65,535 glued records), or a file lost with exit 0 (a gzip with a damaged trailer, text named
`.gz` or `.bin`, a symlink `a.gz -> b.log`, a NUL hole, a lone final `\\r`).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import polars as pl
import pytest
from test_robustness import run_cli

from logcorr._core import MAX_PARTS
from logcorr.api import Analysis, analyze
from logcorr.ingest import shown

ROOT = Path(__file__).resolve().parent.parent
CRI = b"2025-07-25T07:53:08.21748708+08:00 stdout F "
DECODE = b"[2025-07-25 07:53:%02d TP%d] Decode batch. #running-req: 1, #token: 123, gen throughput (token/s): 40.1\n"


def _lines(analysis: Analysis, name: str) -> list[str]:
    """The physical lines of `name` as the timeline holds them (parts joined)."""
    rows = (analysis.timeline.filter(pl.col("file") == name).sort("line", "part")
            .group_by("line", maintain_order=True).agg(pl.col("text").str.join("")))
    return rows.get_column("text").to_list()


def _row(analysis: Analysis, needle: str) -> dict[str, object]:
    rows = analysis.timeline.filter(pl.col("text").str.contains(needle, literal=True))
    assert rows.height == 1, rows
    return rows.row(0, named=True)


class TestStamps:
    def test_zone_shift_past_9999_and_year_zero(self, tmp_path: Path) -> None:
        """A collector stamp that is past year 9999 in UTC and a SGLang stamp of year 0 leave
        `ts` null with the reason counted; the other lines keep their times."""
        (tmp_path / "pod.log").write_bytes(
            CRI + DECODE % (8, 0)
            + b"9999-12-31T23:59:59.5-01:00 stdout F Terminated at the end of time\n")
        (tmp_path / "old.log").write_bytes(b"[0000-01-01 00:00:00 TP1] from year zero\n"
                                           + DECODE % (9, 1))
        analysis = analyze([tmp_path])
        assert _row(analysis, "end of time")["ts"] is None
        assert _row(analysis, "year zero")["ts"] is None
        assert _row(analysis, "TP1] Decode")["ts"] == "2025-07-25T07:53:09"
        assert analysis.tally.notes == {"stamp outside years 1-9999": 2}
        assert analysis.report()["coverage"]["line_notes"] == {"stamp outside years 1-9999": 2}

    def test_february_29_in_a_common_year(self, tmp_path: Path) -> None:
        """A torch c10 stamp `E229` completed into 2023 names no day: no time, counted; the
        same stamp in 2024 is Feb 29."""
        line = (b"[rank3]:[E229 10:00:01.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0"
                b"(default_pg) Rank 3] Watchdog caught collective operation timeout\n")
        (tmp_path / "y2023.log").write_bytes(b"[2023-02-28 10:00:00 TP3] before\n" + line)
        (tmp_path / "y2024.log").write_bytes(b"[2024-02-28 10:00:00 TP4] before\n" + line)
        analysis = analyze([tmp_path])
        rows = analysis.timeline.filter(pl.col("text").str.contains("Watchdog"))
        by_file = dict(zip(rows["file"], rows["ts"], strict=True))
        assert by_file == {"y2023.log": None, "y2024.log": "2024-02-29T10:00:01"}
        assert analysis.tally.notes == {"no such day in the completed year": 1}

    def test_year_inference_still_crosses_new_year(self, tmp_path: Path) -> None:
        """A month-day stamp in January after a December line is next year's."""
        (tmp_path / "a.log").write_bytes(
            b"[2025-12-31 23:59:59 TP0] last of the year\n"
            b"[rank0]:[E101 00:00:01.000000000 ProcessGroupNCCL.cpp:632] timeout\n")
        analysis = analyze([tmp_path])
        assert _row(analysis, "timeout")["ts"] == "2026-01-01T00:00:01"


class TestNames:
    def test_name_not_utf8(self, tmp_path: Path) -> None:
        """A file name that is not UTF-8 is read; shown with `\\xHH`, a backslash doubled, in
        every output (reversible); the text view shows it inert."""
        raw = b"node\xff\\0.log"
        (tmp_path / os.fsdecode(raw)).write_bytes(DECODE % (1, 0))
        out = tmp_path / "out.jsonl"
        code, _, err = run_cli(["analyze", str(tmp_path), "--format", "jsonl", "-o", str(out)])
        assert code == 0, err
        record = json.loads(out.read_text(encoding="utf-8"))
        assert record["file"] == "node\\xff\\\\0.log" == shown(os.fsdecode(raw))
        restored = record["file"].encode().decode("unicode_escape").encode("latin-1")
        assert restored == raw
        code, text, err = run_cli(["analyze", str(tmp_path), "--format", "text"])
        assert code == 0 and "node\\xff\\\\0.log:1" in text


class TestGlued:
    def test_more_parts_than_the_cap(self, tmp_path: Path) -> None:
        """70,000 glued NCCL headers on one line: at most MAX_PARTS parts, the last holding the
        rest; the parts concatenate to the line; the cut is counted."""
        header = b"g183:161258:166018 [1] NCCL INFO Channel 00/0 : 0[1] -> 1[1] via P2P/IPC"
        line = header * 70_000
        (tmp_path / "glued.log").write_bytes(DECODE % (1, 0) + line + b"\n")
        analysis = analyze([tmp_path])
        parts = analysis.timeline.filter((pl.col("file") == "glued.log") & (pl.col("line") == 2))
        assert parts.height == MAX_PARTS
        assert _lines(analysis, "glued.log")[1] == line.decode()
        assert analysis.tally.notes == {f"lines cut at {MAX_PARTS} parts": 1}

    def test_memory_linear_in_the_line(self, tmp_path: Path) -> None:
        """Two lines of 3,000 glued records each (SGLang, NCCL and torch records, one under a
        CRI wrapper), beside wrapped streams, stay within a small multiple of their size: a
        part never carries a copy of its whole line (run in a fresh process to read its
        peak)."""
        records = [b"[2026-11-29 10:00:%02d DP1 TP3] Load weight begin. avail mem=78.38 GB",
                   b"g183:161258:166018 [1] NCCL INFO Channel %02d/0 : 0[1] -> 1[1] via P2P/IPC",
                   b"[rank5]:[E1129 10:11:%02d.000000000 ProcessGroupNCCL.cpp:1785] Exception"]
        glued = b"".join(records[i % 3] % (i % 60) for i in range(3000))
        (tmp_path / "glued.log").write_bytes(DECODE % (1, 0) + glued + b"\n" + CRI + glued
                                             + b"\n")
        (tmp_path / "ray.log").write_bytes(
            b"(RayWorkerWrapper pid=270291, ip=10.1.1.1) " + DECODE % (1, 0))
        (tmp_path / "loki.log").write_bytes(
            b"1779264164797\t2026-05-20T08:02:44.797Z\t" + DECODE % (2, 1))
        # (VmHWM: this process's own peak; ru_maxrss would count the test runner it forked
        # from, which exec does not reset)
        script = ("import re, sys; from logcorr.api import analyze; "
                  "a = analyze([sys.argv[1]]); n = sum(b.height for b in a.batches()); "
                  "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()); "
                  "print(n, peak.group(1))")
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        rows, peak_kb = map(int, done.stdout.split())
        assert rows == 3 + 2 * 3000
        assert peak_kb < 400_000, peak_kb  # (about 200 MB; a copy per part: over 1.5 GB)


def _packed_lines(count: int) -> bytes:
    return b"".join(DECODE % (i % 60, i % 8) for i in range(count))


class TestContent:
    def test_gzip_damaged_trailer_keeps_every_line(self, tmp_path: Path) -> None:
        """A gzip whose CRC is damaged keeps all its lines and says how many compressed bytes
        were unreadable."""
        body = _packed_lines(3000)
        packed = bytearray(gzip.compress(body))
        packed[-6] ^= 0xFF  # the CRC-32
        (tmp_path / "a.log.gz").write_bytes(bytes(packed))
        analysis = analyze([tmp_path])
        assert _lines(analysis, "a.log.gz") == body.decode().splitlines()
        [warning] = analysis.warnings
        assert "a.log.gz" in warning and "unreadable" in warning

    def test_gzip_damaged_inside_keeps_the_good_prefix(self, tmp_path: Path) -> None:
        """Damage in the middle of the deflate stream: the lines before it are kept (followed
        by what the damaged bytes decoded to before zlib noticed: it cannot tell sooner)."""
        rng = random.Random(7)
        body = b"".join(b"[2025-07-25 07:53:%02d TP%d] seq=%d %016x\n"
                        % (i % 60, i % 8, i, rng.getrandbits(64)) for i in range(20000))
        packed = bytearray(gzip.compress(body, compresslevel=1))
        middle = len(packed) // 2
        packed[middle:middle + 64] = b"\xff" * 64
        with pytest.raises(zlib.error):
            zlib.decompress(bytes(packed), 16 + zlib.MAX_WBITS)
        (tmp_path / "b.log.gz").write_bytes(bytes(packed))
        analysis = analyze([tmp_path])
        kept = _lines(analysis, "b.log.gz")
        good = body.decode().splitlines()
        assert len(kept) > 9000 and kept[:9000] == good[:9000]
        assert "unreadable" in analysis.warnings[0]

    def test_text_named_gz_and_symlink_gz_to_log(self, tmp_path: Path) -> None:
        """gzip is told by its magic bytes: text named `.gz` is text, and a symlink `a.gz` to
        `b.log` is that one file, read once as text."""
        (tmp_path / "plain.gz").write_bytes(DECODE % (1, 0))
        (tmp_path / "b.log").write_bytes(DECODE % (2, 1) + DECODE % (3, 1))
        os.symlink("b.log", tmp_path / "a.gz")
        analysis = analyze([tmp_path])
        assert len(_lines(analysis, "plain.gz")) == 1
        assert len(_lines(analysis, "a.gz")) == 2 and _lines(analysis, "b.log") == []
        assert analysis.warnings == ["b.log: skipped: the same file as a.gz"]
        assert analysis.skipped == []

    @pytest.mark.parametrize("suffix", [".bin", ".db", ".pt", ".parquet", ".pkl", ".so"])
    def test_misleading_suffix_is_read(self, tmp_path: Path, suffix: str) -> None:
        """A text log under a binary-sounding name is read."""
        (tmp_path / f"stdout{suffix}").write_bytes(DECODE % (1, 3))
        analysis = analyze([tmp_path])
        assert analysis.warnings == [] and analysis.timeline["tp_rank"].to_list() == [3]

    def test_skipped_files_are_listed_with_size_and_reason(self, tmp_path: Path) -> None:
        """Files skipped for their content are in the header and the report's coverage."""
        (tmp_path / "node0.log").write_bytes(DECODE % (1, 0))
        (tmp_path / "core.99").write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 993)
        (tmp_path / "model.pt").write_bytes(b"PK\x03\x04" + b"\x00" * 96)
        report = tmp_path / "report.json"
        code, text, err = run_cli(["analyze", str(tmp_path), "--format", "text", "--report",
                                   str(report)])
        assert code == 0, err
        assert "files skipped: 2 (1100 bytes)" in text
        skipped = json.loads(report.read_text())["coverage"]["files_skipped"]
        assert [(s["file"], s["size"]) for s in skipped] == [("core.99", 1000), ("model.pt", 100)]
        assert "ELF" in skipped[0]["reason"] and "zip" in skipped[1]["reason"]

    def test_text_that_starts_like_a_zlib_stream(self, tmp_path: Path) -> None:
        """`x^` (or `x` and a byte that is not UTF-8) at the start of a file or a chunk is
        text: polars' CSV reader would take it for zlib and fail the run."""
        (tmp_path / "a.log").write_bytes(b"x^ marks the spot\nnext\n")
        (tmp_path / "b.log").write_bytes(b"x\xda\x85 raw\n")
        (tmp_path / "c.log").write_bytes(b"(\xb5/\xfd a zstd frame\n")
        analysis = analyze([tmp_path])
        assert _lines(analysis, "a.log") == ["x^ marks the spot", "next"]
        assert _lines(analysis, "b.log") == ["x\u0685 raw"]
        assert [(s.display, "zstd" in s.reason) for s in analysis.skipped] == [("c.log", True)]

    def test_lone_final_carriage_return_is_kept(self, tmp_path: Path) -> None:
        (tmp_path / "a.log").write_bytes(b"one\r\ntwo\r")
        (tmp_path / "b.log").write_bytes(b"one\r")
        analysis = analyze([tmp_path])
        assert _lines(analysis, "a.log") == ["one", "two\r"]
        assert _lines(analysis, "b.log") == ["one\r"]


class TestNulHoles:
    def test_hole_before_tail_after_and_mostly_nul(self, tmp_path: Path) -> None:
        """NUL runs of any length are content of the lines they sit in; the text lines around
        them are parsed and attributed."""
        crash = b"[2025-07-25 07:53:10 TP5] Scheduler hit an exception: RuntimeError: boom\n"
        (tmp_path / "rotated.log").write_bytes(b"\x00" * 300_000 + crash + DECODE % (11, 5))
        (tmp_path / "power.log").write_bytes(DECODE % (12, 6) + b"\x00" * 200_000)
        (tmp_path / "mostly.log").write_bytes(b"\x00" * 1_000_000 + b"\n" + DECODE % (13, 7)
                                              + b"\x00" * 1_000_000)
        analysis = analyze([tmp_path])
        assert analysis.warnings == [] and analysis.skipped == []
        assert _row(analysis, "boom")["tp_rank"] == 5
        assert _row(analysis, "07:53:12 TP6")["tp_rank"] == 6
        assert _row(analysis, "07:53:13 TP7")["tp_rank"] == 7
        assert _lines(analysis, "power.log")[1] == "\x00" * 200_000
        assert len(_lines(analysis, "mostly.log")) == 3
