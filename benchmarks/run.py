"""End-to-end benchmark: logcorr vs the floor (`wc -l`) vs the peer (lnav), one table.

    python benchmarks/run.py [--sizes 1M,4M,16M,10M] [--data /work/bench-data] [--repeat N]
                             [--jsonl] [--text] [--stages] [--no-lnav] [--small]
    python benchmarks/run.py --engine ray [--sizes 2M,10M] [--cpus N] [--tasks]
                                                     (ray_engine.py: the Ray engine vs local)

For each size, a 64-rank, 8-node log set (per-node files) is generated once by `gen_large.py`
under DATA/sets/<size>/ and reused. On the same files, in the same run, it times:

* floor   `wc -l` over the files (reading the bytes once);
* lnav    headless indexing with an SGLang format (`benchmarks/lnav/sglang_log.json`):
          `lnav -n -c ';SELECT count(*) FROM sglang_log' FILES`; lnav is installed from
          Debian's packages when absent (`apt-get update`, `apt-get install -y lnav`) unless
          --no-lnav or --small;
* logcorr `logcorr analyze DIR --config ARGS --format parquet -o OUT` (and jsonl with --jsonl,
          the default text view with --text); with --stages, `stages.py` on each set after
          the table (CPU seconds per stage beside polars' floor).

Time is wall-clock of the child process (best of --repeat runs); peak RSS is the child's
`ru_maxrss` from `os.wait4`. logcorr's modules are compiled to bytecode first, as pip does
when it installs the package. `--small` runs one tiny set (for the test suite).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_large

FORMAT_FILE = HERE / "lnav" / "sglang_log.json"
COLUMNS = ("set", "tool", "lines", "MB", "seconds", "lines/s", "MB/s", "peak RSS MB",
           "speed vs lnav", "time vs floor")


@dataclass
class Run:
    """One measured command."""

    seconds: float
    peak_rss: int  # bytes
    code: int


def measure(command: list[str], env: dict[str, str] | None = None) -> Run:
    """Run `command` (output discarded); its wall time and its own peak RSS (GNU time's %M when
    /usr/bin/time exists: a Python parent's own memory would otherwise count after fork)."""
    gnu_time = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile("w+") as report, tempfile.TemporaryFile() as errors:
        wrapped = ([str(gnu_time), "-f", "%M", "-o", report.name, *command]
                   if gnu_time.exists() else command)
        start = time.perf_counter()
        child = subprocess.Popen(wrapped, stdout=subprocess.DEVNULL, stderr=errors, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errors.seek(0)
            text = errors.read().decode(errors="replace")
            sys.stderr.write(f"{command[0]} failed ({code}): {text[-2000:]}\n")
        report.seek(0)
        lines = report.read().split()
        peak_kib = int(lines[-1]) if lines and lines[-1].isdigit() else usage.ru_maxrss
    return Run(seconds, peak_kib * 1024, code)


def best(command: list[str], repeat: int, env: dict[str, str] | None = None) -> Run:
    runs = [measure(command, env) for _ in range(repeat)]
    return min(runs, key=lambda r: r.seconds)


def parse_size(text: str) -> int:
    """`16M` -> 16_000_000, `500k` -> 500_000, `2000` -> 2000."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def ensure_set(data: Path, label: str, lines: int) -> tuple[Path, list[Path], int, int]:
    """The log set of `lines` lines under DATA/sets/LABEL (generated once)."""
    folder = data / "sets" / label
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        gen_large.write_set(folder, lines)
        done.write_text("")
        sys.stderr.write(f"generated {label} in {time.perf_counter() - started:.1f} s\n")
    files = sorted((folder / "logs").glob("*.log"))
    total_lines = sum(count_lines(f) for f in files)
    return folder, files, total_lines, sum(f.stat().st_size for f in files)


def count_lines(path: Path) -> int:
    """The line ends in a file (decompressed when it is gzip, by its name)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        return sum(block.count(b"\n") for block in iter(lambda: stream.read(1 << 24), b""))


def ensure_lnav(install: bool) -> str | None:
    found = shutil.which("lnav")
    if found or not install:
        return found
    sys.stderr.write("lnav not found: apt-get update && apt-get install -y lnav\n")
    subprocess.run(["apt-get", "update"], check=False, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "lnav"], check=False, stdout=subprocess.DEVNULL)
    return shutil.which("lnav")


def lnav_env(lnav: str, data: Path) -> dict[str, str]:
    """A private HOME holding the SGLang format, so the user's lnav config is untouched."""
    home = data / "lnav-home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home))
    subprocess.run([lnav, "-i", str(FORMAT_FILE)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return env


def row(label: str, tool: str, lines: int, size: int, run: Run, lnav: Run | None,
        floor: Run) -> tuple[str, ...]:
    seconds = max(run.seconds, 1e-9)
    return (label, tool, f"{lines:,}", f"{size / 1e6:,.0f}", f"{run.seconds:.2f}",
            f"{lines / seconds:,.0f}", f"{size / 1e6 / seconds:,.1f}",
            f"{run.peak_rss / 1e6:,.0f}",
            f"{lnav.seconds / seconds:.2f}x" if lnav is not None else "-",
            f"{seconds / max(floor.seconds, 1e-9):.0f}x")


def render(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(COLUMNS), rule, *(line(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,4M,16M,10M")
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jsonl", action="store_true", help="also time jsonl output")
    parser.add_argument("--no-lnav", action="store_true")
    parser.add_argument("--small", action="store_true", help="one tiny set, no lnav install")
    parser.add_argument("--stages", action="store_true",
                        help="also print CPU seconds per stage of each set (stages.py)")
    parser.add_argument("--text", action="store_true",
                        help="also time the default view (`--format text` to a file)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help=(
        "ray: the Ray engine against the local one instead (ray_engine.py: time, peak memory "
        "of the driver and the workers, equal output)"))
    args, rest = parser.parse_known_args(argv)
    if args.engine == "ray":
        import ray_engine

        sizes_given = argv is not None and "--sizes" in argv or "--sizes" in sys.argv
        return ray_engine.main([*(["--sizes", args.sizes] if sizes_given else []),
                                "--data", str(args.data), *rest])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    sizes = ["5k"] if args.small else args.sizes.split(",")
    compile_package()
    lnav = None if args.no_lnav else ensure_lnav(install=not args.small)
    env = lnav_env(lnav, args.data) if lnav else None
    rows: list[tuple[str, ...]] = []
    seconds: dict[str, float] = {}
    terminal: list[tuple[str, dict[str, float]]] = []
    for label in sizes:
        folder, files, lines, size = ensure_set(args.data, label, parse_size(label))
        names = [str(f) for f in files]
        floor = best(["wc", "-l", *names], args.repeat)
        peer = (best([lnav, "-n", "-c", ";SELECT count(*) FROM sglang_log", *names],
                     args.repeat, env) if lnav else None)
        rows.append(row(label, "floor (wc -l)", lines, size, floor, peer, floor))
        if peer is not None:
            rows.append(row(label, "lnav", lines, size, peer, peer, floor))
        if args.text:
            out = args.data / f"out-{label}.txt"
            ours = best([sys.executable, "-m", "logcorr", "analyze", str(folder / "logs"),
                         "--config", str(folder / "args.json"), "--format", "text",
                         "-o", str(out)], args.repeat)
            out.unlink(missing_ok=True)
            rows.append(row(label, "logcorr text view", lines, size, ours, peer, floor))
        for fmt in ("parquet", "jsonl") if args.jsonl else ("parquet",):
            out = args.data / f"out-{label}.{fmt}"
            ours = best([sys.executable, "-m", "logcorr", "analyze", str(folder / "logs"),
                         "--config", str(folder / "args.json"), "--format", fmt,
                         "-o", str(out)], args.repeat)
            out.unlink(missing_ok=True)
            rows.append(row(label, f"logcorr {fmt}", lines, size, ours, peer, floor))
            seconds[f"{label} {fmt}"] = ours.seconds
        terminal.append((label, first_output(folder)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"{_memory_gib():.0f} GiB, {platform.platform()}, Python {platform.python_version()}")
    print(render(rows))
    if "16M parquet" in seconds and "4M parquet" in seconds:
        print(f"16M/4M time ratio (parquet): {seconds['16M parquet'] / seconds['4M parquet']:.2f}")
    if args.stages:
        for label in sizes:
            done = subprocess.run([sys.executable, str(HERE / "stages.py"),
                                   str(args.data / "sets" / label)],
                                  capture_output=True, text=True, check=True)
            print(f"\n{label} CPU seconds per stage (stages.py):")
            print(done.stdout.rstrip())
    for label, marks in terminal:
        print(f"{label} rich view: lines parsed at {marks['parsing_done']:.2f} s, analysis done "
              f"at {marks['analysis_done']:.2f} s, first timeline row at {marks['first_row']:.2f} s "
              f"({marks['first_row'] - marks['analysis_done']:.2f} s after the analysis, "
              f"{marks['first_row'] - marks['parsing_done']:.2f} s after parsing), "
              f"{int(marks['rows_rendered'])} rows drawn by {marks['output_done']:.2f} s")
    return 0


def compile_package() -> None:
    """logcorr's modules compiled to bytecode once, as pip does when it installs the package:
    a checkout run where PYTHONDONTWRITEBYTECODE is set would compile them on every run (about
    0.1 s of each)."""
    import logcorr

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(logcorr.__file__).parent)],
                   check=False, stdout=subprocess.DEVNULL)


def first_output(folder: Path) -> dict[str, float]:
    """benchmarks/first_output.py on one set, in its own process."""
    done = subprocess.run([sys.executable, str(HERE / "first_output.py"), str(folder / "logs"),
                           str(folder / "args.json")], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as stream:
            return int(stream.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


if __name__ == "__main__":
    sys.exit(main())
