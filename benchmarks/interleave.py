"""Shared output streams: N processes of one node abort at once into one file, with the true
writer of every line.

Each process writes records of real shapes (log-formats.md). A logging record - an SGLang line
with its logged traceback or py-spy dump, a torch c10 line with its C++ frames, an NCCL or Gloo
line - is one write, so its lines stay together. What a dying process writes to stderr line by
line - a traceback from `sys.excepthook`, a faulthandler dump, a C++ `terminate called …` abort,
a bare py-spy dump - is one write per line. The writes of all processes are interleaved at
random into one file.

    python benchmarks/interleave.py OUT_DIR [--files N] [--seed S]

writes OUT_DIR/logs/sharedK.log, OUT_DIR/args.json and OUT_DIR/truth.jsonl (one record per
physical line: {"file", "line", "replica", "world_rank"}, nulls for a line no scheduler wrote).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

TP = 8  # one node, one TP8 instance: world rank = tp rank = gpu
CONFIG = {"tp_size": TP}
PID0 = 3415995

Write = list[str]  # lines written at once


@dataclass
class Process:
    rank: int
    writes: list[Write]

    @property
    def pid(self) -> int:
        return PID0 + 7 * self.rank


def _stamp(second: int) -> str:
    return f"2026-11-29 10:05:{second:02d}"


def _c10(second: int, rank: int) -> str:
    return f"E1129 10:05:{second:02d}.{123456789 + rank}"


def _frames(rng: random.Random, style: str) -> list[str]:
    """A few stack frames: `tb` (traceback, with code lines), `fh` (faulthandler)."""
    names = ["run_scheduler_process", "event_loop_overlap", "run_batch", "forward",
             "all_reduce", "dispatch", "wait"]
    out = []
    for _ in range(rng.randint(1, 4)):
        name = rng.choice(names)
        line = rng.randint(10, 3000)
        if style == "tb":
            out.append(f'  File "/sgl/python/sglang/srt/managers/scheduler.py", line {line}, '
                       f"in {name}")
            out.append(f"    self.{name}()")
        else:
            out.append(f'  File "/sgl/python/sglang/srt/managers/scheduler.py", line {line} in '
                       f"{name}")
    return out


_ERRORS = [
    ("RuntimeError: CUDA error: an illegal memory access was encountered",
     [("CUDA kernel errors might be asynchronously reported at some other API call, so the "
      "stacktrace below might be incorrect."),
      "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"]),
    (("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
     "ProcessGroupNCCL.cpp:2027, remote process exited or there was a network error, NCCL "
     "version 2.21.5"), [("ncclRemoteError: A call failed possibly due to a network error or a "
                        "remote process exiting prematurely.")]),
    ("KeyboardInterrupt", []),
    ("ValueError: boom", []),
]


def _exception(rng: random.Random) -> list[str]:
    line, tail = rng.choice(_ERRORS)
    return [line, *tail[:rng.randint(0, len(tail))]]


def _traceback(rng: random.Random) -> list[str]:
    lines = ["Traceback (most recent call last):", *_frames(rng, "tb"), *_exception(rng)]
    if rng.random() < 0.3:  # a chained exception
        lines += ["", "During handling of the above exception, another exception occurred:",
                  "", "Traceback (most recent call last):", *_frames(rng, "tb"),
                  *_exception(rng)]
    return lines


def _what(rank: int) -> str:
    return (f"[PG ID 2 PG GUID 3(tp:device) Rank {rank}] Process group watchdog thread "
            "terminated with exception: CUDA error: an illegal memory access was encountered")


def _cpp_frames(rng: random.Random) -> list[str]:
    return [("Exception raised from c10_cuda_check_implementation at ../c10/cuda/"
            "CUDAException.cpp:43 (most recent call first):"),
            *(f"frame #{n}: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 "
              f"(0x7f3b6d41{n:04x} in /usr/local/lib/python3.10/dist-packages/torch/lib/"
              "libc10.so)" for n in range(rng.randint(1, 3)))]


def _pyspy(rng: random.Random, p: Process) -> list[str]:
    return [f"Process {p.pid}: sglang::scheduler_TP{p.rank}",
            "Python v3.12.3 (/usr/bin/python3.12)", "",
            f'Thread {p.pid} (idle): "MainThread"',
            *(f"    {name} (sglang/srt/managers/scheduler.py:{rng.randint(10, 3000)})"
              for name in rng.sample(["all_reduce", "event_loop_overlap", "run_batch",
                                      "forward", "wait"], rng.randint(1, 3)))]


def records(rng: random.Random, p: Process, second: int) -> list[Write]:
    """The writes of one process around an incident, in its own order."""
    r, s = p.rank, second
    prefix = f"[{_stamp(s)} TP{r}]"
    menu = [
        lambda: [[(f"{prefix} Decode batch, #running-req: {rng.randint(1, 64)}, #token: "
                  f"{rng.randint(100, 9000)}, token usage: 0.0{r}, #queue-req: 0")]],
        lambda: [[f"{prefix} Scheduler hit an exception: Traceback (most recent call last):",
                  *_traceback(rng)[1:]]],
        lambda: [[line] for line in _traceback(rng)],
        lambda: [[line] for line in [
            "Fatal Python error: Aborted", "",
            *(f"{kind} 0x00007f3b6d4{r}{t:03x} (most recent call first):"
              for t, kind in [(1, "Thread")]), *_frames(rng, "fh"), "",
            f"Current thread 0x00007f3b6d4{r}e700 (most recent call first):",
            *_frames(rng, "fh"), "",
            "Extension modules: numpy.core._multiarray_umath, torch._C (total: 80)"]],
        lambda: [[f"[rank{r}]:[{_c10(s, r)} ProcessGroupNCCL.cpp:1595] {_what(r)}",
                  *_cpp_frames(rng)]],
        lambda: [[line] for line in [
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  {_what(r)}", *_cpp_frames(rng)]],
        # (SGLang logs py-spy's output with its last newline: the record ends with a blank line)
        lambda: [[f"{prefix} Pyspy dump for PID {p.pid}:", *_pyspy(rng, p), ""]],
        lambda: [[line] for line in _pyspy(rng, p)],
        lambda: [[(f"[Gloo] Rank {r} is connected to {TP - 1} peer ranks. Expected number of "
                  f"connected peer ranks is : {TP - 1}")]],
        lambda: [[(f"gpu-node-0:{p.pid}:{p.pid} [{r}] NCCL INFO comm 0x55d4a8c0{r:02x} rank {r} "
                  f"nranks {TP} cudaDev {r} nvmlDev {r} busId {r + 1}8000 commId "
                  "0x6f1d9b1c2e3a4b5c - Init COMPLETE")]],
        lambda: [[(f"[rank{r}]:[W{_c10(s, r)[1:]} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 "
                  f"Rank {r}]  using GPU {r} to perform barrier as devices used by this process "
                  "are currently unknown.")]],
    ]
    writes: list[Write] = []
    for _ in range(rng.randint(1, 4)):
        writes += rng.choice(menu)()
    return writes


def shared_file(rng: random.Random) -> tuple[list[str], list[int]]:
    """One file several processes write at once: its lines and each line's true world rank."""
    chosen = rng.sample(range(TP), rng.randint(2, 4))
    second = rng.randint(0, 2)
    procs = [Process(r, records(rng, Process(r, []), second)) for r in chosen]
    lines: list[str] = []
    truth: list[int] = []
    while any(p.writes for p in procs):
        p = rng.choice([p for p in procs if p.writes])
        write = p.writes.pop(0)
        lines += write
        truth += [p.rank] * len(write)
    return lines, truth


def write_set(out: Path, files: int, seed: int) -> list[tuple[str, int, int]]:
    """Write `files` shared files under OUT/logs, args.json and truth.jsonl; return the truth
    rows (file, line, world rank)."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(CONFIG))
    rows = []
    for index in range(files):
        rng = random.Random(seed * 100_003 + index)
        lines, truth = shared_file(rng)
        name = f"shared{index:05d}.log"
        (logs / name).write_text("".join(line + "\n" for line in lines))
        rows += [(name, n, rank) for n, rank in enumerate(truth, start=1)]
    with open(out / "truth.jsonl", "w") as stream:
        for name, n, rank in rows:
            stream.write(json.dumps({"file": name, "line": n, "replica": 0,
                                     "world_rank": rank}) + "\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_set(args.out, args.files, args.seed)


if __name__ == "__main__":
    main()
