"""Files and folders: every odd input has a defined outcome and the run continues.

Outcomes: processed (its lines are in the timeline), or skipped with exactly one warning that
names the file and says why. A path given on the command line that does not exist is a usage
error (exit 2, one `logcorr: error:` line naming it).
"""

from __future__ import annotations

import errno
import gzip
import os
import zlib
from pathlib import Path

import pytest
from test_robustness import run_cli

from logcorr import _core
from logcorr.api import Analysis, analyze
from logcorr.ingest import discover, read_lines

LOG = b"[2026-11-29 10:00:00 TP0] Scheduler hello\n[2026-11-29 10:00:01 TP1] Scheduler bye\n"


def _logs(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node0.log").write_bytes(LOG)
    return logs


def _warned(analysis: Analysis, name: str) -> str:
    """The one warning about `name` (one line, naming it first); fails if not exactly one."""
    about = [w for w in analysis.warnings if w.startswith(f"{name}: ")]
    assert len(about) == 1, analysis.warnings
    assert "\n" not in about[0]
    return about[0]


def _texts(analysis: Analysis, name: str) -> list[str]:
    return analysis.timeline.filter(analysis.timeline["file"] == name)["text"].to_list()


class TestFiles:
    def test_empty_file(self, tmp_path: Path) -> None:
        """An empty file is processed: no lines, no warning."""
        logs = _logs(tmp_path)
        (logs / "empty.log").write_bytes(b"")
        analysis = analyze([logs])
        assert analysis.warnings == []
        assert _texts(analysis, "empty.log") == []
        assert analysis.timeline.height == 2

    def test_one_line_of_50_mb(self, tmp_path: Path) -> None:
        """A 50 MB line without a newline is one record holding the whole line."""
        logs = _logs(tmp_path)
        line = "[2026-11-29 10:00:02 TP0] " + "x" * (50 * 1024 * 1024)
        (logs / "huge.log").write_text(line)
        analysis = analyze([logs])
        assert analysis.warnings == []
        assert _texts(analysis, "huge.log") == [line]

    @pytest.mark.parametrize("name", ["crash_dump.pt", "state.pkl"])
    def test_binary_dump_beside_logs(self, tmp_path: Path, name: str) -> None:
        """A .pt/.pkl crash dump (a pickle) is skipped by its content with one warning, never
        parsed."""
        logs = _logs(tmp_path)
        (logs / name).write_bytes(b"\x80\x04\x95 [2026-11-29 10:00:00 TP5] fake\n" * 100)
        analysis = analyze([logs])
        assert "binary" in _warned(analysis, name)
        assert _texts(analysis, name) == []
        assert analysis.timeline.height == 2

    def test_binary_content_without_suffix(self, tmp_path: Path) -> None:
        """A core dump with no telling suffix is skipped by its first bytes (ELF); bytes that
        name no format are read line for line (a log damaged past recognition is still a
        log)."""
        logs = _logs(tmp_path)
        (logs / "core.12345").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 64)
        (logs / "noise").write_bytes(bytes(range(256)) * 64)
        analysis = analyze([logs])
        assert "binary file: ELF" in _warned(analysis, "core.12345")
        assert len(_texts(analysis, "noise")) == 65
        assert [s.display for s in analysis.skipped] == ["core.12345"]

    def test_truncated_gzip(self, tmp_path: Path) -> None:
        """A gzip cut short keeps the lines that decoded and warns once."""
        logs = _logs(tmp_path)
        body = b"".join(b"[2026-11-29 10:00:%02d TP0] line %d\n" % (i % 60, i) for i in range(5000))
        packed = gzip.compress(body)
        (logs / "cut.log.gz").write_bytes(packed[: len(packed) // 2])
        analysis = analyze([logs])
        assert "gzip" in _warned(analysis, "cut.log.gz")
        kept = _texts(analysis, "cut.log.gz")
        assert 0 < len(kept) < 5000
        assert "\n".join(kept) == body.decode()[: len("\n".join(kept))]

    def test_corrupt_gzip(self, tmp_path: Path) -> None:
        """A gzip with garbage after its header is skipped-with-warning; the run continues."""
        logs = _logs(tmp_path)
        (logs / "bad.log.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\xde\xad\xbe\xef" * 100)
        analysis = analyze([logs])
        assert "gzip" in _warned(analysis, "bad.log.gz")
        assert analysis.timeline.height == 2

    def test_plain_text_named_gz(self, tmp_path: Path) -> None:
        """Plain text under a .gz name is read as text: gzip is told by its magic bytes."""
        logs = _logs(tmp_path)
        (logs / "plain.log.gz").write_bytes(LOG)
        analysis = analyze([logs])
        assert analysis.warnings == []
        assert _texts(analysis, "plain.log.gz") == LOG.decode().splitlines()

    def test_gzip_members_and_empty_gz(self, tmp_path: Path) -> None:
        """Concatenated gzip members are all read; an empty .gz file has no lines."""
        logs = _logs(tmp_path)
        (logs / "multi.log.gz").write_bytes(gzip.compress(b"a\n") + gzip.compress(b"b\n"))
        (logs / "empty.log.gz").write_bytes(b"")
        analysis = analyze([logs])
        assert analysis.warnings == []
        assert _texts(analysis, "multi.log.gz") == ["a", "b"]

    def test_gzip_trailing_garbage(self, tmp_path: Path) -> None:
        """Garbage after a complete member: the member's lines are kept, one warning."""
        logs = _logs(tmp_path)
        (logs / "tail.log.gz").write_bytes(gzip.compress(b"a\nb\n") + b"\x1f\x8bgarbage")
        analysis = analyze([logs])
        assert _texts(analysis, "tail.log.gz") == ["a", "b"]
        assert "gzip" in _warned(analysis, "tail.log.gz")

    def test_fifo_is_not_read(self, tmp_path: Path) -> None:
        """A named pipe in the folder is skipped (reading it would block forever)."""
        logs = _logs(tmp_path)
        os.mkfifo(logs / "pipe")
        analysis = analyze([logs])
        assert "not a regular file" in _warned(analysis, "pipe")


class TestPermissions:
    @pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file; see the monkeypatched tests")
    def test_chmod_000(self, tmp_path: Path) -> None:
        """A file without read permission is skipped with a warning saying so."""
        logs = _logs(tmp_path)
        (logs / "secret.log").write_bytes(LOG)
        (logs / "secret.log").chmod(0)
        assert "permission denied" in _warned(analyze([logs]), "secret.log")

    def test_unreadable_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Opening the file fails with EACCES: skipped with one warning saying how to fix it."""
        logs = _logs(tmp_path)
        secret = logs / "secret.log"
        secret.write_bytes(LOG)
        real_sniff = _core.sniff

        def deny(path: bytes, size: int) -> object:  # (the tests run as root: chmod denies nothing)
            if path == os.fsencode(secret):
                raise PermissionError(errno.EACCES, "Permission denied", str(secret))
            return real_sniff(path, size)

        monkeypatch.setattr(_core, "sniff", deny)
        analysis = analyze([logs])
        assert "permission denied" in _warned(analysis, "secret.log")
        assert analysis.timeline.height == 2

    def test_unreadable_folder(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Listing a subfolder fails with EACCES: it is skipped with one warning."""
        logs = _logs(tmp_path)
        (logs / "locked").mkdir()
        (logs / "locked" / "x.log").write_bytes(LOG)
        real_scandir = os.scandir

        def deny(path: object) -> object:
            if Path(str(path)) == logs / "locked":
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_scandir(path)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "scandir", deny)
        analysis = analyze([logs])
        assert "permission denied" in _warned(analysis, "locked")
        assert analysis.timeline.height == 2

    def test_read_fails_after_discovery(self, tmp_path: Path) -> None:
        """A file that vanishes between discovery and reading: one warning, the rest is read."""
        logs = _logs(tmp_path)
        (logs / "gone.log").write_bytes(LOG)
        sources, _ = discover([logs])
        (logs / "gone.log").unlink()
        frame, warnings = read_lines(sources)
        assert frame.height == 2
        assert len(warnings) == 1 and warnings[0].startswith("gone.log: read failed")


class TestSymlinks:
    def test_folder_loop(self, tmp_path: Path) -> None:
        """A symlink back to an ancestor folder is not followed twice."""
        logs = _logs(tmp_path)
        (logs / "sub").mkdir()
        (logs / "sub" / "up").symlink_to(logs, target_is_directory=True)
        analysis = analyze([logs])
        assert "symlink loop" in _warned(analysis, "sub/up")
        assert analysis.timeline.height == 2

    def test_self_loop_file(self, tmp_path: Path) -> None:
        """A symlink that points at itself is skipped with one warning."""
        logs = _logs(tmp_path)
        (logs / "self.log").symlink_to(logs / "self.log")
        analysis = analyze([logs])
        assert "loop" in _warned(analysis, "self.log")

    def test_loop_given_as_argument(self, tmp_path: Path) -> None:
        """A symlink loop named on the command line: skipped with one warning, exit 0."""
        logs = _logs(tmp_path)
        loop = tmp_path / "loop.log"
        loop.symlink_to(loop)
        analysis = analyze([logs, loop])
        assert "loop" in _warned(analysis, str(loop))
        assert analysis.timeline.height == 2

    def test_broken_symlink(self, tmp_path: Path) -> None:
        """A dangling symlink inside a folder is skipped with one warning."""
        logs = _logs(tmp_path)
        (logs / "dangling.log").symlink_to(tmp_path / "nowhere")
        assert "broken symlink" in _warned(analyze([logs]), "dangling.log")


class TestPaths:
    def test_missing_path(self, tmp_path: Path) -> None:
        """A command-line path that does not exist: exit 2, one error line naming it."""
        missing = tmp_path / "no-such-dir"
        code, _, err = run_cli(["analyze", str(_logs(tmp_path)), str(missing), "--format", "text"])
        assert code == 2
        assert err.count("logcorr: error:") == 1 and str(missing) in err
        assert "Traceback" not in err

    def test_ten_thousand_small_files(self, tmp_path: Path) -> None:
        """10,000 one-line files in one folder are all read, in name order, without warnings."""
        logs = tmp_path / "logs"
        logs.mkdir()
        for i in range(10_000):
            (logs / f"rank{i:05d}.log").write_bytes(b"[2026-11-29 10:00:00 TP%d] up\n" % (i % 8))
        analysis = analyze([logs])
        assert analysis.warnings == []
        assert analysis.timeline.height == 10_000
        assert [s.display for s in analysis.sources][:2] == ["rank00000.log", "rank00001.log"]

    def test_warnings_reach_stderr_in_machine_formats(self, tmp_path: Path) -> None:
        """A skipped file is named on stderr when the output is a machine format."""
        logs = _logs(tmp_path)
        (logs / "crash_dump.pt").write_bytes(b"\x80\x04" * 100)
        code, _, err = run_cli(["analyze", str(logs), "--format", "jsonl",
                                "-o", str(tmp_path / "out.jsonl")])
        assert code == 0
        assert sum("crash_dump.pt" in line for line in err.splitlines()) == 1


def test_zlib_is_what_gzip_uses() -> None:
    """Sanity: the corrupt-gzip inputs above really fail to decode."""
    with pytest.raises(zlib.error):
        zlib.decompress(b"\x1f\x8b\x08\x00" + b"\xde\xad\xbe\xef" * 100, 16 + zlib.MAX_WBITS)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_output_to_a_pipe_is_written_in_place(tmp_path: Path, fmt: str) -> None:
    """`-o` naming a pipe or a device (`-o /dev/null`) writes into it: a temporary file renamed
    onto it would replace the pipe (as root, /dev/null itself) with a plain file."""
    import threading

    fixture = Path(__file__).parent.parent / "fixtures" / "analyze" / "tp8-crash-per-node"
    pipe = tmp_path / "out.pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    code, _, err = run_cli(["analyze", str(fixture / "logs"), "--config",
                            str(fixture / "args.json"), "--format", fmt, "-o", str(pipe)])
    reader.join(timeout=60)
    assert code == 0, err
    assert pipe.is_fifo()
    assert received and received[0]
    assert [p.name for p in tmp_path.iterdir()] == ["out.pipe"]  # (no temporary file left)
    plain = tmp_path / f"out.{fmt}"
    code, _, err = run_cli(["analyze", str(fixture / "logs"), "--config",
                            str(fixture / "args.json"), "--format", fmt, "-o", str(plain)])
    assert code == 0, err
    assert received[0] == plain.read_bytes()  # (the same bytes as into a file)
