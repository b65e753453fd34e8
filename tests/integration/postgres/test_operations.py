"""The operator's reads and moves on PostgreSQL: /healthz's write probe, /metrics' figures, retention and vacuum."""
from __future__ import annotations

import pytest

from store import IllegalTransition, ManualClock, Occurrence, ReportDraft, WorkKind, open_store


async def test_health_metrics_prune_and_vacuum_work_on_postgresql(pg_url, clock: ManualClock):
    store = await open_store(pg_url, clock, debounce_ms=0)
    try:
        await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
        claim = await store.claim("w")
        assert claim is not None
        await store.finish(claim, ReportDraft("answer", destination="tg:1"), user_text="hi")
        await store.mark_sending(1)
        await store.mark_confirmed(1, "m1")
        assert await store.writable(0) is None
        figures = await store.metrics()
        assert figures.work[("agent", "finished")] == 1 and figures.db_bytes > 0 and figures.wal_bytes == 0
        clock.advance(3 * 86400)
        pruned = await store.prune(2)
        assert pruned.get("history", 0) == 2
        # retention's tombstone move passed the triggers; any other change of the tombstone is still refused
        rows = await store.db.read(lambda conn: conn.execute(  # type: ignore[attr-defined]
            "SELECT payload, length(payload_sha256) FROM work WHERE pruned_at IS NOT NULL").fetchall())
        assert [tuple(r) for r in rows] == [("", 64)]
        with pytest.raises(IllegalTransition, match="^C1: an admitted occurrence never changes"):
            await store.db.write(lambda conn: conn.execute("UPDATE work SET payload = 'back'"))  # type: ignore[attr-defined]
        before, after = await store.vacuum()
        assert before > 0 and after > 0
        assert await store.check() == []
    finally:
        await store.close()


async def test_the_running_bot_on_postgresql_answers_healthz_metrics_and_the_owner(pg_url):
    import asyncio

    import httpx

    from bot.sandbox.local_setup import OWNER_ID, local_product
    from tests.integration.test_metrics import FAST
    async with local_product({**FAST, "SHOPBOT_DB": pg_url}) as run:
        await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
        base = f"http://127.0.0.1:{run.app.parts.http.port}"
        async with httpx.AsyncClient(timeout=10) as client:
            health = await client.get(f"{base}/healthz")
            metrics = await client.get(f"{base}/metrics")
        assert health.status_code == 200 and health.json()["database"] == "writable", health.text
        assert metrics.status_code == 200 and "shopbot_" in metrics.text
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.api.wait_for(lambda: any(m.chat_id == OWNER_ID for m in run.api.sent), timeout=30)
