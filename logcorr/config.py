"""Launch arguments -> `LaunchConfig`.

Three spellings of the same facts are accepted:

* a JSON object with SGLang ServerArgs field names (a full dump of resolved server args works
  as is: unknown keys are ignored), or a JSON array of launch-command tokens;
* a launch command (`python -m sglang.launch_server --tp 16 --dp 8 --enable-dp-attention ...`),
  with SGLang's flag spellings and aliases;
* a log line or log file holding SGLang's `server_args=ServerArgs(...)` (<= 0.5.18) or
  `server_args={...}` (0.5.19+) line. Values may hold enum reprs such as `<Backend.FULL: 'full'>`
  that `ast.literal_eval` rejects, so fields are read one by one.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import regex

from logcorr.errors import ConfigError, quoted
from logcorr.versions import DEFAULT_VERSION, SglangVersion, parse_version

# The most scheduler processes a layout logcorr builds may have (replicas x tp x pp); a wider
# one is refused before anything is built (docs/config.md).
MAX_PROCESSES = 65536
# The largest GPU id: a CUDA device index is a C int.
MAX_GPU_ID = 2**31 - 1

# ServerArgs fields that shape the topology, with their types and SGLang's defaults.
_INT_FIELDS: dict[str, int] = {
    "tp_size": 1,
    "pp_size": 1,
    "dp_size": 1,
    "attn_dp_size": 1,
    "ep_size": 1,
    "attn_cp_size": 1,
    "moe_dp_size": 1,
    "dcp_size": 1,
    "nnodes": 1,
    "base_gpu_id": 0,
    "gpu_id_step": 1,
    "dwdp_size": 1,
}
_BOOL_FIELDS = ("enable_dp_attention", "enable_ep_moe", "enable_deepep_moe", "enable_dp_lm_head",
                "enable_tp_lm_head_all_to_all", "enable_two_batch_overlap", "enable_layernorm_sp",
                "enable_waterfill")
_STR_FIELDS = ("moe_a2a_backend", "device", "dist_init_addr", "deepep_v2_mode")
_OPTIONAL_INT_FIELDS = ("node_rank", "moe_dense_tp_size")
# The values each whole-number field may take. SGLang refuses widths below 1, a negative
# base_gpu_id and a gpu_id_step below 1 (validation_hook.py `check_server_args`); no width and
# no node can exceed the process count of a layout logcorr builds, and a GPU id is a C int.
INT_RANGES: dict[str, tuple[int, int]] = {
    **{name: (1, MAX_PROCESSES) for name in _INT_FIELDS},
    "node_rank": (0, MAX_PROCESSES - 1),
    "moe_dense_tp_size": (1, MAX_PROCESSES),
    "base_gpu_id": (0, MAX_GPU_ID),
    "gpu_id_step": (1, MAX_GPU_ID),
}
_FLOAT_FIELDS = ("watchdog_timeout", "dist_timeout")

# Command-line spellings (SGLang's primary flag is the field name with dashes; these are its
# aliases plus the abbreviations argparse accepts and people type).
_FLAG_ALIASES: dict[str, str] = {
    "--tp": "tp_size",
    "--tensor-parallel-size": "tp_size",
    "--dp": "dp_size",
    "--data-parallel-size": "dp_size",
    "--pp": "pp_size",
    "--pipeline-parallel-size": "pp_size",
    "--ep": "ep_size",
    "--expert-parallel-size": "ep_size",
    "--attention-data-parallel-size": "attn_dp_size",
    "--attention-context-parallel-size": "attn_cp_size",
    "--moe-data-parallel-size": "moe_dp_size",
    "--decode-context-parallel-size": "dcp_size",
    "--nccl-init-addr": "dist_init_addr",
}


@dataclass(frozen=True)
class LaunchConfig:
    """The launch arguments that decide an SGLang deployment's processes and groups.

    Field names and defaults are SGLang's ServerArgs ones. `node_rank` is None when the
    configuration describes the whole deployment rather than one node's launch.
    """

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    attn_dp_size: int = 1
    enable_dp_attention: bool = False
    ep_size: int = 1
    moe_a2a_backend: str | None = None
    enable_ep_moe: bool = False
    enable_deepep_moe: bool = False
    attn_cp_size: int = 1
    moe_dp_size: int = 1
    dcp_size: int = 1
    nnodes: int = 1
    node_rank: int | None = None
    base_gpu_id: int = 0
    gpu_id_step: int = 1
    dwdp_size: int = 1  # 0.5.17+: DWDP, which SGLang turns into attention DP and EP (see below)
    moe_dense_tp_size: int | None = None
    device: str | None = None
    dist_init_addr: str | None = None
    watchdog_timeout: float | None = None
    dist_timeout: float | None = None
    enable_dp_lm_head: bool = False  # only checked: it needs attention DP when DP is on
    # Only checked (SGLang refuses them with some layouts; see topology._feature_problems):
    enable_tp_lm_head_all_to_all: bool = False
    enable_two_batch_overlap: bool = False
    enable_layernorm_sp: bool = False
    enable_waterfill: bool = False  # moves moe_a2a_backend to deepep
    deepep_v2_mode: str | None = None  # SGLang's default is "direct" (one node, NVLink)
    sglang_version: SglangVersion = field(default_factory=lambda: DEFAULT_VERSION)
    source: str = "defaults"  # where the values came from, for messages

    def __post_init__(self) -> None:
        """No LaunchConfig holds a value outside INT_RANGES, however it was made: what is
        built from one (rank arithmetic, the process table's 32-bit columns) never sees one."""
        for name, (lowest, highest) in INT_RANGES.items():
            value = getattr(self, name)
            if value is not None and not lowest <= value <= highest:
                raise ConfigError(f"{self.source}: {range_problem(name, value)}")

    @property
    def is_npu(self) -> bool:
        return (self.device or "").lower() == "npu"


def range_problem(name: str, value: int, text: str | None = None) -> str:
    """Why `value` (written `text`) cannot be launch field `name`, and what it may be: one
    rule for every spelling of the launch args.

    >>> range_problem("base_gpu_id", 2**31)
    'base_gpu_id must be at most 2,147,483,647, the largest GPU id (a CUDA device index is a C int); got 2147483648'
    """
    lowest, highest = INT_RANGES[name]
    shown = quoted(value if text is None else text)
    if value < lowest:
        return (f"{name} must be at least 1, got {shown}" if lowest == 1
                else f"{name} must be non-negative, got {shown}")
    what = ("the largest GPU id (a CUDA device index is a C int)" if highest == MAX_GPU_ID
            else f"the most scheduler processes logcorr builds a layout of ({MAX_PROCESSES:,})")
    return f"{name} must be at most {highest:,}, {what}; got {shown}"


def config_from_fields(
    values: dict[str, Any], *, source: str, sglang_version: str | None = None
) -> LaunchConfig:
    """Build a LaunchConfig from ServerArgs-named values; unknown keys are ignored.

    >>> config_from_fields({"tp_size": 8, "model_path": "x"}, source="test").tp_size
    8
    """
    kwargs: dict[str, Any] = {}
    for name in _INT_FIELDS:
        if values.get(name) is not None:
            kwargs[name] = _as_int(values[name], name, source)
    for name in _OPTIONAL_INT_FIELDS:
        if values.get(name) is not None:
            kwargs[name] = _as_int(values[name], name, source)
    for name in _BOOL_FIELDS:
        if values.get(name) is not None:
            kwargs[name] = _as_bool(values[name], name, source)
    for name in _STR_FIELDS:
        if values.get(name) is not None:
            kwargs[name] = str(values[name])
    for name in _FLOAT_FIELDS:
        if values.get(name) is not None:
            kwargs[name] = _as_float(values[name], name, source)
    version_text = sglang_version if sglang_version is not None else values.get("sglang_version")
    version = parse_version(str(version_text)) if version_text is not None else DEFAULT_VERSION
    return LaunchConfig(**_with_dwdp(kwargs, version), sglang_version=version, source=source)


def _with_dwdp(kwargs: dict[str, Any], version: SglangVersion) -> dict[str, Any]:
    """SGLang 0.5.17+ rewrites `--dwdp-size N` (N == tp_size, pp 1) into attention DP of N
    with EP N, moe_dp 1 and no all-to-all backend (`_handle_dwdp`); the raw args say only
    dwdp. A resolved `server_args=` line already holds the rewritten values. Other values
    are left for `check_config` to refuse with SGLang's message."""
    dwdp = kwargs.get("dwdp_size", 1)
    if (dwdp <= 1 or not version.has_dwdp or dwdp != kwargs.get("tp_size", 1)
            or kwargs.get("pp_size", 1) != 1):
        return kwargs
    return {**kwargs, "enable_dp_attention": True, "dp_size": dwdp, "attn_dp_size": 1,
            "ep_size": dwdp, "moe_dp_size": 1, "moe_a2a_backend": "none"}


def _as_int(value: Any, name: str, source: str) -> int:
    """A whole number from JSON, a command line or a repr; anything else is a ConfigError.
    (Its range is LaunchConfig's to check; a run of digits too long to be in any range is
    refused here, before Python's int() refuses it with a ValueError.)"""
    problem = ConfigError(f"{source}: {name} must be a whole number, got {quoted(value)}")
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise problem
    if isinstance(value, int):
        return value
    if isinstance(value, str) and len(value) > _LONGEST_NUMBER and _DIGITS.fullmatch(value):
        past = -(10**_LONGEST_NUMBER) if value.strip().startswith("-") else 10**_LONGEST_NUMBER
        raise ConfigError(f"{source}: {range_problem(name, past, value.strip())}")
    try:
        number = float(value)
    except ValueError:
        raise problem from None
    if not math.isfinite(number) or number != int(number):
        raise problem
    return int(number)


def _as_float(value: Any, name: str, source: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} must be a number of seconds, got {quoted(value)}") from None


def _as_bool(value: Any, name: str, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "none", ""):
        return False
    raise ConfigError(f"{source}: {name} must be true or false, got {quoted(value)}")


# --------------------------------------------------------------------------- launch commands


def fields_from_command(tokens: list[str]) -> dict[str, Any]:
    """Read ServerArgs values from launch-command tokens (SGLang's flags and aliases).

    >>> fields_from_command(["python", "-m", "sglang.launch_server", "--tp", "16", "--dp=8",
    ...                      "--enable-dp-attention"])
    {'tp_size': '16', 'dp_size': '8', 'enable_dp_attention': True}
    """
    known = set(_INT_FIELDS) | set(_OPTIONAL_INT_FIELDS) | set(_STR_FIELDS) | set(_FLOAT_FIELDS)
    values: dict[str, Any] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("--"):
            continue
        flag, has_value, inline = token.partition("=")
        name = _FLAG_ALIASES.get(flag, flag[2:].replace("-", "_"))
        if name in _BOOL_FIELDS:
            values[name] = _as_bool(inline, name, "command") if has_value else True
        elif name in known:
            if has_value:
                values[name] = inline
            elif index < len(tokens) and not tokens[index].startswith("--"):
                values[name] = tokens[index]
                index += 1
            else:
                raise ConfigError(f"launch command: {quoted(flag)} needs a value (e.g. "
                                  f"{flag[:40]} 8)")
    return values


def split_command(text: str) -> list[str]:
    """Split a shell launch command (with `\\` continuations and comments) into tokens."""
    joined = _CONTINUATION.sub(" ", text)
    try:
        return shlex.split(joined, comments=True)
    except ValueError as error:
        raise ConfigError(f"cannot read the launch command: {error}; check its quoting") from None


# --------------------------------------------------------------------------- server_args line

_CONTINUATION = regex.compile(r"\\\r?\n")  # a shell line continuation
_ENUM = regex.compile(r"<[\w.]+:\s*'([^']*)'>")
_SERVER_ARGS = regex.compile(r"server_args=(?:ServerArgs\(|\{)")
# The repr is read in one pass over its tokens (strings, brackets, separators), so reading a
# line takes time linear in its length whatever it holds: a string left open by a cut runs to
# the end of the line, a field's value is the text up to the next separator at the top, and
# the `[` of a colour sequence (`\x1b[0m`) opens nothing. SGLang's line has a few thousand
# tokens (about 500 fields, a few lists); a line of more than MAX_REPR_TOKENS is refused
# rather than read, which bounds the time one line can take (about 0.1 s a line).
MAX_REPR_TOKENS = 100_000
_KEY = r"""(?:(?P<key>\w++)=|'(?P<key>\w++)'\s*+:|"(?P<key>\w++)"\s*+:)"""
_FIRST_KEY = regex.compile(r"\s*+" + _KEY)
_REPR_TOKEN = regex.compile(
    r"""'(?:[^'\\]++|\\.?)*+(?:'|\Z)|"(?:[^"\\]++|\\.?)*+(?:"|\Z)|[({)\]}]|(?<!\x1b)\["""
    r"|,\s*+(?:" + _KEY + ")?",
    regex.DOTALL,
)
_WANTED = frozenset((*_INT_FIELDS, *_OPTIONAL_INT_FIELDS, *_BOOL_FIELDS, *_STR_FIELDS,
                     *_FLOAT_FIELDS))


def fields_from_server_args_line(line: str) -> dict[str, Any]:
    """Read topology fields from a `server_args=ServerArgs(...)` or `server_args={...}` line.

    >>> fields_from_server_args_line(
    ...   "[2026-02-27 14:33:04] server_args=ServerArgs(model_path='/m', tp_size=16, "
    ...   "attention_backend=<Backend.FA3: 'fa3'>, dp_size=8, enable_dp_attention=True, node_rank=1)")
    {'tp_size': 16, 'dp_size': 8, 'enable_dp_attention': True, 'node_rank': 1}
    """
    found = _SERVER_ARGS.search(line)
    if found is None:
        raise ConfigError("no server_args= line found")
    texts, closed_by = _top_level_fields(line, found.end())
    values = {name: _python_literal(text.strip()) for name, text in texts.items()}
    missing = [name for name in _LAYOUT_FIELDS if name not in values]
    if missing and closed_by != (")" if found.group().endswith("(") else "}"):
        raise ConfigError(f"the server_args line is cut off before {', '.join(missing)} (SGLang "
                          "prints every field, so the rest would only be guessed as defaults); "
                          "pass the launch args with --config")
    return values


def _top_level_fields(line: str, start: int) -> tuple[dict[str, str], str]:
    """The wanted fields at the top level of the repr that opens just before `start` (name ->
    the text of its first value), and the bracket that closes the repr ("" when the line ends
    first: it was cut off). Brackets nest whatever their kind, as in the reprs SGLang prints;
    a `]` at the top level is text.

    >>> _top_level_fields("tp_size=2, cuda_graph_bs=[1, 2], pp_size=(1, 'x)'), dp_size=4", 0)
    ({'tp_size': '2', 'pp_size': "(1, 'x)')", 'dp_size': '4'}, '')
    """
    texts: dict[str, str] = {}
    first = _FIRST_KEY.match(line, start)
    name, begin = (first.group("key"), first.end()) if first else (None, start)
    depth = 0
    for count, token in enumerate(_REPR_TOKEN.finditer(line, begin)):
        if count == MAX_REPR_TOKENS:
            raise ConfigError(f"the server_args line holds more than {MAX_REPR_TOKENS:,} "
                              "strings, brackets and commas, far more than SGLang prints; "
                              "pass the launch args with --config")
        char = line[token.start()]
        if char in "([{":
            depth += 1
        elif char in ")}]":
            if depth:
                depth -= 1
            elif char != "]":
                _keep(texts, name, line, begin, token.start())
                return texts, char
        elif char == "," and not depth:
            _keep(texts, name, line, begin, token.start())
            name, begin = token.group("key"), token.end()
    _keep(texts, name, line, begin, len(line))
    return texts, ""


def _keep(texts: dict[str, str], name: str | None, line: str, begin: int, end: int) -> None:
    if name in _WANTED and name not in texts:
        texts[name] = line[begin:end]


# A cut-off server_args line (a terminal or viewer cut it: `… quantiza>`) is read only when it
# still holds these; the fields after a cut are unknown, not SGLang's defaults.
_LAYOUT_FIELDS = ("tp_size", "pp_size", "dp_size", "nnodes", "ep_size", "enable_dp_attention")


def _python_literal(text: str) -> Any:
    """A scalar Python repr -> value (`'deepep'`, `16`, `True`, `None`); anything else as text."""
    if text in ("None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    enum_value = _ENUM.fullmatch(text)
    if enum_value:
        return enum_value.group(1)
    if len(text) > _LONGEST_NUMBER:  # (no launch value: _as_int names the field)
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------- files


def load_config(
    path: str | Path, *, sglang_version: str | None = None, validate: bool = True
) -> LaunchConfig:
    """Read a launch configuration file in any accepted spelling and check it like SGLang does."""
    from logcorr.topology import check_config  # topology owns the rules

    config = read_config(path, sglang_version=sglang_version)
    if validate:
        check_config(config)
    return config


def read_config(path: str | Path, *, sglang_version: str | None = None) -> LaunchConfig:
    """Read a launch configuration file without validating the layout."""
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file {name} does not exist; pass the path of args.json, "
                          "a launch command file, or a log holding a server_args= line") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {name}: {error.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    return config_from_text(text, source=name, sglang_version=sglang_version)


def config_from_text(
    text: str, *, source: str, sglang_version: str | None = None
) -> LaunchConfig:
    """Decide which spelling `text` is in and read it."""
    stripped = text.strip()
    if not stripped:
        raise ConfigError(f"{source} is empty; it should hold launch args (JSON, a launch "
                          "command, or a server_args= log line)")
    if stripped[0] in "[{" and not _SERVER_ARGS.search(stripped[:200]):
        values = _json_values(stripped, source)
    elif _SERVER_ARGS.search(text):
        values = fields_from_server_args_line(_first_server_args_line(text))
    elif "--" in text:
        values = fields_from_command(split_command(text))
    else:
        raise ConfigError(f"{source}: not a launch configuration; expected a JSON object of "
                          "ServerArgs fields, a launch command with --tp-size etc., or a log "
                          "line with server_args=")
    return config_from_fields(values, source=source, sglang_version=sglang_version)


def _json_values(text: str, source: str) -> dict[str, Any]:
    try:
        data = json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise ConfigError(f"{source}: JSON nested too deeply to be launch args") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{source} is not valid JSON (line {error.lineno}, column "
                          f"{error.colno}: {error.msg}); fix the file or pass a launch "
                          "command instead") from None
    if isinstance(data, list):
        if not all(isinstance(token, str) for token in data):
            raise ConfigError(f"{source}: a JSON array must hold launch-command tokens (strings)")
        return fields_from_command(data)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object of ServerArgs fields")
    nested = data.get("server_args")
    if isinstance(nested, dict):
        return {**nested, **{k: v for k, v in data.items() if k == "sglang_version"}}
    return data


def _json_int(digits: str) -> int | str:
    """A JSON integer; one too long to be any launch value stays text, for _as_int to refuse
    by name (Python's int() refuses more than 4,300 digits with a ValueError)."""
    return int(digits) if len(digits) <= _LONGEST_NUMBER else digits


# Digits enough for any launch value and then some; a longer number is out of every range.
_LONGEST_NUMBER = 40
_DIGITS = regex.compile(r"\s*+[+-]?+\d++\s*+")


def _first_server_args_line(text: str) -> str:
    found = _SERVER_ARGS.search(text)
    if found is None:  # callers check first
        raise ConfigError("no server_args= line found")
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start : end if end >= 0 else len(text)]


def with_overrides(config: LaunchConfig, **changes: Any) -> LaunchConfig:
    """A copy of `config` with some fields replaced (e.g. the node_rank of one log file)."""
    allowed = {f.name for f in fields(LaunchConfig)}
    return replace(config, **{k: v for k, v in changes.items() if k in allowed})
