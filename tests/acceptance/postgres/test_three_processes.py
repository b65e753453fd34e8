"""Three `shopbot run` processes behind one local Bot API on one PostgreSQL database (issue 19), judged from outside.

SIGKILL the poller twice (a new process starts each time), SIGSTOP a worker past its lease while it holds a turn
(then SIGCONT), lose two replies at the Bot API (the owner answers one "I have it" and the other "Resend"). Then:
every owner message is answered by exactly one report that reached the owner; nothing reached the owner twice
without a decision (counted at the server by report id and part); the server never saw two pollers at once (a
newer getUpdates while an older poll's client still listened); each takeover came within the lease plus a few
seconds (recorded, and bounded generously); `shopbot check` exits 0; every process exits 0 on SIGTERM.
"""
from __future__ import annotations

import time

import httpx
import pytest

from bot.sandbox.bot_api import LocalBotApi
from tests.support.audit import IDENTITY
from tests.support.audit import audit as full_audit
from tests.support.cluster import Cluster, Member, overlaps, takeover
from tests.support.proc import OWNER

TOKEN = "777:three-processes-token"
LEASE_S = 2.0
TILL_TOKEN = "till-one-secret-token"
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


def owner_texts(api: LocalBotApi) -> list[str]:
    return [m.text for m in api.sent if m.chat_id == OWNER]


def answered(api: LocalBotApi, cluster: Cluster) -> dict[int, list[str]]:
    """Owner message id -> the report ids that answer it and reached the owner (each part at least once)."""
    reached: dict[str, set[int]] = {}
    for text in owner_texts(api):
        match = IDENTITY.search(text)
        if match:
            reached.setdefault(match.group(1), set()).add(int(match.group(2) or 1))
    parts = dict(cluster.query("SELECT report_id, count(*) FROM deliveries GROUP BY report_id"))
    out: dict[int, list[str]] = {}
    for source, report_id in cluster.query(
            "SELECT w.source, i.report_id FROM work w LEFT JOIN report_items i USING (work_id) "
            "WHERE w.source LIKE $1 ORDER BY w.work_id", f"tg:{OWNER}:%"):
        mid = int(source.rsplit(":", 1)[1])
        out.setdefault(mid, [])
        if report_id is not None and len(reached.get(report_id, ())) == parts.get(report_id, -1):
            out[mid].append(report_id)
    return out


async def ask(api: LocalBotApi, cluster: Cluster, text: str, timeout: float = 20.0) -> int:
    """The owner writes; returns the message id once its report reached the owner."""
    mid = api.post_message(OWNER, OWNER, text)["message"]["message_id"]
    await cluster.wait_until(lambda: answered(api, cluster).get(mid), timeout, f"message {mid} answered")
    return mid


async def lose_a_reply(api: LocalBotApi, cluster: Cluster, text: str, button: str) -> str:
    """The next sendMessage reaches the owner but its reply is lost: the report is unknown, the owner is asked
    once and presses `button` ("I have it" or "Resend"). Returns the report id."""
    notices = sum("may not have delivered" in t for t in owner_texts(api))
    api.inject("sendMessage", "drop_after_accept")
    api.post_message(OWNER, OWNER, text)
    await api.wait_for(lambda: sum("may not have delivered" in t for t in owner_texts(api)) > notices, timeout=20)
    notice = [m for m in api.sent if "may not have delivered" in m.text][-1]
    report_id = notice.text.split("my reply ", 1)[1].split(" ", 1)[0]
    assert cluster.query("SELECT state FROM deliveries WHERE report_id = $1", report_id) == [("unknown",)]
    data = next(b["callback_data"] for row in notice.reply_markup["inline_keyboard"] for b in row
                if b["text"] == button)
    api.post_callback(OWNER, OWNER, data, notice.message_id)
    await cluster.wait_until(lambda: cluster.query("SELECT state FROM deliveries WHERE report_id = $1", report_id)
                             == [("confirmed",)], 20, f"{report_id} resolved by {button}")
    return report_id


async def kill_the_poller(api: LocalBotApi, cluster: Cluster) -> tuple[float, str]:
    """SIGKILL the process holding the poller lease, start a new one in its place; the takeover (seconds, the new
    poller)."""
    leaders = await cluster.wait_leaders()
    old = leaders["poller"]
    await api.wait_for(lambda: any(p.client == old.label for p in api.polls), timeout=10)
    event_at = time.monotonic()
    assert await cluster.kill(old) == -9
    seen = await takeover(api, old, event_at, timeout=LEASE_S * 2 + 8)
    await cluster.wait_running(await cluster.start(old.label.rstrip("0123456789")))
    return seen.since_event, seen.new


async def stop_a_worker_past_its_lease(cluster: Cluster, until_resumed) -> Member:  # type: ignore[no-untyped-def]
    """A till count posted to a process armed with K3:stop, until that process claims one itself and freezes
    there holding the turn's lease; once another process has finished the turn (after the lease expired, by the
    database clock), `until_resumed()` runs and the frozen one is continued."""
    worker = await cluster.start("w", fault="K3:stop")
    await cluster.wait_until(lambda: cluster.holder_of(worker), 20, "the armed worker registered")
    headers = {"Authorization": f"Bearer {TILL_TOKEN}"}
    port = await cluster.wait_port(worker, 20)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as till:
        for n in range(1, 16):
            response = await till.post("/till/counts", headers=headers,
                                       json={"request_id": f"stop-{n}", "counts": {"vanilla": 9}})
            assert response.status_code == 202, response.text
            source = f"till:1:stop-{n}"

            def settled(source=source) -> bool:   # type: ignore[no-untyped-def]
                return "stopping process" in worker.output() or cluster.query(
                    "SELECT state FROM work WHERE source = $1", source) == [("finished",)]

            await cluster.wait_until(settled, 20, f"{source} claimed")
            if "stopping process" in worker.output():
                cluster.pause(worker)      # already stopped by itself; recorded so that terminate continues it
                break
        else:
            raise AssertionError("the armed worker never claimed a till count of its own")
    await cluster.wait_until(lambda: cluster.query("SELECT state FROM work WHERE source = $1", source)
                             == [("finished",)], LEASE_S * 3 + 15, f"{source} finished by another process")
    await until_resumed()
    cluster.resume(worker)
    return worker


async def test_three_processes_survive_kills_a_stopped_worker_and_lost_replies(tmp_path, api, pg_fresh_url):
    cluster = Cluster(tmp_path, api, pg_fresh_url, lease_s=LEASE_S, SHOPBOT_TILL_TOKENS=f"1:{TILL_TOKEN}")
    takeovers: list[tuple[float, str]] = []
    try:
        for base in ("a", "b", "c"):
            await cluster.start(base)
        await cluster.wait_leaders(timeout=30)
        started_up = time.monotonic()
        await ask(api, cluster, "how much vanilla")
        takeovers.append(await kill_the_poller(api, cluster))
        await ask(api, cluster, "how much chocolate")
        await lose_a_reply(api, cluster, "stock", "I have it")

        async def meanwhile() -> None:    # while the worker is frozen: the others answer, one reply is lost
            await lose_a_reply(api, cluster, "how much strawberry", "Resend")

        stopped = await stop_a_worker_past_its_lease(cluster, meanwhile)
        takeovers.append(await kill_the_poller(api, cluster))
        await ask(api, cluster, "brief")
        await cluster.wait_leaders(timeout=20)
        await cluster.wait_until(lambda: "stopping process" in stopped.output() and not stopped.stopped, 5,
                                 "the stopped worker resumed")
        await cluster.wait_until(lambda: cluster.query(
            "SELECT count(*) FROM work WHERE state IN ('pending', 'running')") == [(0,)]
            and cluster.query("SELECT count(*) FROM deliveries WHERE state IN ('pending', 'sending')") == [(0,)],
            20, "nothing open")
        codes = await cluster.terminate_all()
    finally:
        await cluster.kill_all()
    print(f"takeovers (seconds after the SIGKILL, new poller): {takeovers}")
    assert codes and set(codes.values()) == {0}, (codes, cluster.describe())
    assert len(cluster.members) == 6
    # no two pollers after start-up: no getUpdates ended by a newer one while its own client still listened
    assert overlaps(api, since=started_up) == [], overlaps(api, since=started_up)
    for seconds, _new in takeovers:
        assert seconds <= LEASE_S * 2 + 5      # within the lease plus a renewal period, with room for a busy CI
    # every owner message answered by exactly one report that reached the owner
    replies = answered(api, cluster)
    owner_messages = [u["message"]["message_id"] for u in api._all_updates.values()
                      if "message" in u and u["message"]["from"]["id"] == OWNER]
    assert sorted(replies) == sorted(owner_messages) and len(owner_messages) == 5
    assert all(len(reports) == 1 for reports in replies.values()), replies
    # the frozen worker's turn: one report, and its own late finish refused (nothing of its run written)
    assert cluster.query("SELECT count(*) FROM report_items i JOIN work w USING (work_id) "
                         "WHERE w.source LIKE 'till:1:stop-%' AND w.state = 'finished'")[0][0] >= 1
    rc, out = await cluster.check()
    assert rc == 0, out
    result = full_audit(pg_fresh_url, [m.text for m in api.sent if m.chat_id == OWNER],
                        owner_messages=len(owner_messages))
    assert result.ok, result.violations
    assert result.figures["duplicated"] == 0
    assert sorted(d for (d,) in cluster.query("SELECT decision FROM resolutions")) == ["delivered", "resend"]
