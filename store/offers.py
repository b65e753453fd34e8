"""An idle worker's claim, offered to the next admission's commit (issue 31: one transaction less per reply).

A worker with a free slot offers a claim before it waits (`Inbox.offer_claim`). The next transaction of this
process that admits agent work (`atomic`, `admit`, `admit_many`) while the offer is open runs the same claim as
`claim_or_wake` (C5: the due rule, the set-up read with it) inside a savepoint after its own writes, and the
offer's `taken` future gets the claim only after that transaction's COMMIT returned: the claim commits with the
admission, before any model runs. Nothing about it is a wake-up of its own: an offer nobody takes leaves the
worker to the ordinary wake-up and claim.

The states, all moved on the event loop (never in a driver's thread):

    open --an admission's transaction carries it--> held --its COMMIT returned with a claim--> taken
      ^                                              |
      +---- rolled back, nothing claimed, failed ----+
    open or held --`withdraw`--> withdrawn (a held offer still settles: its claim, if committed, is handed over)

`withdraw` closes the offer and answers the claim it was given (or a transaction still carrying it commits), so a
claim taken while the worker stopped is the worker's to give back, never lost.
"""
from __future__ import annotations

import asyncio
import enum

from .records import Claim


class OfferState(enum.Enum):
    OPEN = "open"              # the next admission of agent work may take it
    HELD = "held"              # an admission's transaction carries it now (its outcome is not known yet)
    TAKEN = "taken"            # `taken` has the claim (committed)
    WITHDRAWN = "withdrawn"    # closed by the worker; no admission takes it from now


class ClaimOffer:
    """One idle slot's claim, for the next admission's transaction to take (`Inbox.offer_claim`)."""

    def __init__(self, worker_id: str, history_limit: int | None) -> None:
        self.worker_id = worker_id
        self.history_limit = history_limit
        self.taken: asyncio.Future[Claim] = asyncio.get_running_loop().create_future()
        self.state = OfferState.OPEN
        self._closed = False                                  # withdrawn (while held: once it settles)
        self._settled: asyncio.Future[None] | None = None     # while held: done when the carrying transaction ended

    # ---- the store's side ---------------------------------------------------------------------------------
    def hold(self) -> bool:
        """An admission's transaction carries the offer (True), unless it is not open."""
        if self.state is not OfferState.OPEN:
            return False
        self.state = OfferState.HELD
        self._settled = asyncio.get_running_loop().create_future()
        return True

    def settle(self, claim: Claim | None) -> None:
        """The carrying transaction ended: `claim` when its COMMIT returned with one, else None (rolled back, nothing
        claimable, the rider failed). Only after the COMMIT returned (C5)."""
        if self.state is not OfferState.HELD:
            raise RuntimeError(f"an offer settles only while held, not {self.state.value}")
        settled, self._settled = self._settled, None
        if claim is not None:
            self.state = OfferState.TAKEN
            self.taken.set_result(claim)
        else:
            self.state = OfferState.WITHDRAWN if self._closed else OfferState.OPEN
        if settled is not None and not settled.done():
            settled.set_result(None)

    # ---- the worker's side ----------------------------------------------------------------------------------
    async def withdraw(self) -> Claim | None:
        """Close the offer: no admission takes it from now. When a transaction carries it, wait until it ended.
        Returns the claim taken (the caller runs it, or gives it back), or None."""
        self._closed = True
        while self.state is OfferState.HELD and self._settled is not None:
            await asyncio.shield(self._settled)
        if self.state is OfferState.OPEN:
            self.state = OfferState.WITHDRAWN
        return self.taken.result() if self.state is OfferState.TAKEN else None

    def __repr__(self) -> str:
        return f"ClaimOffer({self.worker_id!r}, {self.state.value})"
