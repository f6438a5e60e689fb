"""Peak memory on log sets made of one line repeated with new ids: what an incident floods a log
with. The memory a run needs must not grow with them.

    python benchmarks/repeats.py [--lines 3200000] [--data DIR] [--small] [--parquet]

Each set is generated once under DATA/repeats/<lines>/<name>/ from real line shapes:

* transfer    8 decode schedulers, each logging SGLang 0.5's `Decode transfer failed for
              request rank=… decode_req.req.rid='<uuid hex>' decode_req.req.bootstrap_room=<63-bit>
              with exception …` for every request (the prefill peer died): diagnosis event rows;
* torch       4 ranks repeating one c10 warning (`[rank0]:[W1129 10:00:00.123456000
              ProcessGroupNCCL.cpp:4561] Warning: …`): event rows (a torch rank);
* nccl        8 NCCL debug files (`NCCL_DEBUG_SUBSYS=COLL`: an `AllReduce: opCount …` line per
              collective) that print no time at all: rows waiting for a first time;
* tracebacks  an HTTP server logging a traceback for every failed request: exception headers.

For each, `logcorr analyze DIR --format text` (and `--format parquet -o OUT` with --parquet)
is timed and its peak RSS taken as `run.py` does. `--small` makes sets of a few thousand lines
(for the test suite).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import count_lines, measure

DAY = "2026-11-29"


def _clock(index: int, per_second: int) -> str:
    second = index // per_second
    return f"{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"


def transfer(rng: random.Random, lines: int) -> Iterator[tuple[str, Iterator[str]]]:
    def one(tp: int) -> Iterator[str]:
        for i in range(lines // 8):
            yield (f"[{DAY} {_clock(i, 100)} TP{tp}] Decode transfer failed for request "
                   f"rank={tp} decode_req.req.rid='{rng.getrandbits(128):032x}' "
                   f"decode_req.req.bootstrap_room={rng.getrandbits(63)} with exception "
                   "KVTransferError(bootstrap_room=…): Failed to get kvcache from prefill "
                   "instance, it might be dead\n")
    for tp in range(8):
        yield f"decode_tp{tp}.log", one(tp)


def torch(rng: random.Random, lines: int) -> Iterator[tuple[str, Iterator[str]]]:
    def one(rank: int) -> Iterator[str]:
        for i in range(lines // 4):
            yield (f"[rank{rank}]:[W1129 {_clock(i, 200)}.{rng.randrange(10**6):06d}000 "
                   "ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has "
                   "no effect for point-to-point collectives. (function operator())\n")
    for rank in range(4):
        yield f"rank{rank}.log", one(rank)


def nccl(rng: random.Random, lines: int) -> Iterator[tuple[str, Iterator[str]]]:
    def one(rank: int) -> Iterator[str]:
        pid, comm = 4000 + rank, f"0x55d0c0a0{rank:04x}"
        yield (f"node0:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm {comm} rank {rank} "
               f"nranks 8 cudaDev {rank} nvmlDev {rank} busId {rank}8000 commId "
               "0x8a3c1f2e0b7d6a51 - Init COMPLETE\n")
        for i in range(lines // 8 - 1):
            yield (f"node0:{pid}:{pid + 7} [{rank}] NCCL INFO AllReduce: opCount {i:x} sendbuff "
                   f"0x7f{rng.getrandbits(36):09x} recvbuff 0x7f{rng.getrandbits(36):09x} count "
                   f"4096 datatype 7 op 0 root 0 comm {comm} [nranks=8] stream "
                   f"0x55d0c1b2{rank:04x}\n")
    for rank in range(8):
        yield f"nccl.node0.{4000 + rank}.log", one(rank)


def tracebacks(rng: random.Random, lines: int) -> Iterator[tuple[str, Iterator[str]]]:
    def one() -> Iterator[str]:
        for i in range(lines // 5):
            yield (f"[{DAY} {_clock(i, 50)}] Error in request {rng.getrandbits(128):032x}: "
                   "Traceback (most recent call last):\n"
                   '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/'
                   'http_server.py", line 512, in generate_request\n'
                   "    ret = await _global_state.tokenizer_manager.generate_request(obj, "
                   "request).__anext__()\n"
                   '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/'
                   'tokenizer_manager.py", line 431, in generate_request\n'
                   f"ValueError: The input ({rng.randrange(9000, 99999)} tokens) is longer "
                   "than the model's context length (8192 tokens).\n")
    yield "server.log", one()


SETS: dict[str, Callable[[random.Random, int], Iterator[tuple[str, Iterator[str]]]]] = {
    "transfer": transfer, "torch": torch, "nccl": nccl, "tracebacks": tracebacks}


def ensure(folder: Path, name: str, lines: int) -> tuple[int, int]:
    """The set's folder, generated once; (lines, bytes)."""
    done = folder / ".done"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(name)
        for file_name, rows in SETS[name](rng, lines):
            with (folder / file_name).open("w") as out:
                out.writelines(rows)
        done.touch()
    files = [p for p in folder.iterdir() if p.name != ".done"]
    return sum(count_lines(path) for path in files), sum(p.stat().st_size for p in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3_200_000)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "logcorr-bench")
    parser.add_argument("--small", action="store_true", help="a few thousand lines a set")
    parser.add_argument("--parquet", action="store_true", help="also time the parquet export")
    args = parser.parse_args(argv)
    lines = 4000 if args.small else args.lines
    logcorr = [sys.executable, "-m", "logcorr", "analyze"]
    print("| set | output | lines | MB | seconds | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    failed = False
    for name in SETS:
        folder = args.data / "repeats" / str(lines) / name
        count, size = ensure(folder, name, lines)
        outputs = [("text view", [*logcorr, str(folder), "--format", "text"])]
        if args.parquet:
            target = folder.parent / f"{name}.parquet"
            outputs.append(("parquet", [*logcorr, str(folder), "--format", "parquet",
                                        "-o", str(target)]))
        for label, command in outputs:
            run = measure(command)
            failed |= run.code != 0
            print(f"| {name} | {label} | {count:,} | {size / 1e6:,.0f} | {run.seconds:.2f} | "
                  f"{run.peak_rss / 2**20:,.0f} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
