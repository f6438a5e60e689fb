"""Linear time on any line: every Python-side pattern and parser that meets log text or user
input (the server_args reader, launch commands, the diagnosis's and the trace's patterns,
versions, selectors, the terminal escaper) takes time that grows like the line's length.

Each case feeds one reader lines made of one adversarial unit repeated (an open bracket, a
colour sequence, an unclosed `key=(`, a stamp without its `] `, ...) at 10, 40 and 160 kB, and
fails when the CPU time per byte grows clearly with the length: a quadratic reader takes 4x
longer per byte at each step, a linear one about the same (allowed: 2.5x over the whole range,
which absorbs timer noise on a loaded machine). Polars' patterns are not here: they run in
Rust's regex crate, which has no backtracking. The line core's own per-line work (wrappers
peeled, glued records split, prefixes, stamps, families) is held to it here too, through
`_core.parse_lines`: its patterns cannot backtrack, its hand-written readers could loop.

(Before: a cut-off server_args line with a tail of colour sequences took 17 s at 20 kB, one of
unclosed `key=(` was quadratic, the crash rule's stamp search was quadratic and the trace's
NCCL-init pattern cubic.)
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import regex

from logcorr import _core
from logcorr.config import config_from_text, fields_from_server_args_line
from logcorr.diagnose import context, crash, init, stalled, transfer, watchdog
from logcorr.errors import LogcorrError
from logcorr.output import parse_clock_offsets, parse_time
from logcorr.perfetto import _RAN_FOR, _WORK, _comm_init
from logcorr.render_timeline import inert
from logcorr.selector import parse_selector
from logcorr.versions import parse_version

SIZES = (10_000, 40_000, 160_000)
SLACK = 2.5  # per-byte time may grow this much from 10 to 160 kB (quadratic: 16x)
SLOWEST_CALL = 2.0  # CPU seconds: a call slower than this fails at once (no larger size tried)

SERVER_ARGS = ("[2026-02-27 14:33:04] server_args=ServerArgs(model_path='/m', tp_size=16, "
               "pp_size=1, dp_size=8, nnodes=2, ep_size=1, enable_dp_attention=True, ")
# units of a server_args line's tail: cut-off shapes, colour tails, brackets never closed,
# quotes, escapes, enum reprs, fields by the thousand
REPR_UNITS = ("\x1b[0m", "\x1b[0mx", ", k=(", "k=(x, ", "(k=(", ", k='", '"\\', "k=['a, ",
              "k=[(, ", ",", "(", ")", "]", "'", "\\", ", tp_size=1", ", 'tp_size': 1",
              "<a: 'b'>, ", "k=<", "x", " ", "[[", "]]", "{'a': [", "'\\'")
TEXT_UNITS = ("a", " ", "[", "(", "'", "0", ":", "\x1b[0m", "x=")


def _quiet(reader: Callable[[str], object]) -> Callable[[str], object]:
    """A reader whose refusal (a LogcorrError) is an answer too."""
    def read(text: str) -> object:
        try:
            return reader(text)
        except LogcorrError as error:
            return error
    return read


def _core_line(text: str) -> object:
    return _core.parse_lines([0], [1], [text], [])


# units of a line the core reads: glued records, wrappers, headers, escapes
CORE_UNITS = ('[2026-11-29 10:00:00 TP0] ', '[2026-11-29 10:00:00] x', '[rank1]:[E1129 10:00:00',
              'h:1:2 [0] NCCL INFO ', 'h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 ', '\\x1b[0m',
              '\x1b[0m', '\x1b]0;t\x07', '\r', '[', '(', ':', '\\"', 'DP1 TP2 ',
              'Traceback (most recent call last):', '2026-11-29T10:00:00.000000000Z stdout F ',
              '[PG ID 1 PG GUID 1(tp) Rank 1] ', 'File "a.py", line 1, in f ', ' ', 'x')


def _search(pattern: regex.Pattern[str]) -> Callable[[str], object]:
    return pattern.search


# name -> (reader, the text before the repeated unit, units)
CASES: dict[str, tuple[Callable[[str], object], str, tuple[str, ...]]] = {
    "server_args line": (_quiet(fields_from_server_args_line), SERVER_ARGS, REPR_UNITS),
    "server_args dict line": (_quiet(fields_from_server_args_line),
                              "server_args={'tp_size': 16, ", REPR_UNITS),
    "config file text": (_quiet(lambda t: config_from_text(t, source="x")), "",
                         ("--tp ", "\\\n", "'", "server_args=ServerArgs(", "[", "{\"a\": [")),
    "launch command": (_quiet(lambda t: config_from_text(t, source="x")),
                       "python -m sglang.launch_server ", ("--tp 8 ", "--x ", "\\\n", "# '")),
    "crash: exception header": (_search(crash._SGLANG_STAMP), "",
                                ("[00:00:00", "[2026-01-01 00:00:00", "[00:00:00 ]", *TEXT_UNITS)),
    "crash: NCCL peer": (_search(crash._NCCL_PEER), "",
                         ("from [", "peer a]", "connect to a<", "remote peer a:", "from a<1")),
    "crash: send/recv rank": (_search(crash._PEER_RANK), "",
                              ("waiting for send/recv from rank ",)),
    "crash: exit code": (lambda t: regex.search(r"exited with code (-?\d+)", t), "",
                         ("exited with code -", "exited with code ")),
    "init: store address": (_search(init._STORE_ADDRESS), "",
                            ("to host [", "to host a:1", "trying to connect to (", "a:1")),
    "stalled: heartbeat": (_search(stalled._HEARTBEAT), "",
                           ("for last 1 seconds. tic start time: ", "a.", "tic start time: a. ")),
    "transfer: peer": (_search(transfer._PEER), "",
                       ("connection with prefill instance (bootstrap_addr: ", "a, 1 request")),
    "transfer: server": (_search(transfer._SERVER), "",
                         ("host='", "host='a', port=", "bootstrap_addr: a,", "from a ")),
    "watchdog: timeout": (_search(watchdog._WATCHDOG_TIMEOUT), "", ("watchdog_timeout=", "1.")),
    "py-spy frame": (context._FRAME_NAME.match, "", (" ", "a", "a (", " a")),
    "trace: NCCL init": (_comm_init, "", ("comm 0x1 ", "comm 0x1 rank 0 nranks 2 ", "commId 0x1 ",
                                          "Init STAR")),
    "trace: collective wait": (lambda t: (_RAN_FOR.search(t), _WORK.search(t)), "",
                               ("ran for 1", "SeqNum=1, OpType=", "SeqNum=")),
    "terminal escaping": (inert, "", ("\x1b[0m", "\u202e", "a")),
    "line core: plain line": (_core_line, "", CORE_UNITS),
    "line core: SGLang prefix": (_core_line, "[2026-11-29 10:00:00 DP0 TP0] ", CORE_UNITS),
    "line core: container wrapper": (_core_line, "2026-11-29T10:00:00.1Z stdout F ", CORE_UNITS),
    "line core: Docker JSON": (_core_line, '{"log":"', CORE_UNITS),
    "line core: server_args": (_core_line, SERVER_ARGS, REPR_UNITS),
    "--sglang-version": (_quiet(parse_version), "0.5.1", ("post1", "1", ".1", "rc")),
    "--select": (_quiet(parse_selector), "", ("tp=1,", "DP1 TP", "stream=", " ", "group=tp:")),
    "--clock-offset": (_quiet(lambda t: parse_clock_offsets([t])), "", ("h=1", "=", "1e")),
    "--since": (_quiet(lambda t: parse_time(t, "--since")), "2026-01-01T", ("0", ":", " ")),
}


def _per_byte(reader: Callable[[str], object], text: str) -> float:
    """CPU seconds per byte of one call on `text` (calls repeated for at least 10 ms)."""
    calls, spent = 0, 0.0
    while spent < 0.01:
        began = time.process_time()
        reader(text)
        took = time.process_time() - began
        if took > SLOWEST_CALL:
            pytest.fail(f"{took:.1f} s for one call on {len(text):,} characters")
        calls, spent = calls + 1, spent + took
    return spent / calls / len(text)


def _growth(reader: Callable[[str], object], head: str, unit: str) -> float:
    """How much the time per byte grows from the smallest size to the largest."""
    costs: list[float] = []
    for size in SIZES:
        text = head + unit * (size // len(unit))
        costs.append(_per_byte(reader, text))
        if costs[-1] > SLACK * costs[0] * 1.5:  # (already far off: no larger size)
            break
    return max(costs) / costs[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_time_grows_with_the_length(name: str) -> None:
    reader, head, units = CASES[name]
    gc.disable()
    try:
        growth = {unit: _growth(reader, head, unit) for unit in units}
    finally:
        gc.enable()
    worst = max(growth, key=lambda unit: growth[unit])
    if growth[worst] > SLACK:  # (measured again: another process's burst is not a trend)
        gc.disable()
        try:
            growth[worst] = min(growth[worst], _growth(reader, head, worst))
        finally:
            gc.enable()
    assert growth[worst] <= SLACK, (
        f"{name}: per-byte time grows {growth[worst]:.1f}x from {SIZES[0]:,} to {SIZES[-1]:,} "
        f"characters of {head[:20]!r} + {worst!r}...")


MEGABYTE_CHECK = """
import sys, time
from logcorr.config import fields_from_server_args_line
from logcorr.errors import LogcorrError
head, units = sys.argv[1], sys.argv[2:]
for unit in units:
    line = head + unit * (1_000_000 // len(unit))
    began = time.process_time()
    try:
        fields_from_server_args_line(line)
    except LogcorrError:
        pass
    print(f"{time.process_time() - began:.3f}", flush=True)
"""


def test_megabyte_server_args_line_is_read_or_refused_fast() -> None:
    """A 1 MB server_args line of the shapes that once took minutes (a colour tail, unclosed
    `key=(`, brackets, quotes, separators) is read or refused in well under a second (in a
    child process, so that a reader that backtracks fails by a timeout instead of hanging)."""
    units = ["\x1b[0mx", ", k=(", "k=[(, ", "(", ", k='", ",", ", tp_size=1"]
    done = subprocess.run([sys.executable, "-c", MEGABYTE_CHECK, SERVER_ARGS, *units],
                          capture_output=True, text=True, timeout=60, check=True)
    seconds = [float(line) for line in done.stdout.split()]
    assert len(seconds) == len(units) and max(seconds) < 0.5, list(zip(units, seconds))
