"""Retention: `Store.prune` / `shopbot prune --older-than DAYS` removes what is finished and old and keeps every
identity and invariant: tombstones keep the payload's hash (a retried old till post is still `duplicate`, a changed
one `conflict`), ids never repeat, open work, unknown deliveries and quarantined actions are untouched, and the
immutability triggers refuse anything but the tombstone move."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from store import Admission, Occurrence, ReportDraft, WorkKind
from store.sqlite.invariants import check

DAY = 86400.0
TILL_PAYLOAD = json.dumps({"counts": {"vanilla": 3}, "request_id": "close-1"}, separators=(",", ":"))


async def answered(store, source: str, text: str, destination: str, outcome: str = "confirmed") -> str:
    """An agent item admitted, run and finished; its Telegram part confirmed or left unknown."""
    await store.admit(Occurrence(source, destination, text, WorkKind.AGENT, destination))
    claim = await store.claim("w1", skip_sessions=["tg:1002"])     # tg:1002's item stays open on purpose
    result = await store.finish(claim, ReportDraft(f"answer to {source}", destination=destination))
    for delivery in await store.due_deliveries():
        await store.mark_sending(delivery.delivery_id)
        if outcome == "confirmed":
            await store.mark_confirmed(delivery.delivery_id, "42")
        else:
            await store.mark_unknown(delivery.delivery_id, "ReadTimeout")
    return result.report_id


async def a_year_ago(store, raw, clock) -> dict:
    """Old finished work of every kind, and old things retention must never touch."""
    till = await answered(store, "till:1:close-1", TILL_PAYLOAD, "till:1")
    chat = await answered(store, "tg:1001:5", "how much vanilla", "tg:1001")
    unknown = await answered(store, "tg:1001:6", "stock", "tg:1001", outcome="unknown")
    await store.admit(Occurrence("tg:1002:1", "tg:1002", "waiting since last year", WorkKind.AGENT, "tg:1002"))
    raw.execute("INSERT INTO proposals (proposal_id, run_id, supplier, item, quantity, unit_cost_cents, total_cents, "
                "state, created_at, updated_at) SELECT 1, run_id, 's', 'vanilla', 1, 1, 1, 'approved', 'n', 'n' "
                "FROM runs LIMIT 1")
    raw.execute("INSERT INTO orders (proposal_id, item, quantity, approved_at, due_at, updated_at) "
                "VALUES (1, 'vanilla', 1, 'n', 'n', 'n')")                 # an approved proposal is on order (O1)
    raw.execute("INSERT INTO spending VALUES (1, '2027-01-01', 1, 'reserved', 'n')")
    raw.execute("INSERT INTO actions (proposal_id, idempotency_key, destination, payload, created_at, updated_at) "
                "VALUES (1, '0123456789abcdef0123456789abcdef', 'supplier:s', '{}', 'n', 'n')")
    raw.execute("UPDATE actions SET state = 'quarantined', reason = 'unknown supplier'")
    await store.atomic(lambda tx: tx.decide_prompt(tx.ask("forget", "tg:1001", 1001).nonce, "keep", "owner:1"))
    await store.count("stranger")
    raw.execute("INSERT INTO history (session, role, text, created_at) VALUES ('tg:1001', 'user', 'old', ?)",
                (store.now(),))
    raw.execute("INSERT INTO operations (run_id, call_id, tool, arguments, effect, started_at) "
                "SELECT run_id, 'c1', 'list_stock', '{}', 'read', started_at FROM runs WHERE outcome = 'finished' "
                "AND run_id NOT IN (SELECT run_id FROM proposals) LIMIT 1")
    clock.advance(400 * DAY)
    return {"till": till, "chat": chat, "unknown": unknown}


def one(raw, sql: str, *args) -> tuple:
    return tuple(raw.execute(sql, args).fetchone())


def row(raw, sql: str, *args) -> dict:
    return dict(raw.execute(sql, args).fetchone())


async def test_prune_empties_old_bodies_into_tombstones_and_keeps_every_identity(store, raw, clock, db_path):
    old = await a_year_ago(store, raw, clock)
    recent = await answered(store, "tg:1001:7", "stock", "tg:1001")
    max_work = one(raw, "SELECT max(work_id) FROM work")[0]

    done = await store.prune(older_than_days=30)

    assert done["history"] == 1 and done["operations"] == 1 and done["prompts"] == 1 and done["counters"] == 1
    assert done["work_payloads"] == 2 and done["report_bodies"] == 2 and done["delivery_texts"] == 1
    assert check(db_path) == []
    # the old till post and the old chat message are tombstones with their payload's hash
    till = row(raw, "SELECT * FROM work WHERE source = 'till:1:close-1'")
    assert (till["payload"], till["state"], till["pruned_at"] is not None) == ("", "finished", True)
    assert len(till["payload_sha256"]) == 64
    body = row(raw, "SELECT body, body_sha256, pruned_at FROM reports WHERE report_id = ?", old["till"])
    assert body["body"] == "" and len(body["body_sha256"]) == 64
    assert one(raw, "SELECT text FROM deliveries WHERE report_id = ?", old["chat"]) == ("",)
    # a retried old till post is still a duplicate, a changed one still a conflict
    again = await store.admit(Occurrence("till:1:close-1", "till:1", TILL_PAYLOAD, WorkKind.AGENT, "till:1"))
    assert (again.outcome, again.work_id) == (Admission.DUPLICATE, till["work_id"])
    changed = await store.admit(Occurrence("till:1:close-1", "till:1", TILL_PAYLOAD.replace("3", "4"),
                                           WorkKind.AGENT, "till:1"))
    assert changed.outcome is Admission.CONFLICT
    # open work, the unknown delivery and its report, the quarantined action and the recent turn are untouched
    assert one(raw, "SELECT payload, state FROM work WHERE source = 'tg:1002:1'") == ("waiting since last year",
                                                                                     "pending")
    unknown = row(raw, "SELECT d.state, d.text, r.body FROM deliveries d JOIN reports r USING (report_id) "
                       "WHERE d.report_id = ?", old["unknown"])
    assert unknown["state"] == "unknown" and unknown["text"] and unknown["body"]
    assert one(raw, "SELECT payload FROM work WHERE source = 'tg:1001:6'")[0] == "stock"
    assert one(raw, "SELECT state, payload FROM actions") == ("quarantined", "{}")
    assert one(raw, "SELECT body FROM reports WHERE report_id = ?", recent)[0] == "answer to tg:1001:7"
    # ids never repeat: new work numbers on from the highest ever given
    new = await store.admit(Occurrence("tg:1001:8", "tg:1001", "stock", WorkKind.AGENT, "tg:1001"))
    assert new.work_id == max_work + 1
    # a second prune finds nothing more
    assert not any((await store.prune(older_than_days=30)).values())


async def test_the_triggers_allow_only_the_tombstone_move(store, raw, clock):
    old = await a_year_ago(store, raw, clock)
    with pytest.raises(sqlite3.IntegrityError, match="C1"):      # open work is never emptied
        raw.execute("UPDATE work SET payload = '', payload_sha256 = printf('%064d', 0), pruned_at = 'n' "
                    "WHERE source = 'tg:1002:1'")
    with pytest.raises(sqlite3.IntegrityError, match="C6"):      # a report with an unknown part is never emptied
        raw.execute("UPDATE reports SET body = '', body_sha256 = printf('%064d', 0), pruned_at = 'n' "
                    "WHERE report_id = ?", (old["unknown"],))
    with pytest.raises(sqlite3.IntegrityError, match="C1|C4"):   # a tombstone must keep a hash
        raw.execute("UPDATE work SET payload = '', pruned_at = 'n' WHERE source = 'till:1:close-1'")
    with pytest.raises(sqlite3.IntegrityError, match="C1|C4"):   # nor may the move change anything else
        raw.execute("UPDATE work SET payload = '', payload_sha256 = printf('%064d', 0), pruned_at = 'n', "
                    "session = 'other' WHERE source = 'till:1:close-1'")
    with pytest.raises(sqlite3.IntegrityError, match="C6"):      # a report is still never edited
        raw.execute("UPDATE reports SET body = 'rewritten' WHERE report_id = ?", (old["till"],))
    with pytest.raises(sqlite3.IntegrityError, match="C7"):      # nor an unknown part's text
        raw.execute("UPDATE deliveries SET text = '', pruned_at = 'n' WHERE report_id = ?", (old["unknown"],))
    await store.prune(older_than_days=30)
    with pytest.raises(sqlite3.IntegrityError, match="C1|C4"):   # once pruned, never again
        raw.execute("UPDATE work SET payload = '', payload_sha256 = printf('%064d', 1), pruned_at = 'm' "
                    "WHERE source = 'till:1:close-1'")


async def test_retention_keeps_at_least_a_day(store):
    with pytest.raises(ValueError, match="at least one day"):
        await store.prune(older_than_days=0)


async def test_shopbot_prune_reports_what_it_removed_and_check_still_holds(store, raw, clock, db_path):
    await a_year_ago(store, raw, clock)
    await store.close()
    env = {"SHOPBOT_CLOCK": "accelerated:2028-06-01T00:00:00Z:1", "SHOPBOT_TEST_MODE": "1"}
    result = subprocess.run([sys.executable, "-m", "bot.cli", "prune", "--older-than", "30", "--db", str(db_path)],
                            capture_output=True, text=True, env={**_base_env(), **env})
    assert result.returncode == 0, result.stderr
    assert "work payloads 2" in result.stdout and "report bodies 2" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "bot.cli", "prune", "--older-than", "0", "--db", str(db_path)],
                         capture_output=True, text=True, env=_base_env())
    assert bad.returncode == 1 and "at least one day" in bad.stderr
    ok = subprocess.run([sys.executable, "-m", "bot.cli", "check", "--db", str(db_path)], capture_output=True,
                        text=True, env=_base_env())
    assert ok.returncode == 0, ok.stdout


def _base_env() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}


async def test_the_bot_prunes_at_start_and_daily_when_retention_days_is_set(caplog):
    import asyncio
    import logging

    from bot.sandbox.local_setup import local_product
    caplog.set_level(logging.INFO)
    async with local_product({"SHOPBOT_RETENTION_DAYS": "30"}) as run:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not any(r.getMessage().startswith("retention: pruned") for r in caplog.records):
            assert loop.time() < deadline, "the bot did not prune at start"
            await asyncio.sleep(0.05)
        assert run.app.cfg.retention_days == 30
