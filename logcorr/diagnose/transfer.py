"""`disagg-transfer`: PD disaggregation lost its peer or KV transfers failed.

Reads: lost-connection lines, transfer / handshake failures, unreachable bootstrap servers,
Mooncake RDMA errors. Cannot decide: which process of the lost peer instance failed (its logs
are the other instance's): the reporting processes are listed as waiting."""

from __future__ import annotations

import polars as pl
import regex

from logcorr.diagnose.context import (
    BOOTSTRAP_STEMS,
    PEER_STEMS,
    RDMA_STEMS,
    TRANSFER_STEMS,
    Context,
    Finding,
    _contains_any,
    _span,
    lines_in,
)

# (an address holds no bracket: a line of many unclosed `(bootstrap_addr: ` is read in linear
# time)
_PEER = regex.compile(r"connection with (prefill|decode) instance \(bootstrap_addr: ([^()]*)\)"
                      r"(?:, (\d+) requests? affected)?")


def transfer_findings(ctx: Context) -> list[Finding]:
    """PD disaggregation: the peer instance was lost, or KV transfers failed. The processes
    that report it are on the side that survived: listed as waiting, not as culprits."""
    lost = ctx.events.filter(_contains_any(PEER_STEMS)).sort("order")
    failed = ctx.events.filter(_contains_any(TRANSFER_STEMS)).sort("order")
    unreachable = ctx.events.filter(_contains_any(BOOTSTRAP_STEMS)).sort("order")
    if lost.height == 0 and failed.height == 0 and unreachable.height == 0:
        return []
    peers: dict[tuple[str, str], int] = {}
    for text, repeats in lost.select("text", "_n").iter_rows():
        found = _PEER.search(str(text))
        if found:
            key = (found.group(1), found.group(2))
            peers[key] = peers.get(key, 0) + int(found.group(3) or 0) * repeats
    parts = [f"lost the {side} instance at {addr}" + (f" ({n} requests affected)" if n else "")
             for (side, addr), n in peers.items()]
    if failed.height:
        parts.append(f"{lines_in(failed)} KV transfer(s) failed")
    if unreachable.height:
        servers = sorted({_bootstrap_server(str(t)) for t in unreachable["text"].to_list()}
                         - {""})
        parts.append("could not reach the prefill instance's bootstrap server"
                     + (f" ({', '.join(servers)})" if servers else ""))
    rdma = ctx.events.filter(_contains_any(RDMA_STEMS))
    if rdma.height:
        parts.append(f"Mooncake reported {lines_in(rdma)} RDMA error line(s) (failed slices, NICs "
                     "marked inactive)")
    both = pl.concat([lost, failed, unreachable, rdma]).sort("order")
    first_ts, last_ts = _span(both.get_column("ts_full"))
    return [Finding("disagg-transfer", "warning",
                    "PD disaggregation: " + "; ".join(parts or ["the peer instance was lost"]),
                    first_ts=first_ts, last_ts=last_ts, evidence=ctx.cite(both),
                    waiting=ctx.who(both.get_column("proc").drop_nulls().to_list()))]


_SERVER = regex.compile(r"host='([^']+)', port=(\d+)|bootstrap_addr: (\S+?),?\s|from (\S+) after ")


def _bootstrap_server(text: str) -> str:
    """`host:port` of the bootstrap server a line failed to reach, when it says."""
    found = _SERVER.search(text + " ")
    if not found:
        return ""
    host, port, addr, other = found.groups()
    return f"{host}:{port}" if host else (addr or other or "")
