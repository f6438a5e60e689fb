"""The default view and the parquet export of one set, plain and under each common wrapper.

    python benchmarks/wrapped.py [--size 2M] [--data DIR] [--repeat N] [--parquet] [--only NAME,...]

Logs are mostly read as a collector or a launcher left them: every line behind a container
runtime's stamp (CRI files under /var/log/pods, `kubectl logs --timestamps`), kubectl's
`--prefix`, a docker compose service, an srun task label, a Ray actor, torchrun's `--tee` label
(`[default3]:`), or in Docker's json-file envelope
(`{"log":"…\\n","stream":"stdout","time":"…"}`). This makes a copy of run.py's set
(DATA/sets/SIZE, generated when absent) under each of those wrappers (DATA/sets/SIZE-WRAPPER,
made once) and times `logcorr analyze` on each in the same run, beside lnav on the plain set
(`--only`: the plain set and the wrappers named). Times are the best of `--repeat` runs; compare
rows within one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run

# (each line of node N behind the wrapper: `{n}` the node, `{pid}` its process, `{m}`, `{s}`, `{us}` a time)
WRAPPERS = {
    "cri": "2026-11-29T10:{m:02d}:{s:02d}.{us:06d}Z stdout F ",
    "kubectl-prefix": "[pod/sglang-{n}/sglang] ",
    "compose": "sglang-{n}  | ",
    "srun": "{n}: ",
    "ray": "(SchedulerActor pid={pid}, ip=10.0.0.{n}) ",
    "docker": "{json}",
    "torchrun": "[default{n}]:",
}


def wrapped_set(plain: Path, name: str, shape: str) -> Path:
    """A copy of the set at `plain` with every line behind `shape` (made once)."""
    folder = plain.parent / f"{plain.name}-{name}"
    done = folder / ".complete"
    if done.exists():
        return folder
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    (folder / "args.json").write_bytes((plain / "args.json").read_bytes())
    for source in sorted((plain / "logs").glob("*.log")):
        n = int("".join(c for c in source.stem if c.isdigit()) or 0)
        with source.open("rb") as lines, (folder / "logs" / source.name).open("wb") as out:
            for i, line in enumerate(lines):
                if shape == "{json}":
                    log = json.dumps(line.decode(errors="replace"), ensure_ascii=False)
                    stamp = f"2026-11-29T10:{(i // 60_000) % 60:02d}:{(i // 1000) % 60:02d}Z"
                    out.write(f'{{"log":{log},"stream":"stdout","time":"{stamp}"}}\n'.encode())
                    continue
                prefix = shape.format(n=n, pid=4000 + n, m=(i // 60_000) % 60,
                                      s=(i // 1000) % 60, us=i % 1_000_000)
                out.write(prefix.encode() + line)
    done.write_text("")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="2M")
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--parquet", action="store_true", help="also time the parquet export")
    parser.add_argument("--only", help="these wrappers (comma-separated names) beside the plain set")
    args = parser.parse_args()
    plain, files, lines, size = run.ensure_set(args.data, args.size, run.parse_size(args.size))
    lnav = run.ensure_lnav(install=True)
    rows = []
    if lnav:
        names = [str(f) for f in files]
        peer = run.best([lnav, "-n", "-c", ";SELECT count(*) FROM sglang_log", *names],
                        args.repeat, run.lnav_env(lnav, args.data))
        rows.append(("plain", "lnav", f"{peer.seconds:.2f}", "1.00x", f"{peer.peak_rss >> 20}"))
    else:
        peer = None
    only = set(args.only.split(",")) if args.only else set(WRAPPERS)
    if only - set(WRAPPERS):
        parser.error(f"--only: no wrapper named {', '.join(sorted(only - set(WRAPPERS)))}; "
                     f"choose from {', '.join(WRAPPERS)}")
    sets = {"plain": plain} | {name: wrapped_set(plain, name, shape)
                               for name, shape in WRAPPERS.items() if name in only}
    formats = [("text view", [])]
    if args.parquet:
        formats.append(("parquet", ["--format", "parquet", "-o", str(args.data / "wrapped.parquet")]))
    for name, folder in sets.items():
        for label, extra in formats:
            command = [sys.executable, "-m", "logcorr", "analyze", str(folder / "logs"),
                       "--config", str(folder / "args.json"), *extra]
            took = run.best(command, args.repeat)
            ratio = f"{took.seconds / peer.seconds:.2f}x" if peer else "-"
            rows.append((name, f"logcorr {label}", f"{took.seconds:.2f}", ratio,
                         f"{took.peak_rss >> 20}"))
    print(f"{args.size}: {lines:,} lines, {size / 1e6:,.0f} MB plain")
    print("| set | tool | seconds | time vs lnav (plain) | peak RSS MB |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
