"""One incident, one verdict: the role of every error finding the rules return.

Each error finding is an observation with a role: the **root** of an incident (its verdict),
a **consequence** of a root (folded into the root's `consequences`, never reported as a
verdict), or **independent** (a second incident, whose summary says why it is separate).
What decides is time and topology:

- a collective hang whose culprits crashed before it: a consequence of the crash (the others
  waited for a dead process);
- SGLang's watchdog on members of a hung group: a consequence of the hang (the same members
  waiting);
- SGLang's watchdog after a crash, on processes of the crashed one's replica (they share its
  world group: its TP group, the other PP stages, EP and attention-DP ranks), within ten
  minutes and one and a half watchdog timeouts of it: a consequence of the crash (they waited
  for it);
- a crash of processes of a hang's incident (or of victims in its replica that blame a peer),
  after it, within ten minutes of its last timeout: a consequence of the hang (members failing
  once it timed out);
- aborts and exit codes after a group's timeout (`teardown`): consequences of the hang (or of
  the root it was folded into) they follow;
- the SIGQUIT / kill cascade: a consequence of the root it follows;
- a crash before any timeout: a root;
- anything else: independent (another group, another time window, or no line ties it to the
  root).

Where the order of two observations cannot be told (stamps within `clock.order_window` of
each other: whole seconds, clock skew), the later-looking one stays a consequence and the
root's summary says the order is undecided, rather than promote it to a second verdict.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from logcorr.diagnose.consequences import COLUMNS, records
from logcorr.diagnose.context import (
    CASCADE_STEMS,
    Context,
    Finding,
    _contains_any,
)
from logcorr.diagnose.identity import name_rows
from logcorr.diagnose.ranges import ranges, world_ranks
from logcorr.diagnose.watchdog import stated_timeout

Key = tuple[Any, Any]
_HANGS = ("collective-hang", "watchdog-timeout")
# what the processes a folded finding adds to its root's waiting did
_WAITED = {"watchdog-timeout": "waited for it until SGLang's watchdog fired",
           "collective-hang": "timed out waiting for it in a collective",
           "crash": "failed after it", "init-hang": "waited for it in a startup phase"}
_SEPARATE_AFTER = timedelta(minutes=10)


def one_verdict(ctx: Context, findings: list[Finding], teardown: pl.DataFrame,
                window: timedelta) -> list[Finding]:
    """`findings` with every consequence folded into its root (see the list above), the
    roles set, and each root's `consequences` built; the consequences are left out."""
    errors = [f for f in findings if f.severity == "error"]
    fold = _Fold(ctx, window)
    fold.link(errors)
    roots = sorted((f for f in errors if f not in fold), key=_time_key)
    fold.assign(roots, teardown, "abort", prefer=_HANGS)
    fold.assign(roots, name_rows(ctx, ctx.events.filter(_contains_any(CASCADE_STEMS))),
                "kill-cascade")
    for number, root in enumerate(roots):
        root.role = "root" if number == 0 else "independent"
        root.summary += fold.notes(root)
        if number:
            root.summary += f"; separate from the {roots[0].kind} above: " + _why_separate(
                ctx, root, roots[0])
        root.consequences = records(ctx, root.followed)
    return [f for f in findings if f not in fold]


class _Fold:
    """Which finding follows from which, the notes each root's summary gains, and the
    timeline position each finding starts at."""

    def __init__(self, ctx: Context, window: timedelta) -> None:
        self.ctx, self.window = ctx, window
        self.parent: dict[int, Finding] = {}
        self.said: dict[int, list[str]] = {}

    def __contains__(self, finding: object) -> bool:
        return id(finding) in self.parent

    def root_of(self, finding: Finding) -> Finding:
        while id(finding) in self.parent:
            finding = self.parent[id(finding)]
        return finding

    def attach(self, child: Finding, root: Finding, undecided: bool = False) -> None:
        """Fold `child` (and what followed from it) into `root`'s incident."""
        root = self.root_of(root)
        self.parent[id(child)] = root
        root.followed.append((child.kind, _rows_of(self.ctx, child)))
        root.followed.extend(child.followed)
        added = _merge_people(root.waiting, child.processes + child.waiting, root.processes)
        _merge_people(root.unknown, child.unknown, root.processes + root.waiting)
        if added:
            self.said.setdefault(id(root), []).append(
                f"then {len(added)} process(es) {_WAITED[child.kind]} ({world_ranks(added)})")
        if undecided:
            self.said.setdefault(id(root), []).append(
                f"whether the {child.kind} ({child.first_ts}) came after it cannot be told "
                f"from the stamps (within {self.window.total_seconds():g} s: whole seconds, "
                "clock skew): taken as its consequence")

    def link(self, errors: list[Finding]) -> None:
        """Apply the rules of the list above, in order."""
        hangs = [f for f in errors if f.kind == "collective-hang"]
        crashes = [f for f in errors if f.kind == "crash"]
        for crash in crashes:
            for hang in hangs:
                culprits = _keys(hang.processes)
                if (hang not in self and culprits and culprits <= _keys(crash.processes)
                        and self.order(hang, crash) != "before"):
                    self.attach(hang, crash)
        for watchdog in (f for f in errors if f.kind == "watchdog-timeout"):
            self._link_watchdog(watchdog, hangs, crashes)
        for crash in crashes:
            if crash in self or any(self.root_of(h) is crash for h in hangs):
                continue
            for root in (f for f in errors if f.kind in _HANGS and f not in self):
                order = self.order(crash, root)
                if (_caused(crash, root) and order != "before"
                        and _within(crash, root.last_ts or root.first_ts, _SEPARATE_AFTER)):
                    self.attach(crash, root, undecided=order == "undecided")
                    break

    def _link_watchdog(self, watchdog: Finding, hangs: list[Finding],
                       crashes: list[Finding]) -> None:
        """A watchdog of a hang's members joins the hang; one on processes that depend on a
        crashed process, after it, joins the crash."""
        people = _keys(watchdog.processes + watchdog.waiting)
        hang = next((h for h in hangs if people and people <= _involved(h)), None)
        if hang is not None:
            self.attach(watchdog, hang)
            return
        # (it fires `watchdog_timeout` after the loop stopped, polling every half of it)
        fires = _SEPARATE_AFTER + 1.5 * _watchdog_timeout(watchdog)
        for crash in crashes:
            order = self.order(watchdog, crash)
            if (order != "before" and _depends(self.ctx, watchdog, crash)
                    and _within(watchdog, crash.first_ts, fires)):
                self.attach(watchdog, crash, undecided=order == "undecided")
                return

    def order(self, later: Finding, root: Finding) -> str:
        """`after` / `before` / `undecided`: when `later` began against `root`, by their
        first times (within the window: undecided; a missing time: undecided)."""
        a, b = _when(later.first_ts), _when(root.first_ts)
        if a is None or b is None:
            return "undecided"
        if abs(a - b) <= self.window:
            return "undecided"
        return "after" if a > b else "before"

    def assign(self, roots: list[Finding], rows: pl.DataFrame, kind: str,
               prefer: tuple[str, ...] = ()) -> None:
        """Give each of `rows` to the root it follows: the latest root (of the `prefer`
        kinds when one is there) that began before it in the timeline. Rows before every
        root follow none, but for a hang's teardown (`prefer`: its order may be undecided),
        which goes to the first."""
        if rows.height == 0 or not roots:
            return
        starts = [(self.start(r), r) for r in roots]
        preferred = [(s, r) for s, r in starts if _holds(r, prefer)] or starts
        owner = pl.Series([_latest_before(preferred, int(o), bool(prefer))
                           for o in rows["order"]], dtype=pl.Int64)
        rows = rows.with_columns(_owner=owner)
        for index, (_, root) in enumerate(preferred):
            mine = rows.filter(pl.col("_owner") == index)
            if mine.height:
                root.then(kind, mine)
                undecided = (lines_undecided(mine) if kind == "abort" else 0)
                if undecided:
                    self.said.setdefault(id(root), []).append(
                        f"{undecided} teardown line(s) are stamped within "
                        f"{self.window.total_seconds():g} s of the first timeout (whole seconds, "
                        "clock skew), so their order cannot be told: taken as its teardown")

    def start(self, finding: Finding) -> int:
        """The timeline position of the first row a finding rests on."""
        rows = _rows_of(self.ctx, finding)
        return int(rows["order"].min()) if rows.height else 0  # type: ignore[arg-type]

    def notes(self, root: Finding) -> str:
        return "".join(f"; {note}" for note in self.said.get(id(root), []))


def lines_undecided(rows: pl.DataFrame) -> int:
    """How many of the teardown `rows` are teardown only because their order is undecided."""
    if "_undecided" not in rows.columns:
        return 0
    return int(rows.filter(pl.col("_undecided").fill_null(False))["_n"].sum())


def _latest_before(starts: list[tuple[int, Finding]], order: int, fallback: bool
                   ) -> int | None:
    """Index into `starts` of the latest one starting before `order`; when none does, the
    first with `fallback`, else None."""
    before = [(start, index) for index, (start, _) in enumerate(starts) if start < order]
    if before:
        return max(before)[1]
    return 0 if fallback else None


def _holds(root: Finding, kinds: tuple[str, ...]) -> bool:
    """`root` is of one of `kinds`, or a finding of one of them was folded into it."""
    return root.kind in kinds or any(kind in kinds for kind, _ in root.followed)


def _rows_of(ctx: Context, finding: Finding) -> pl.DataFrame:
    """The event rows a finding rests on: its own `rows`, else those at its evidence."""
    if finding.rows is not None:
        return finding.rows.select(*COLUMNS)
    places = pl.DataFrame([(ctx_file_id(ctx, c["file"]), c["line"]) for c in finding.evidence],
                          schema={"file_id": pl.UInt32, "line": pl.UInt32}, orient="row")
    # (each place once: the parts of a glued line share it, and would multiply each other)
    return ctx.events.join(places.unique(), on=["file_id", "line"]).select(*COLUMNS)


def ctx_file_id(ctx: Context, name: str) -> int | None:
    """The file id of a file's name (as evidence cites it)."""
    return next((i for i, f in ctx.files.items() if f == name), None)


def _merge_people(into: list[dict[str, Any]], people: list[dict[str, Any]],
                  skip: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add `people` to `into`, once each, leaving out those in `skip` (the culprits); the
    ones added."""
    seen = _keys(into) | _keys(skip)
    added = []
    for person in people:
        key = (person.get("replica"), person.get("world_rank"))
        if key not in seen and person.get("world_rank") is not None:
            added.append(person)
            seen.add(key)
    into.extend(added)
    into.sort(key=lambda p: (p.get("replica") or 0, p.get("world_rank")))
    return added


def _keys(people: list[dict[str, Any]]) -> set[Key]:
    return {(p.get("replica"), p.get("world_rank")) for p in people
            if p.get("world_rank") is not None}


def _involved(finding: Finding) -> set[Key]:
    """The processes a hang finding speaks of: culprits, waiting, unknown and the other members
    of its group instance."""
    keys = _keys(finding.processes + finding.waiting + finding.unknown)
    replicas = {r for r, _ in keys}
    if finding.group_members:
        keys |= {(r, m) for r in replicas for m in finding.group_members}
    return keys


def _caused(crash: Finding, hang: Finding) -> bool:
    """A crash the hang explains: its processes are of the hang's incident, or every process
    that failed blames a peer (a victim: no culprit of its own) and is of the hang's
    replica."""
    people = _keys(crash.processes) or _keys(crash.waiting)
    involved = _involved(hang)
    if not people:
        return False
    if people <= involved:
        return True
    return not crash.processes and {r for r, _ in people} <= {r for r, _ in involved}


def _depends(ctx: Context, watchdog: Finding, crash: Finding) -> bool:
    """The watchdog's processes depend on the crashed one: with a launch config, they are of
    its replica (one world group: its TP group, the other pipeline stages, EP and attention-DP
    ranks all wait on it); without one, only when they are the crashed processes."""
    crashed = _keys(crash.processes) or _keys(crash.waiting)
    people = _keys(watchdog.processes + watchdog.waiting)
    if not crashed or not people:
        return False
    if ctx.topology is None:
        return people <= crashed
    return {r for r, _ in people} <= {r for r, _ in crashed}


def _within(later: Finding, since: str | None, limit: timedelta) -> bool:
    """`later` began no more than `limit` after the time `since` (true when a time is
    missing: nothing says it is another time window)."""
    start, end = _when(later.first_ts), _when(since)
    return start is None or end is None or start - end <= limit


def _watchdog_timeout(watchdog: Finding) -> timedelta:
    """The `--watchdog-timeout` its lines state (SGLang's default, 300 s, when none do)."""
    stated = stated_timeout(watchdog.rows) if watchdog.rows is not None else None
    return timedelta(seconds=stated if stated is not None else 300.0)


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _time_key(finding: Finding) -> tuple[str, str]:
    return (finding.first_ts or "~", finding.kind)


def _why_separate(ctx: Context, finding: Finding, root: Finding) -> str:
    """Why `finding` is not a consequence of `root`: another group, another time window, or
    nothing that ties it to it (and what is missing to tell)."""
    if ctx.topology is None:
        return (f"without the launch config, whether its processes are of the {root.kind}'s "
                "group cannot be told")
    mine = _keys(finding.processes + finding.waiting + finding.unknown)
    theirs = _involved(root) | _keys(root.waiting)
    mine_replicas, their_replicas = {r for r, _ in mine}, {r for r, _ in theirs}
    if mine and theirs and not mine_replicas & their_replicas:
        return (f"another group (replica {ranges(mine_replicas)}; the {root.kind} is in "
                f"replica {ranges(their_replicas)})")
    start, end = _when(finding.first_ts), _when(root.last_ts or root.first_ts)
    if start is not None and end is not None and start - end > _SEPARATE_AFTER:
        minutes = (start - end).total_seconds() / 60
        return f"another time window (it began {minutes:.0f} min after the {root.kind} ended)"
    if not theirs:
        return (f"the {root.kind} names no process, so whether these waited for it cannot be "
                "told")
    if mine and not mine & theirs:
        return f"another group (none of its processes is of the {root.kind})"
    if finding.kind == "collective-hang" and root.kind == "crash":
        return "its culprit is not the process that crashed"
    return f"no line ties it to the {root.kind}"
