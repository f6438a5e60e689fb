"""Member lists as ranges (`diagnose/ranges.py`) and the pieces of a hard-wrapped line
(`diagnose/identity.wrapped_line`); their docstrings' examples run here too."""

from __future__ import annotations

import doctest

from logcorr.diagnose import identity, ranges
from logcorr.diagnose.identity import wrapped_line
from logcorr.diagnose.ranges import world_ranks


class TestRanges:
    def test_runs_of_three_or_more_collapse(self) -> None:
        assert ranges.ranges(range(256)) == "0\u2013255"
        assert ranges.ranges([*range(8), *range(9, 16)]) == "0\u20137, 9\u201315"
        assert ranges.ranges([5, 1, 2]) == "1, 2, 5"

    def test_world_ranks_name_replicas_when_they_repeat(self) -> None:
        people = [{"replica": r, "world_rank": w} for r in (0, 1) for w in range(4)]
        assert world_ranks(people) == ("replica 0 world ranks 0\u20133; replica 1 world ranks "
                                       "0\u20133")
        assert world_ranks(people[:1], replicas=True) == "replica 0 world rank 0"
        assert world_ranks([{"world_rank": None}]) == "1 process without a rank"

    def test_docstring_examples(self) -> None:
        for module in (ranges, identity):
            assert doctest.testmod(module).failed == 0


class TestWrappedLine:
    def test_a_line_cut_at_a_fixed_column(self) -> None:
        widths = [70, 80, 80, 80, 23, 64]  # a line before, one cut in four, a line after
        assert [wrapped_line(widths, i) for i in range(6)] == [
            (0, 0), (1, 4), (1, 4), (1, 4), (1, 4), (5, 5)]

    def test_short_lines_are_never_joined(self) -> None:
        assert wrapped_line([20, 20, 5], 1) == (1, 1)
