"""The operator's reads and moves on PostgreSQL: /healthz's write probe, /metrics' figures, retention and vacuum."""
from __future__ import annotations

from store import ManualClock, Occurrence, ReportDraft, WorkKind, open_store


async def test_health_metrics_prune_and_vacuum_work_on_postgresql(pg_url, clock: ManualClock):
    store = await open_store(pg_url, clock, debounce_ms=0)
    try:
        await store.admit(Occurrence("tg:1:1", "tg:1", "hi", WorkKind.AGENT, "tg:1"))
        claim = await store.claim("w")
        assert claim is not None
        await store.finish(claim, ReportDraft("answer", destination="tg:1"), user_text="hi")
        assert await store.writable(0) is None
        figures = await store.metrics()
        assert figures["work"][("agent", "finished")] == 1 and figures["db_bytes"] > 0 and figures["wal_bytes"] == 0
        clock.advance(3 * 86400)
        pruned = await store.prune(2)
        assert pruned.get("history", 0) == 2
        before, after = await store.vacuum()
        assert before > 0 and after > 0
        assert await store.check() == []
    finally:
        await store.close()
