"""K17 with real `shopbot run` processes on a real PostgreSQL: two processes whose own clocks are off by minutes
in opposite directions (SHOPBOT_CLOCK=skewed:+600 and skewed:-600, test mode) share one database. Leases are judged
by the database clock, so neither steals the other's live leases (every turn finishes once, though each outlasts the
lease and lives by renewal), and an expired one is still recovered by the other (a process paused in its model call
past its lease). Audited from outside: the records, the fake model server's requests, and a witness on the database
(`SWEEP_WITNESS`) that notes, by the database clock, whether each lease a sweep ended had lapsed."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import psycopg
import pytest

from store import ManualClock, Occurrence, WorkKind, open_store
from tests.support import DATA
from tests.support.audit import audit
from tests.support.fake_model_servers import FakeModelServer, FakeResponse, openai_text

LEASE_S = "1"
TURN_S = 1.5             # each model call outlasts the lease: the turn lives by renewal alone
SKEW = {"fast": "skewed:+600", "slow": "skewed:-600"}

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states (Linux)")


def slow_answers(n: int, delay_s: float = TURN_S) -> list[FakeResponse]:
    answer = openai_text("vanilla on hand: 9 tubs")
    return [FakeResponse(answer.status, answer.body, delay_s=delay_s) for _ in range(n)]


class Proc:
    def __init__(self, tmp_path: Path, url: str, model: FakeModelServer, name: str, **settings: str) -> None:
        self.log = tmp_path / f"{name}.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        self.env.update({"SHOPBOT_DB": url, "SHOPBOT_MODEL": "openai:fake", "SHOPBOT_MODEL_BASE_URL":
                         model.openai_base_url, "SHOPBOT_HTTP_PORT": "-1", "SHOPBOT_DEBOUNCE_MS": "0",
                         "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml"), "SHOPBOT_LOG_FILE": str(self.log),
                         "SHOPBOT_LOG_LEVEL": "INFO", "SHOPBOT_LEASE_S": LEASE_S, "SHOPBOT_TEST_MODE": "1",
                         # one turn at a time each, so that both processes take turns (the drill judges both)
                         "SHOPBOT_WORKER_CONCURRENCY": "1",
                         "SHOPBOT_CLOCK": SKEW[name], **settings})
        self.proc: asyncio.subprocess.Process | None = None
        self.pid = 0

    async def start(self) -> int:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", env=self.env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        return self.proc.pid

    async def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), 20)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()

    def turns_finished(self) -> int:
        return self.log.read_text().count("turn finished") if self.log.exists() else 0


def rows(url: str, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]  # type: ignore[arg-type]


async def until(predicate, timeout: float = 30.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"not reached before the deadline: {what}"
        await asyncio.sleep(0.05)


async def admit(url: str, n: int) -> None:
    store = await open_store(url, ManualClock(__import__("datetime").datetime.now(__import__("datetime").UTC)),
                             debounce_ms=0)
    try:
        await store.admit_many([Occurrence(f"k17:{i}", f"tg:{i}", f"how much vanilla {i}", WorkKind.AGENT, None)
                                for i in range(n)])
    finally:
        await store.close()


# The drill's own instrument on its fresh database (the product never reads it): each run a sweep ends is noted with
# its lease's expiry and the database clock inside that sweep's transaction. A lease taken while live (judged on a
# process's clock, ten minutes fast) shows as an expiry after the sweep; a lease that lapsed because its process
# was starved past it (two cores under the suite's parallel load) shows at or before it, and C15 allows it: the
# turn goes back to pending and runs again, and only one run may finish.
SWEEP_WITNESS = """
CREATE TABLE k17_sweeps (run_id text, lease_expires_at timestamptz, swept_at timestamptz);
CREATE FUNCTION k17_sweep_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.outcome = 'expired' AND OLD.ended_at IS NULL THEN
        INSERT INTO k17_sweeps VALUES (OLD.run_id, OLD.lease_expires_at, clock_timestamp());
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER k17_sweep_seen BEFORE UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION k17_sweep_seen();
"""


def watch_sweeps(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SWEEP_WITNESS)   # type: ignore[arg-type]


def lease_violations(url: str, items: int, requests: list[str]) -> list[str]:
    """C15 as K17 states it, judged on the database: no lease taken while live; each item finished by exactly one
    run, every other run of it ended by a sweep of a lapsed lease; a model request only from a run of its own
    (`requests`: each request's body; the turn's text names its item)."""
    problems = [f"live lease taken: run {run} expiring {expiry} swept at {swept} (database clock)"
                for run, expiry, swept in rows(url, "SELECT run_id, lease_expires_at, swept_at FROM k17_sweeps "
                                                    "WHERE lease_expires_at > swept_at")]
    runs = rows(url, "SELECT w.payload, r.run_id, r.outcome, s.run_id IS NOT NULL FROM runs r "
                     "JOIN work w ON w.work_id = r.anchor LEFT JOIN k17_sweeps s ON s.run_id = r.run_id "
                     "ORDER BY r.started_at")
    for i in range(items):
        text = f"how much vanilla {i}"
        mine = [(run, outcome, swept) for payload, run, outcome, swept in runs if payload == text]
        if [outcome for _, outcome, _ in mine].count("finished") != 1:
            problems.append(f"{text!r} not finished by exactly one run: {mine}")
        problems += [f"{text!r}: run {run} ended {outcome} without a sweep of its lapsed lease"
                     for run, outcome, swept in mine if outcome != "finished" and not (outcome == "expired" and swept)]
        asked = sum(re.search(rf"{text}(?!\d)", body) is not None for body in requests)
        if not 1 <= asked <= len(mine):
            problems.append(f"{text!r}: {asked} model requests for {len(mine)} runs")
    if rows(url, "SELECT count(*), count(DISTINCT anchor) FROM reports") != [(items, items)]:
        problems.append(f"not one report per item: {rows(url, 'SELECT anchor, report_id FROM reports')}")
    return problems


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


async def skewed_pair(tmp_path: Path, url: str, while_both_hold=None) -> tuple[Proc, Proc, list[str]]:  # type: ignore[no-untyped-def]
    """Four turns on two processes at +600 s and -600 s until all finished; `while_both_hold(url)` runs once both hold
    a turn. The processes, and the model requests' bodies."""
    async with FakeModelServer(slow_answers(8)) as model:
        fast, slow = (Proc(tmp_path, url, model, name) for name in ("fast", "slow"))
        await admit(url, 4)
        watch_sweeps(url)
        try:
            fast.pid = await fast.start()
            slow.pid = await slow.start()
            # while turns run on both: the live leases, judged by the database clock and by a skewed one
            await until(lambda: rows(url, "SELECT count(*) FROM runs WHERE ended_at IS NULL") == [(2,)],
                        what="both processes holding a turn")
            judged = rows(url, "SELECT lease_expires_at > clock_timestamp(), "
                               "lease_expires_at > clock_timestamp() + interval '600 seconds' "
                               "FROM runs WHERE ended_at IS NULL")
            # negative control: on the fast process's own clock each live lease looks long expired; a lease judged
            # there would be taken over at once
            assert judged == [(True, False), (True, False)]
            if while_both_hold is not None:
                while_both_hold(url)
            await until(lambda: rows(url, "SELECT count(*) FROM work WHERE state = 'finished'") == [(4,)],
                        what="every turn finished")
        finally:
            assert await asyncio.gather(fast.stop(), slow.stop()) == [0, 0]
        return fast, slow, [json.dumps(r.body) for r in model.requests]


async def test_two_processes_skewed_ten_minutes_apart_never_take_each_others_live_leases(tmp_path, pg_fresh_url):
    fast, slow, requests = await skewed_pair(tmp_path, pg_fresh_url)
    # no live lease was taken and every turn finished once; a lease lapsed under load is swept and its turn re-run
    assert lease_violations(pg_fresh_url, 4, requests) == []
    # both worked: finished runs of each (the database's record; a log's `turn finished` line can be missing, as
    # when a renewal that meets the committed finish logs `lease lost` and cancels the turn after the commit)
    finishers = {w.rpartition("-")[2] for (w,) in rows(pg_fresh_url, "SELECT worker_id FROM runs "
                                                                    "WHERE outcome = 'finished'")}
    assert finishers == {str(fast.pid), str(slow.pid)}, finishers
    for proc, lead in ((fast, "+600"), (slow, "-600")):
        assert f"this process's clock is {lead}" in proc.log.read_text()   # each measured its own skew
    result = audit(pg_fresh_url, [])
    assert result.ok, result.violations


def take_a_live_lease(url: str) -> None:
    """What a sweep judging on the fast process's clock would do: a live run ended `expired`, its item pending."""
    with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.RawCursor) as conn, conn.transaction():
        [(run,)] = conn.execute("SELECT run_id FROM runs WHERE ended_at IS NULL AND lease_expires_at > "
                                "clock_timestamp() LIMIT 1 FOR UPDATE").fetchall()
        conn.execute("UPDATE work SET state = 'pending', run_id = NULL WHERE run_id = $1", (run,))
        conn.execute("UPDATE runs SET ended_at = clock_timestamp(), outcome = 'expired' WHERE run_id = $1", (run,))


async def test_the_drill_fails_when_a_live_lease_is_taken_while_both_processes_run(tmp_path, pg_fresh_url):
    """Negative control of the drill itself: the same two processes, and one live lease taken mid-turn."""
    _, _, requests = await skewed_pair(tmp_path, pg_fresh_url, take_a_live_lease)
    problems = lease_violations(pg_fresh_url, 4, requests)
    assert [p.startswith("live lease taken: run ") for p in problems] == [True], problems


async def test_the_sweep_witness_names_a_live_lease_taken_and_passes_a_lapsed_one(pg_fresh_url):
    """Negative control of `lease_violations`: a claim's live lease ended as a sweep on a clock ten minutes fast
    would end it is named; a lease that lapsed on the database clock, ended by the store's own sweep, is not."""
    from datetime import UTC, datetime
    await admit(pg_fresh_url, 1)
    watch_sweeps(pg_fresh_url)
    store = await open_store(pg_fresh_url, ManualClock(datetime.now(UTC)), debounce_ms=0, lease_s=0.2)
    try:
        lapsed = await store.claim("worker-lapsed")
        assert lapsed is not None
        await until(lambda: rows(pg_fresh_url, "SELECT bool_and(lease_expires_at < clock_timestamp()) FROM runs")
                    == [(True,)], 10, "the lease lapsed on the database clock")
        assert (await store.sweep_expired()).released
        live = await store.claim("worker-live")
        assert live is not None and live.anchor == lapsed.anchor   # the lapsed turn, again
    finally:
        await store.close()
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        conn.execute("UPDATE runs SET lease_expires_at = clock_timestamp() + interval '600 seconds' "
                     "WHERE run_id = %s", (live.run_id,))
        conn.execute("UPDATE runs SET ended_at = clock_timestamp(), outcome = 'expired' WHERE run_id = %s",
                     (live.run_id,))         # taken while live: what judging by the fast process's clock would do
    problems = lease_violations(pg_fresh_url, 1, ['{"content": "how much vanilla 0"}'])
    taken = [p for p in problems if p.startswith("live lease taken")]
    assert len(taken) == 1 and f"run {live.run_id} " in taken[0], problems     # the live one, not the lapsed one
    assert not any("without a sweep" in p for p in problems), problems       # both were ended by a sweep
    assert any("not finished by exactly one run" in p for p in problems), problems   # and the turn never finished


# The slow process rescues: on its own clock (ten minutes behind) the lease would not lapse for ten minutes more.
@pytest.mark.parametrize("paused,rescuer", [("fast", "slow")])
async def test_an_expired_lease_is_recovered_by_the_other_skewed_process(tmp_path, pg_fresh_url, paused, rescuer):
    async with FakeModelServer(slow_answers(4, 0.1)) as model:
        held = Proc(tmp_path, pg_fresh_url, model, paused, SHOPBOT_FAULT="K4:stop")
        other = Proc(tmp_path, pg_fresh_url, model, rescuer)
        await admit(pg_fresh_url, 1)
        try:
            pid = await held.start()
            await until(lambda: process_state(pid) == "T", what="paused in its model call")
            await other.start()
            # past the lease on the database clock: then the other process's sweep takes the turn over
            await until(lambda: rows(pg_fresh_url, "SELECT outcome FROM runs ORDER BY started_at") == [("expired",),
                                                                                                 ("finished",)],
                        what="expired, then finished by the other")
            os.kill(pid, signal.SIGCONT)                     # the paused one resumes: its finish is refused
            await until(lambda: "turn discarded" in held.log.read_text() or "lease lost" in held.log.read_text(),
                        what="the resumed process gives up its run")
        finally:
            assert await asyncio.gather(held.stop(), other.stop()) == [0, 0]
        # the rescuer's call, and the paused one's if its request left before the process froze (K4 sits just after
        # the call was started)
        assert len(model.requests) in (1, 2)
    assert rows(pg_fresh_url, "SELECT state, attempts FROM work") == [("finished", 2)]
    assert rows(pg_fresh_url, "SELECT count(*) FROM reports") == [(1,)]
    assert other.turns_finished() == 1 and held.turns_finished() == 0
    result = audit(pg_fresh_url, [])
    assert result.ok, result.violations
