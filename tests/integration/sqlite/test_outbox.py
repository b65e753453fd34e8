"""C7 and C8 on the store side: delivery moves, parts, decisions, and their refusal by the database."""
from __future__ import annotations

import sqlite3

import pytest

from store import IllegalTransition, Occurrence, ReportDraft
from store.shared.outbox import PART_LIMIT, split_parts


async def finished_report(store, body="hello", text="stock", source="tg:1:1"):
    await store.admit(Occurrence(source, "tg:1", text, destination="tg:1"))
    claim = await store.claim("w1")
    return (await store.finish(claim, ReportDraft(body, destination="tg:1"))).report_id


def state(raw, delivery_id=1):
    return raw.execute("SELECT state FROM deliveries WHERE delivery_id = ?", (delivery_id,)).fetchone()[0]


async def test_confirmed_with_receipt(store, raw):
    await finished_report(store)
    [d] = await store.due_deliveries()
    await store.mark_sending(d.delivery_id)
    assert state(raw) == "sending"
    await store.mark_confirmed(d.delivery_id, "555")
    assert tuple(raw.execute("SELECT state, receipt, attempts FROM deliveries").fetchone()) == ("confirmed", "555", 1)
    assert await store.due_deliveries() == []


async def test_not_sent_and_429_go_back_to_pending(store, raw, clock):
    await finished_report(store)
    await store.mark_sending(1)
    await store.mark_not_sent(1, "connection refused")
    assert [d.delivery_id for d in await store.due_deliveries()] == [1]
    await store.mark_sending(1)
    await store.mark_not_sent(1, "429", retry_after=7)
    assert await store.due_deliveries() == []
    assert (await store.next_delivery_time()) is not None
    clock.advance(7)
    assert [d.delivery_id for d in await store.due_deliveries()] == [1]


async def test_unknown_is_never_due_and_resend_needs_a_decision(store, raw):
    report_id = await finished_report(store)
    await store.mark_sending(1)
    await store.mark_unknown(1, "read timeout")
    assert await store.due_deliveries() == []
    with pytest.raises(sqlite3.IntegrityError, match="C8"):
        raw.execute("UPDATE deliveries SET state = 'pending', resends = resends + 1 WHERE delivery_id = 1")
    with pytest.raises(sqlite3.IntegrityError, match="C8"):
        raw.execute("UPDATE deliveries SET state = 'confirmed' WHERE delivery_id = 1")
    assert await store.resolve(report_id, "resend", "operator:test") == [1]
    assert [d.delivery_id for d in await store.due_deliveries()] == [1]
    decision = raw.execute("SELECT decision, decided_by FROM resolutions").fetchone()
    assert tuple(decision) == ("resend", "operator:test")
    # the resend keeps the report's identity
    assert (await store.due_deliveries())[0].text.endswith(report_id)
    await store.mark_sending(1)
    await store.mark_unknown(1, "again")
    await store.resolve(report_id, "delivered", "owner:1")
    assert tuple(raw.execute("SELECT state, receipt FROM deliveries").fetchone()) == ("confirmed", None)
    with pytest.raises(IllegalTransition):
        await store.resolve(report_id, "resend", "owner:1")   # nothing is unknown any more


@pytest.mark.parametrize("setup,sql", [
    ([], "UPDATE deliveries SET state = 'confirmed', receipt = '1' WHERE delivery_id = 1"),   # pending -> confirmed
    ([], "UPDATE deliveries SET state = 'unknown' WHERE delivery_id = 1"),                    # pending -> unknown
    (["sending"], "UPDATE deliveries SET state = 'confirmed' WHERE delivery_id = 1"),         # no receipt
    (["sending", "confirmed"], "UPDATE deliveries SET state = 'pending' WHERE delivery_id = 1"),
    (["sending", "failed"], "UPDATE deliveries SET state = 'pending' WHERE delivery_id = 1"),
    ([], "UPDATE deliveries SET text = 'changed' WHERE delivery_id = 1"),
    ([], "INSERT INTO deliveries (report_id, part, parts, chat_id, text, state, created_at, updated_at) "
         "VALUES ('r1.1', 2, 2, 1, 'x', 'confirmed', 'n', 'n')"),
])
async def test_database_refuses_illegal_delivery_moves(store, raw, setup, sql):
    await finished_report(store)
    for move in setup:
        if move == "sending":
            await store.mark_sending(1)
        elif move == "confirmed":
            await store.mark_confirmed(1, "9")
        elif move == "failed":
            await store.mark_failed(1, "403")
    with pytest.raises(sqlite3.IntegrityError, match="C7|C8"):
        raw.execute(sql)


async def test_parts_go_in_order_and_stop_at_the_first_unknown(store, raw):
    body = "\n".join(f"line {i} " + "x" * 90 for i in range(100))   # about 10,000 characters
    report_id = await finished_report(store, body=body)
    parts = raw.execute("SELECT part, parts, text FROM deliveries ORDER BY part").fetchall()
    assert len(parts) == 3 and all(len(p["text"]) <= PART_LIMIT for p in parts)
    assert parts[1]["text"].endswith(f"{report_id} (2/3)")
    assert "".join(p["text"].rsplit("\n\n", 1)[0] + "\n" for p in parts).strip() == body
    due = await store.due_deliveries()
    assert [d.part for d in due] == [1]                   # part 2 waits for part 1
    await store.mark_sending(due[0].delivery_id)
    await store.mark_confirmed(due[0].delivery_id, "1")
    [second] = await store.due_deliveries()
    await store.mark_sending(second.delivery_id)
    await store.mark_unknown(second.delivery_id, "dropped")
    assert await store.due_deliveries() == []             # part 3 never goes after an unknown part 2
    await store.resolve(report_id, "delivered", "owner:1")
    assert [d.part for d in await store.due_deliveries()] == [3]


async def test_failed_and_denied_parts_end_the_rest(store, raw):
    body = "\n".join("y" * 1000 for _ in range(9))
    await finished_report(store, body=body)
    await store.mark_sending(1)
    await store.mark_failed(1, "403 bot was blocked")
    assert [r[0] for r in raw.execute("SELECT state FROM deliveries ORDER BY part")] == ["failed"] * 3
    await finished_report(store, body=body, source="tg:1:2")
    [d] = await store.due_deliveries()
    await store.mark_denied(d.delivery_id, "chat no longer allow-listed")
    assert {r[0] for r in raw.execute("SELECT state FROM deliveries WHERE report_id = 'r2.1'")} == {"denied"}
    assert await store.check() == []


def test_split_parts_edges():
    assert split_parts("", "r1.1") == ["\n\nr1.1"]
    long_line = "z" * 9000
    parts = split_parts(long_line, "r7.1")
    assert len(parts) == 3 and all(len(p) <= PART_LIMIT for p in parts)
    assert "".join(p.rsplit("\n\n", 1)[0] for p in parts) == long_line


async def test_reports_without_a_chat_get_no_delivery(store, raw):
    await store.admit(Occurrence("till:1:a", "till:1", "{}", destination="till:1"))
    claim = await store.claim("w1")
    await store.finish(claim, ReportDraft("counts applied", destination="till:1"))
    assert raw.execute("SELECT count(*) FROM deliveries").fetchone()[0] == 0
    assert await store.check() == []
