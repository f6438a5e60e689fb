"""SGLang versions and the rules that changed between them.

Each rule is read from SGLang's released source (see ../shared/docs/sglang-topology.md §1, §4, §5,
§8 and tools/README-sglang-truth.md); the boundaries are the first release with the new behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from logcorr.errors import ConfigError, quoted

# Oldest and newest releases whose behaviour logcorr encodes.
OLDEST = (0, 1, 18)
NEWEST = (0, 5, 23)

_LONGEST_VERSION = 40
_VERSION = regex.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.\-+]?(?:post|rc|dev)\d*)*")


@dataclass(frozen=True, order=True)
class SglangVersion:
    """A released SGLang version, compared by (major, minor, patch); `.postN` is the same rules."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def at_least(self, major: int, minor: int, patch: int) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)

    # ---- rules -------------------------------------------------------------------------------

    @property
    def prefix_order(self) -> tuple[str, ...]:
        """Order of the rank tokens in the scheduler log prefix."""
        if self.at_least(0, 5, 9):
            return ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")
        if self.at_least(0, 5, 6):
            return ("DP", "PP", "TP", "EP")
        if self.at_least(0, 4, 10):
            return ("DP", "TP", "EP", "PP")
        if self.at_least(0, 4, 7):
            return ("DP", "TP", "PP")
        return ("DP", "TP")

    @property
    def tp_token_always(self) -> bool:
        """0.3.4-0.4.6 print `TP0` even for a TP1 scheduler; older and newer omit it."""
        return not self.at_least(0, 4, 7)

    @property
    def has_attn_cp_and_moe_dp(self) -> bool:
        return self.at_least(0, 5, 9)

    @property
    def moe_dp_aliases_attn_cp(self) -> bool:
        """From 0.5.11 the moe_dp group is the attn_cp group when attn_cp > moe_dp (the
        design doc said 0.5.15; SGLang's parallel_state has the branch from 0.5.11)."""
        return self.at_least(0, 5, 11)

    @property
    def moe_dp_needs_equal_attn_cp(self) -> bool:
        """From 0.5.11 SGLang refuses attn_cp_size != moe_dp_size unless moe_dp_size == 1."""
        return self.at_least(0, 5, 11)

    @property
    def has_dcp(self) -> bool:
        """`--dcp-size` (decode context parallel) and its group exist from 0.5.15."""
        return self.at_least(0, 5, 15)

    @property
    def has_dwdp(self) -> bool:
        """`--dwdp-size` (rewritten into attention DP + EP) exists from 0.5.17."""
        return self.at_least(0, 5, 17)

    @property
    def moe_dense_tp_may_be_tp(self) -> bool:
        """moe_dense_tp_size may be tp_size (not only 1) - seen in 0.5.14; 0.5.9 and older
        allow only 1 (0.5.10-0.5.13 unchecked: allowed, so nothing SGLang accepts is refused)."""
        return self.at_least(0, 5, 10)

    @property
    def has_self_pp(self) -> bool:
        """From 0.5.19 every rank also builds `self_pp`: one single-rank group per rank (for the
        one-layer draft), after `pp`."""
        return self.at_least(0, 5, 19)

    @property
    def has_moe_groups(self) -> bool:
        """moe_ep / moe_tp groups exist from 0.4.10."""
        return self.at_least(0, 4, 10)

    @property
    def moe_groups_alias_tp(self) -> bool:
        """From 0.5.2 moe_ep (ep == tp) and moe_tp (moe_tp == tp) reuse the tp group."""
        return self.at_least(0, 5, 2)

    @property
    def attention_tp_in_parallel_state(self) -> bool:
        """From 0.5.9 attention_tp is built with the other groups and is the tp group when
        attn_tp == tp; before, dp_attention always built a group of its own."""
        return self.at_least(0, 5, 9)

    @property
    def moe_dp_rank_from_attn_cp(self) -> bool:
        """From 0.5.21 a process's moe_dp_rank is its attn_cp_rank when attn_cp > moe_dp."""
        return self.at_least(0, 5, 21)

    @property
    def npu_standalone_moe_ep(self) -> bool:
        """From 0.5.16 NPU builds a separate moe_ep group even when ep == tp."""
        return self.at_least(0, 5, 16)

    @property
    def replicas_with_attn_dp_rejected(self) -> bool:
        """0.5.22+ rejects native-DP replicas combined with attention DP."""
        return self.at_least(0, 5, 22)

    @property
    def has_pipeline_parallel(self) -> bool:
        return self.at_least(0, 4, 7)

    @property
    def enable_ep_moe_flags(self) -> bool:
        """Up to 0.5.1, `--enable-ep-moe` / `--enable-deepep-moe` set ep_size = tp_size."""
        return not self.at_least(0, 5, 2)

    def replica_gpu_stride(self, tp: int, pp: int, gpu_id_step: int) -> int:
        """GPUs skipped per native-DP replica on one node."""
        if self.at_least(0, 5, 2):
            return tp * pp * gpu_id_step
        if self.at_least(0, 4, 4):
            return tp * gpu_id_step
        return tp


DEFAULT_VERSION = SglangVersion(*NEWEST)


def parse_version(text: str) -> SglangVersion:
    """Parse `0.5.23`, `v0.5.10.post1` or `0.4.9`; refuse versions logcorr does not know.

    >>> parse_version("0.5.10.post1")
    SglangVersion(major=0, minor=5, patch=10)
    """
    # (a version is short: a longer text is not read, so no text costs more than that)
    match = _VERSION.fullmatch(text.strip()) if len(text) <= _LONGEST_VERSION else None
    if match is None:
        raise ConfigError(f"unknown SGLang version {quoted(text)}; give it as X.Y.Z, e.g. 0.5.23")
    numbers = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    if not OLDEST <= numbers <= NEWEST:
        raise ConfigError(
            f"SGLang version {text} is outside what logcorr knows "
            f"({'.'.join(map(str, OLDEST))} to {'.'.join(map(str, NEWEST))}); pass "
            f"--sglang-version {'.'.join(map(str, NEWEST))} to use the newest rules"
        )
    return SglangVersion(*numbers)
