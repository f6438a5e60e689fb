"""Coordinate selectors: `tp=10`, `world=5,replica=1`, `DP5 TP10`, `group=moe_ep:2`, `role=main`,
`stream=pod/sglang-0` (the rest of the selector: a stream name may hold spaces and commas).

Used by `topology --rank` and `analyze --select`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from logcorr.errors import InputError
from logcorr.topology import PREFIX_TOKENS

# Selector key -> Process attribute (or timeline column).
KEYS: dict[str, str] = {
    "node": "node_rank", "node_rank": "node_rank",
    "replica": "replica",
    "dp": "dp_rank", "dp_rank": "dp_rank",
    "pp": "pp_rank", "pp_rank": "pp_rank",
    "tp": "tp_rank", "tp_rank": "tp_rank",
    "world": "world_rank", "world_rank": "world_rank", "rank": "world_rank",
    "gpu": "gpu_id", "gpu_id": "gpu_id",
    "attn_dp": "attn_dp_rank", "attn_dp_rank": "attn_dp_rank",
    "attn_cp": "attn_cp_rank", "attn_cp_rank": "attn_cp_rank",
    "attn_tp": "attn_tp_rank", "attn_tp_rank": "attn_tp_rank",
    "moe_dp": "moe_dp_rank", "moe_dp_rank": "moe_dp_rank",
    "ep": "moe_ep_rank", "moe_ep": "moe_ep_rank", "moe_ep_rank": "moe_ep_rank",
    "moe_tp": "moe_tp_rank", "moe_tp_rank": "moe_tp_rank",
    "pid": "pid",
}
_SEPARATORS = regex.compile(r"[,\s]+")
_TOKEN = regex.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")


@dataclass(frozen=True)
class Selector:
    """A parsed selector: attribute equalities, prefix tokens, an optional group, a role."""

    values: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    group: tuple[str, int] | None = None  # (group name, world rank whose instance is meant)
    role: str | None = None
    stream: str | None = None  # lines whose `stream` holds this text

    def criteria(self) -> dict[str, int]:
        """Attribute and prefix-token criteria for `Topology.select`."""
        return {**self.values, **self.tokens}


def parse_selector(spec: str) -> Selector:
    """Parse a selector; raise InputError saying the accepted forms when it is malformed.

    >>> parse_selector("world=5,replica=1")
    Selector(values={'world_rank': 5, 'replica': 1}, tokens={}, group=None, role=None, stream=None)
    >>> parse_selector("DP5 TP10").tokens
    {'DP': 5, 'TP': 10}
    >>> parse_selector("group=moe_ep:2").group
    ('moe_ep', 2)
    >>> parse_selector("role=main stream=WorkerDict pid=859188, ip=10.0.0.1").stream
    'WorkerDict pid=859188, ip=10.0.0.1'
    """
    stream: str | None = None
    found = regex.search(r"(?:^|[,\s])stream=", spec, flags=regex.IGNORECASE)
    if found:
        stream = spec[found.end():].strip()
        if not stream:
            raise InputError(f"cannot read {spec!r}: write stream=TEXT last, e.g. "
                             "stream=pod/sglang-0 or stream=WorkerDict pid=859188")
        spec = spec[:found.start()]
    values: dict[str, int] = {}
    tokens: dict[str, int] = {}
    group: tuple[str, int] | None = None
    role: str | None = None
    for item in _SEPARATORS.split(spec.strip()):
        if not item:
            continue
        token = _TOKEN.fullmatch(item)
        key, sep, value = item.partition("=")
        if token:
            tokens[token.group(1)] = int(token.group(2))
        elif sep and key.lower() == "group":
            group = _parse_group(value, spec)
        elif sep and key.lower() == "role":
            role = value
        elif sep and key.lower() in KEYS and value.isdigit():
            values[KEYS[key.lower()]] = int(value)
        else:
            raise InputError(_usage(spec, item))
    if not (values or tokens or group or role or stream):
        raise InputError(_usage(spec, spec))
    return Selector(values, tokens, group, role, stream)


def _parse_group(value: str, spec: str) -> tuple[str, int]:
    name, _, rank = value.partition(":")
    if not name or not rank.isdigit():
        raise InputError(f"cannot read {spec!r}: write group=NAME:WORLD_RANK, e.g. group=moe_ep:2 "
                         "(all members of the moe_ep group instance holding world rank 2)")
    return name, int(rank)


def _usage(spec: str, item: str) -> str:
    keys = ", ".join(sorted({k for k in KEYS if not k.endswith("_rank")}))
    tokens = ", ".join(f"{t}<n>" for t in PREFIX_TOKENS)
    return (f"cannot read {item!r} in selector {spec!r}: use KEY=N with KEY one of {keys}; "
            f"prefix tokens like {tokens}; group=NAME:WORLD_RANK; role=NAME; or, last, "
            "stream=TEXT")
