"""The operator's and the relays' remaining moves, for every store: an action's wake-up time and the operator's
decision on a held action, proposals expiring, system notices, the schema version, C14's figures, and the Admin
port (where the data is, vacuum, backup)."""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from store import (
    ActionMove,
    DecisionKind,
    IllegalTransition,
    ManualClock,
    Occurrence,
    Policy,
    ReportDraft,
    Store,
    StoreError,
    Transaction,
    WorkKind,
)
from store.postgres import migrations as postgres_migrations
from store.sqlite import migrations as sqlite_migrations

from .test_outbox_contract import SHOP, approved


async def test_the_next_action_time_follows_the_pending_actions_not_before(store: Store, clock: ManualClock):
    action_id = await approved(store, "vanilla")
    assert await store.next_action_time() is None                     # due at once: due_actions has it
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    later = clock.now() + timedelta(minutes=5)
    await store.action_move(ActionMove.MARK_NOT_SENT, action_id, later, "connect refused")
    assert await store.next_action_time() == later and await store.due_actions() == []
    clock.advance(5 * 60)
    assert [a.action_id for a in await store.due_actions()] == [action_id]
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    assert await store.next_action_time() is None                     # sending waits for nothing


async def test_the_operator_releases_or_voids_a_held_action_once(store: Store):
    action_id = await approved(store, "vanilla")
    await store.action_move(ActionMove.QUARANTINE, action_id, "unknown supplier")
    assert await store.decide_action(action_id, "release", "operator") == "pending"
    assert [a.action_id for a in await store.due_actions()] == [action_id]
    with pytest.raises(IllegalTransition):
        await store.decide_action(action_id, "void", "operator")     # pending: nothing to decide
    await store.action_move(ActionMove.QUARANTINE, action_id, "the supplier's address changed")
    assert await store.decide_action(action_id, "void", "operator", detail="wrong supplier") == "voided"
    assert await store.due_actions() == []
    with pytest.raises(IllegalTransition):
        await store.decide_action(action_id, "release", "operator")  # voided is final


async def test_an_unknown_action_is_found_delivered_by_a_recorded_decision(store: Store):
    action_id = await approved(store, "vanilla")
    await store.action_move(ActionMove.MARK_SENDING, action_id)
    await store.action_move(ActionMove.MARK_UNKNOWN, action_id, "timeout")
    assert [a.action_id for a in await store.unknown_actions()] == [action_id]
    assert await store.decide_action(action_id, "reconciled_found", "operator", receipt="order-9") == "delivered"
    assert await store.unknown_actions() == [] and await store.due_actions() == []


async def expiring_proposal(store: Store, clock: ManualClock, minutes: int) -> int:
    await store.seed_shop(SHOP, "shop.toml")
    await store.admit(Occurrence(f"tg:1:{minutes}", "tg:1", "order vanilla", WorkKind.AGENT, "tg:1"))
    claim = await store.claim("w1")
    assert claim is not None
    await store.op_started(claim.run_id, "c1", "propose_order", {"item": "vanilla", "quantity": 2}, "external")
    result = await store.record_proposal(claim.run_id, "c1", "Dairy Direct", "vanilla", 2, Policy(
        "Dairy Direct", expires_at=clock.now() + timedelta(minutes=minutes)))
    await store.finish(claim, ReportDraft("proposed", destination="tg:1"))
    return result.proposal_id


async def test_proposals_expire_once_their_time_has_passed_and_cannot_be_approved(store: Store, clock: ManualClock):
    def approve(proposal_id: int) -> Callable[[Transaction], DecisionKind]:
        return lambda tx: tx.approve_proposal(proposal_id, "owner 1", day="2027-03-01", day_max_cents=None,
                                              destination="supplier:dairy").kind
    soon = await expiring_proposal(store, clock, 10)
    assert await store.expire_proposals() == []
    clock.advance(11 * 60)
    assert await store.expire_proposals() == [soon]
    assert await store.expire_proposals() == []
    assert await store.atomic(approve(soon)) == DecisionKind.NOT_AWAITING
    later = await expiring_proposal(store, clock, 60)          # the item has no open proposal any more
    clock.advance(11 * 60)
    assert await store.expire_proposals() == []                 # negative control: not yet its time
    assert await store.atomic(approve(later)) == DecisionKind.APPROVED


async def test_a_notice_is_written_once_with_its_report_and_its_text_redacted(store: Store):
    text = "the supplier refused: api_key=abcd1234secret"
    assert await store.notice("supplier", "dairy", text, "tg:1")
    assert not await store.notice("supplier", "dairy", "said again", "tg:1")    # its identity: once only
    [report] = await store.reports()
    assert "abcd1234secret" not in report.body and "api_key" in report.body
    [part] = await store.due_deliveries()
    assert part.chat_id == 1 and part.report_id == report.report
    assert await store.claim("w") is None                      # a notice is answered, never agent work


async def test_the_schema_version_is_the_latest_migration(store: Store, kind: str):
    latest = {"sqlite": sqlite_migrations.LATEST, "postgres": postgres_migrations.LATEST}[kind]
    assert await store.schema_version() == latest == sqlite_migrations.LATEST     # one numbering for both


async def test_stats_give_littles_figures_of_agent_work_over_a_window(store: Store, clock: ManualClock):
    start = clock.now()
    await store.admit(Occurrence("tg:1:1", "tg:1", "stock", WorkKind.AGENT, "tg:1"))
    await store.notice("supplier", "dairy", "not agent work", "tg:1")
    clock.advance(10)
    claim = await store.claim("w")
    assert claim is not None
    await store.finish(claim, ReportDraft("plenty", destination="tg:1"))
    clock.advance(10)
    stats = await store.stats(start, clock.now())
    assert (stats.window_seconds, stats.arrivals, stats.refused) == (20.0, 1, 0)
    assert (stats.lam, stats.w, stats.l) == (pytest.approx(1 / 20), pytest.approx(10.0), pytest.approx(0.5))
    assert stats.holds
    empty = await store.stats(clock.now(), clock.now() + timedelta(seconds=30))
    assert (empty.arrivals, empty.l) == (0, 0.0)


async def test_the_location_names_the_data_without_a_password(store: Store, kind: str, tmp_path: Path,
                                                              location: str | None):
    if kind == "sqlite":
        assert store.location == str(tmp_path / "contract.sqlite3")
    else:
        assert location is not None and store.location.split("/")[-1] == location.split("/")[-1]
    assert "@" not in store.location.replace("postgres@", "")     # no user:password@


async def test_vacuum_reports_the_size_before_and_after(store: Store):
    await store.admit(Occurrence("tg:1:1", "tg:1", "x" * 10_000, WorkKind.AGENT, "tg:1"))
    before, after = await store.vacuum()
    assert before > 0 and after > 0
    assert await store.check() == []


async def test_a_backup_is_a_consistent_copy_or_names_the_databases_own_tool(store: Store, kind: str,
                                                                            tmp_path: Path):
    await store.admit(Occurrence("tg:1:1", "tg:1", "hello", WorkKind.AGENT, "tg:1"))
    target = tmp_path / "backup.sqlite3"
    if kind == "postgres":
        with pytest.raises(StoreError, match="pg_dump"):
            await store.backup(str(target))
        return
    await store.backup(str(target))
    with sqlite3.connect(target) as copy:
        assert copy.execute("SELECT source, payload FROM work").fetchall() == [("tg:1:1", "hello")]
    with pytest.raises(FileExistsError):
        await store.backup(str(target))                         # never over an existing file
