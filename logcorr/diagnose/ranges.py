"""Member lists as ranges, the way every view shows them (the JSON report keeps full lists)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DASH = "\u2013"  # an en dash: `0–255`


def ranges(values: Iterable[int]) -> str:
    """Sorted distinct integers as runs: three or more in a row as `first–last`, shorter runs
    one by one.

    >>> ranges(range(256))
    '0–255'
    >>> ranges([9, 0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15])
    '0–7, 9–15'
    >>> ranges([2, 3, 6])
    '2, 3, 6'
    >>> ranges([])
    ''
    """
    runs: list[list[int]] = []
    for value in sorted(set(values)):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    parts = []
    for run in runs:
        parts += [f"{run[0]}{DASH}{run[-1]}"] if len(run) >= 3 else [str(v) for v in run]
    return ", ".join(parts)


def world_ranks(people: Iterable[dict[str, Any]], replicas: bool = False) -> str:
    """`world rank 5`, `world ranks 0–7, 9–15`, or with native-DP replicas (where world ranks
    repeat: `replicas`, or processes of a replica other than 0) `replica 0 world ranks 0–3;
    replica 1 world rank 2`. Processes without a world rank are counted: `2 processes without
    a rank`.

    >>> world_ranks([{"replica": 0, "world_rank": r} for r in (0, 1, 2, 3, 9)])
    'world ranks 0–3, 9'
    >>> world_ranks([{"replica": 0, "world_rank": 1}, {"replica": 1, "world_rank": 2}])
    'replica 0 world rank 1; replica 1 world rank 2'
    """
    by_replica: dict[int, set[int]] = {}
    unranked = 0
    for person in people:
        if person.get("world_rank") is None:
            unranked += 1
            continue
        by_replica.setdefault(int(person.get("replica") or 0), set()).add(
            int(person["world_rank"]))
    several = replicas or len(by_replica) > 1 or any(r != 0 for r in by_replica)
    parts = [(f"replica {replica} " if several else "")
             + ("world rank " if len(ranks) == 1 else "world ranks ") + ranges(ranks)
             for replica, ranks in sorted(by_replica.items())]
    if unranked:
        parts.append(f"{unranked} process{'es' if unranked > 1 else ''} without a rank")
    return "; ".join(parts)
