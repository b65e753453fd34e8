"""`/metrics` during a real run: it moves as the work does (a finished turn, a pending item, a failed item, an unknown
delivery each show), parses with prometheus_client's own parser, carries no user data in any label, and every metric
on the page is documented in docs/operations.md."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bot.sandbox.local_setup import OWNER_ID, local_product

ROOT = Path(__file__).resolve().parents[2]
FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0",
        "SHOPBOT_SHOP_FILE": str(ROOT / "tests" / "support" / "data" / "shop_calm.toml")}


async def scrape(run) -> dict[tuple[str, tuple], float]:
    """Every sample of the page as {(name, sorted labels): value}, parsed by prometheus_client."""
    await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"http://127.0.0.1:{run.app.parts.http.port}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        assert family.name.startswith("shopbot_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def wait_metric(run, predicate, timeout: float = 10.0) -> dict:
    """Scrape until `predicate(page)` holds, with a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    page: dict = {}
    while loop.time() < deadline:
        page = await scrape(run)
        if predicate(page):
            return page
        await asyncio.sleep(0.05)
    raise AssertionError(f"metric condition not met; last page: {sorted(page.items())[:80]}")


async def test_metrics_move_as_the_work_does_and_parse_with_prometheus_own_parser() -> None:
    async with local_product(FAST) as run:
        store = run.app.parts.store
        first = await scrape(run)
        assert value(first, "shopbot_part_up", part="worker") == 1
        assert value(first, "shopbot_database_bytes", file="main") > 0

        # a finished turn: the turn, the model call and the relay's confirmed send show
        run.api.post_message(OWNER_ID, OWNER_ID, "stock")
        await run.replies(1)
        page = await wait_metric(run, lambda s: value(s, "shopbot_turns_total", outcome="finished") >= 1
                                 and value(s, "shopbot_relay_send_seconds_count", outcome="confirmed") >= 1)
        assert value(page, "shopbot_work_items", kind="agent", state="finished") == 1
        assert value(page, "shopbot_model_call_seconds_count", outcome="ok") >= 1
        assert value(page, "shopbot_turn_seconds_count") >= 1
        assert value(page, "shopbot_arrivals_per_second") > 0

        # a pending item: the worker is stopped, the owner's next message waits
        run.app.parts.worker.stop()
        posted = run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")
        await run.admitted(posted["update_id"])
        page = await wait_metric(run, lambda s: value(s, "shopbot_work_items", kind="agent", state="pending") == 1)
        assert value(page, "shopbot_oldest_pending_seconds") >= 0

        # a failed item: the waiting work is cancelled (forget), so it fails with an error report
        await store.forget(f"tg:{OWNER_ID}", "operator:test")
        await run.replies(1)
        page = await wait_metric(run, lambda s: value(s, "shopbot_work_items", kind="agent", state="failed") == 1)
        assert value(page, "shopbot_work_items", kind="agent", state="pending") == 0

        # an unknown delivery: Telegram takes the message and the reply is lost
        run.api.inject("sendMessage", "drop_after_accept")
        await store.notice("test", "1", "a notice whose reply is lost", f"tg:{OWNER_ID}")
        page = await wait_metric(run, lambda s: value(s, "shopbot_deliveries", state="unknown") >= 1)
        assert value(page, "shopbot_unknown_awaiting_decision", what="delivery") >= 1
        assert value(page, "shopbot_relay_send_seconds_count", outcome="unknown") == 1

        # no label carries user data: every label value is a code-made word, never the owner's id or a text
        for (_, labels) in page:
            for _, label_value in labels:
                assert re.fullmatch(r"[a-z_]+|\+Inf|[0-9.e+]+", label_value), label_value
                assert str(OWNER_ID) not in label_value


async def test_every_metric_on_the_page_is_documented_in_operations_md() -> None:
    page = (ROOT / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"^\| `(shopbot_[a-z_]+)`", page, flags=re.M))
    async with local_product(FAST) as run:
        await scrape(run)
        await asyncio.wait_for(run.app.parts.http.started.wait(), 10)
        async with httpx.AsyncClient(timeout=10) as client:
            text = (await client.get(f"http://127.0.0.1:{run.app.parts.http.port}/metrics")).text
    served = {family.name + ("_total" if family.type == "counter" else "")
              for family in text_string_to_metric_families(text)}
    assert served == documented, f"served, not documented: {served - documented}; " \
                                 f"documented, not served: {documented - served}"
    assert "/metrics" in page and "do not expose" in page.lower()


async def test_the_incremental_counts_by_state_always_equal_a_full_count(store, raw):
    """The scrape counts ended rows once (store/shop_records.py `Tally`); after every move the result equals a GROUP BY
    over the whole table, while an old open item holds the frontier back and after it ends."""
    from store import Occurrence, ReportDraft

    tallies: dict = {}

    def full() -> tuple[dict, dict]:
        work = {(k, s): n for k, s, n in raw.execute("SELECT kind, state, count(*) FROM work GROUP BY kind, state")}
        parts = {s: n for s, n in raw.execute("SELECT state, count(*) FROM deliveries GROUP BY state")}
        return work, parts

    async def same() -> None:
        figures = await store.metrics(tallies=tallies)
        work, parts = full()
        assert {k: v for k, v in figures.work.items() if v} == work
        assert {k: v for k, v in figures.deliveries.items() if v} == parts

    await store.admit(Occurrence("tg:9:1", "tg:9", "old and open", destination="tg:9"))     # holds the frontier
    for i in range(2, 8):
        await store.admit(Occurrence(f"tg:{i}:1", f"tg:{i}", "stock", destination=f"tg:{i}"))
        claim = await store.claim("w", skip_sessions=["tg:9"])
        await store.finish(claim, ReportDraft("ok", destination=f"tg:{i}"))
        await same()
    for delivery in await store.due_deliveries():
        await store.mark_sending(delivery.delivery_id)
        await store.mark_confirmed(delivery.delivery_id, "1")
        await same()
    assert tallies["work"].upto == 0 and tallies["deliveries"].upto > 0   # work 1 is open: nothing below it yet
    claim = await store.claim("w")
    await store.fail(claim, ReportDraft("failed", destination="tg:9", is_error=True))
    await same()
    assert tallies["work"].upto == 7                                       # everything ended: counted once
    await store.admit(Occurrence("tg:9:2", "tg:9", "new", destination="tg:9"))
    await same()


async def test_a_scrape_never_takes_the_write_lock() -> None:
    """While another connection holds the write lock, /metrics still answers 200 (a read snapshot; a write would
    wait out the busy timeout and fail with StoreBusy)."""
    import sqlite3
    async with local_product(FAST) as run:
        await scrape(run)
        other = sqlite3.connect(str(run.app.cfg.db), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            page = await scrape(run)
            assert value(page, "shopbot_part_up", part="worker") == 1
        finally:
            other.execute("ROLLBACK")
            other.close()
