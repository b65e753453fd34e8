"""The clock producer: scheduled occurrences (the opening brief and any `[[schedule]]`) admitted as work.

APScheduler only wakes this up (docs/contracts.md, "Facts at the edges"). Each wake-up, and the one at startup, plans
the schedule's fire times between its stored cursor and now (`plan_catch_up`) and commits, in one transaction per
schedule: the admissions `clock:<name>:<key>`, the missed occurrences (a producer table, never work states) and the
new cursor (C2). A crash before the commit leaves all three as they were, so the next wake-up plans the same
occurrences again; a wake-up that finds nothing new admits nothing.

An occurrence refused for capacity keeps the cursor just before it and is tried again at each wake-up until its
grace ends; then it is recorded as missed (reason `capacity`). An outage too long to enumerate (more than
`MAX_FIRE_TIMES` fire times) moves the cursor to now minus the grace and records one summary row (`outage`).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from store import Admission, AdmissionTx, Fence, MissedReason, Occurrence, Store, WorkKind, faults

from .schedule import Schedule, ScheduleError, plan_catch_up

log = logging.getLogger("shopbot.clock")

_JUST_BEFORE = timedelta(microseconds=1)


def _instant(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class CatchUpResult:
    """What one wake-up decided for one schedule (committed together)."""
    schedule: str
    admitted: tuple[tuple[str, datetime], ...]   # (source, fire time) accepted now
    duplicates: tuple[str, ...]                  # sources already admitted (nothing new stored)
    refused: str | None                          # the source refused for capacity; retried until its grace ends
    missed: tuple[tuple[str, MissedReason], ...]  # (key, reason) recorded now
    cursor: datetime


class ClockProducer:
    def __init__(self, store: Store, schedules: Sequence[Schedule], destination: str | None) -> None:
        """`destination` is where the reports go: the owner's chat `tg:<chat_id>` (None: stored only)."""
        names = [s.name for s in schedules]
        if len(set(names)) != len(names):
            raise ValueError(f"schedule names must be unique, got {names}")
        self.store = store
        self.schedules = {s.name: s for s in schedules}
        self.destination = destination

    async def catch_up(self, name: str | None = None, fence: Fence | None = None) -> list[CatchUpResult]:
        """Plan and commit every schedule (or the named one), one transaction each, each fenced by the `producers`
        lease when given (C16). The fault point `clock-cursor` lies inside the transaction after the admissions,
        before the missed rows and the cursor are written."""
        targets = [self.schedules[name]] if name is not None else list(self.schedules.values())
        results = []
        for schedule in targets:
            result = await self.store.atomic(partial(self._catch_up, schedule=schedule), fence=fence)
            _log(result)
            results.append(result)
        return results

    def _catch_up(self, tx: AdmissionTx, schedule: Schedule) -> CatchUpResult:
        state, now = tx.producers, tx.at
        cursor, refused_key = state.get_cursor(schedule.name)
        missed: list[tuple[str, MissedReason, datetime | None]] = []
        horizon = now - schedule.grace
        try:
            plan = plan_catch_up(schedule, cursor, now)
        except ScheduleError:
            if cursor is None or cursor >= horizon:
                raise
            # A long outage: too many fire times to enumerate. Everything before the grace window is missed anyway.
            missed.append((f"{_instant(cursor)}/{_instant(horizon)}", MissedReason.OUTAGE, None))
            plan = plan_catch_up(schedule, horizon, now)
        for occ in plan.missed:
            if occ.fire_time >= horizon:
                reason = MissedReason.SUPERSEDED  # policy `latest`: a newer occurrence in the grace window was admitted
            elif occ.key == refused_key:
                reason = MissedReason.CAPACITY     # refused at every try until its grace ended
            else:
                reason = MissedReason.LATE         # no wake-up within its grace (the process was down)
            missed.append((occ.key, reason, occ.fire_time))

        admitted: list[tuple[str, datetime]] = []
        duplicates: list[str] = []
        refused = None
        new_cursor = plan.cursor
        for occ in plan.admit:
            result = tx.admit(Occurrence(occ.source, f"clock:{schedule.name}", schedule.prompt, WorkKind.AGENT,
                                         self.destination))
            if result.outcome is Admission.ACCEPTED:
                admitted.append((occ.source, occ.fire_time))
            elif result.outcome is Admission.DUPLICATE:
                duplicates.append(occ.source)
            elif result.outcome is Admission.CONFLICT:
                missed.append((occ.key, MissedReason.CONFLICT, occ.fire_time))  # admitted before, another prompt
            else:   # refused for capacity: keep the cursor before it and stop (the later ones would be refused too)
                refused = occ
                new_cursor = occ.fire_time - _JUST_BEFORE
                break
        faults.reached("clock-cursor")
        recorded = tuple((key, reason) for key, reason, fire_time in missed
                         if state.record_missed(schedule.name, key, reason, fire_time))
        state.set_cursor(schedule.name, new_cursor, refused.key if refused else None)
        return CatchUpResult(schedule.name, tuple(admitted), tuple(duplicates), refused.source if refused else None,
                             recorded, new_cursor)


def _log(result: CatchUpResult) -> None:
    for source, fire_time in result.admitted:
        log.info("clock admitted source=%s fire_time=%s", source, _instant(fire_time))
    if result.refused:
        log.warning("clock refused for capacity source=%s: retried until its grace ends", result.refused)
    for key, reason in result.missed:
        log.warning("clock missed schedule=%s key=%s reason=%s", result.schedule, key, reason)

