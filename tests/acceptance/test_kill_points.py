"""Kill points with real processes: `shopbot run` dies by SIGKILL at K1-K10, restarts clean, and the audit holds:
no admitted work lost, one report per turn, R1/R2 (`shopbot check`), nothing resent without a decision. K1-K10 run
on both stores (SQLite and PostgreSQL)."""
from __future__ import annotations

import pytest

from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start
from tests.support.audit import audit as full_audit
from tests.support.proc import OWNER, Product

TOKEN = "777:kill-point-token"


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> str | None:
    """The drill runs on both stores: None is a SQLite file in tmp_path, else a fresh PostgreSQL database's URL."""
    return str(request.getfixturevalue("pg_fresh_url")) if request.param == "postgres" else None


def owner_texts(api) -> list[str]:
    return [m.text for m in api.sent if m.chat_id == OWNER]


async def audit(product: Product, supplier=None) -> None:  # type: ignore[no-untyped-def]
    """`shopbot check` as a process, then the full audit of tests/support/audit.py against the servers' records."""
    rc, out = await product.check()
    assert rc == 0, out
    result = full_audit(product.db, [m.text for m in product.api.sent],
                        supplier.orders if supplier is not None else None,
                        owner_messages=sum(1 for u in product.api._all_updates.values()
                                           if "message" in u and u["message"]["from"]["id"] == OWNER))
    assert result.ok, result.violations


@pytest.mark.parametrize("point", ["K1", "K2", "K3", "K4", "K5", "K6"])
async def test_killed_before_the_reply_then_one_reply_after_restart(tmp_path, api, db, point):
    product = Product(tmp_path, api, db)
    api.post_message(OWNER, OWNER, "how much vanilla")
    await product.start(point)
    await product.died_at_fault()
    await product.start()
    try:
        await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=30)
        await product.wait_db("SELECT state FROM deliveries", [("confirmed",)], context=lambda: owner_texts(api))
        # C19: the receipt, whatever the point: its row went with the admission, so it is set after the restart
        await product.wait_db("SELECT state FROM receipts", [("set",)])
    finally:
        assert await product.stop() == 0
    assert len(owner_texts(api)) == 1 and "vanilla on hand: 9 tubs" in owner_texts(api)[0]
    assert product.query("SELECT source, state FROM work") == [(f"tg:{OWNER}:1", "finished")]
    assert api.reaction(OWNER, 1) == "👀"
    attempts = product.query("SELECT attempts FROM work")[0][0]
    if point == "K2":
        # the worker's own claim may be queued in the store's thread right behind the admission and commit before
        # the process dies at K2 (no await lies between them): then recovery counts a second attempt
        assert attempts in (1, 2)
    else:
        assert attempts == (2 if point in ("K3", "K4", "K5", "K6") else 1)
    await audit(product)


async def test_receipts_around_the_admission_commit(tmp_path, api):
    """K1 (killed before the admission commit): no receipt then, since nothing was stored; K19 (killed after the
    commit, before the reaction): the receipt is pending and comes after the restart, once. SQLite only: the receipt
    relay's moves are the same statements on PostgreSQL (tests/contract/store/test_receipts_contract.py)."""
    product = Product(tmp_path, api, None)
    api.post_message(OWNER, OWNER, "how much vanilla")
    await product.start("K1")
    await product.died_at_fault()
    assert api.reaction_calls == [] and product.query("SELECT * FROM receipts") == []
    await product.start("K19")
    await product.died_at_fault()
    assert api.reaction_calls == [] and product.query("SELECT state FROM receipts") == [("pending",)]
    await product.start()
    try:
        await api.wait_for(lambda: api.reaction(OWNER, 1) == "👀", timeout=30)
        await product.wait_db("SELECT state FROM receipts", [("set",)])
        await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=30)
    finally:
        assert await product.stop() == 0
    assert [c["message_id"] for c in api.reaction_calls] == [1] and len(owner_texts(api)) == 1
    await audit(product)


@pytest.mark.parametrize("point,server_has", [("K7", 0), ("K8", 1)])
async def test_killed_around_a_send_is_unknown_and_resent_only_after_resend(tmp_path, api, db, point,
                                                                          server_has):
    product = Product(tmp_path, api, db)
    api.post_message(OWNER, OWNER, "stock")
    await product.start(point)
    await product.died_at_fault()
    assert len(owner_texts(api)) == server_has
    await product.start()
    try:
        # after restart the delivery is unknown and never resent by itself; the owner gets one notice
        await api.wait_for(lambda: any("may not have delivered" in t for t in owner_texts(api)), timeout=30)
        await product.wait_db("SELECT state FROM deliveries WHERE report_id = 'r1.1'", [("unknown",)])
        notice = next(m for m in api.sent if "may not have delivered" in m.text)
        assert sum(t.endswith("r1.1") for t in owner_texts(api)) == server_has
        api.post_callback(OWNER, OWNER, notice.reply_markup["inline_keyboard"][0][0]["callback_data"],
                          notice.message_id)
        await product.wait_db("SELECT state FROM deliveries WHERE report_id = 'r1.1'", [("confirmed",)])
    finally:
        assert await product.stop() == 0
    assert sum(t.endswith("r1.1") for t in owner_texts(api)) == server_has + 1      # sent once more
    assert product.query("SELECT decision FROM resolutions") == [("resend",)]
    await audit(product)


async def test_a_turn_that_kills_every_time_fails_after_the_cap(tmp_path, api):
    product = Product(tmp_path, api, SHOPBOT_ATTEMPT_CAP="3")
    api.post_message(OWNER, OWNER, "stock")
    for _ in range(3):
        await product.start("K3")
        await product.died_at_fault()
    assert product.query("SELECT state, attempts FROM work") == [("running", 3)]
    await product.start("K3")      # recovery finds the cap reached: failed with an error report, no claim
    try:
        await api.wait_for(lambda: any("3 attempts" in t for t in owner_texts(api)), timeout=30)
    finally:
        assert await product.stop() == 0
    assert product.query("SELECT state FROM work") == [("failed",)]
    await audit(product)


async def test_drain_processes_what_is_due_and_exits_zero(tmp_path, api):
    product = Product(tmp_path, api)
    api.post_message(OWNER, OWNER, "how much chocolate")
    proc = await product.start(None, "--drain")
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "drained" in out.decode()
    assert len(owner_texts(api)) == 1
    await audit(product)


async def test_sigterm_exits_zero_and_a_second_instance_is_refused(tmp_path, api):
    import asyncio
    import sys
    product = Product(tmp_path, api)
    api.post_message(OWNER, OWNER, "stock")
    await product.start()
    try:
        await api.wait_for(lambda: len(owner_texts(api)) == 1, timeout=30)
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", env=product.env(None), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        _, err = await second.communicate()
        assert second.returncode != 0 and f"pid {product.proc.pid}" in err.decode()
    finally:
        assert await product.stop(timeout=10) == 0
    await audit(product)


@pytest.mark.parametrize("point", ["K9", "K10"])
async def test_killed_around_a_supplier_order_gives_exactly_one_order(tmp_path, api, db, point):
    from bot.sandbox.supplier import LocalSupplier
    async with LocalSupplier("supplier-token") as supplier:
        product = Product(tmp_path, api, db, SHOPBOT_SHOP_FILE=str(quiet_shop(tmp_path)),
                          SHOPBOT_SUPPLIER_URL=supplier.base_url, SHOPBOT_SUPPLIER_TOKEN="supplier-token")
        await product.start()
        try:
            await api.wait_for(lambda: sum(t.startswith("Order proposal") for t in owner_texts(api)) == 2, timeout=30)
        finally:
            assert await product.stop() == 0
        proposal = next(m for m in api.sent if m.text.startswith("Order proposal")
                        and "vanilla" in m.text.splitlines()[0])
        api.post_callback(OWNER, OWNER, proposal.reply_markup["inline_keyboard"][0][0]["callback_data"],
                          proposal.message_id)
        await product.start(point)            # admits the press, commits the approval, dies around the order
        await product.died_at_fault()
        assert len(supplier.orders) == (1 if point == "K10" else 0)
        await product.start()
        try:
            await api.wait_for(lambda: any("confirmed by the supplier" in t for t in owner_texts(api)), timeout=30)
            await product.wait_db("SELECT state FROM actions", [("delivered",)])
            # ... and on its card, edited in place after the new message
            await api.wait_for(lambda: any("confirmed by the supplier" in e["text"] for e in api.edited_texts),
                               timeout=30)
        finally:
            assert await product.stop() == 0
        assert len(supplier.orders) == 1                                     # one order per approved action
        posts = {k for method, k in supplier.requests if method == "POST"}
        assert len(posts) == 1                                               # the same key on every attempt
        assert product.query("SELECT cents, state FROM spending") == [(1800, "reserved")]   # reserved once
        assert sum("confirmed by the supplier" in t for t in owner_texts(api)) == 1
        # the approval's own reply may have been in flight when the process died: then it is unknown, never resent
        assert sum(t.startswith("Approved #") for t in owner_texts(api)) <= 1
        expected = "reconciled_found" if point == "K10" else "reconciled_absent"
        assert product.query("SELECT decision FROM action_decisions") == [(expected,)]
        await audit(product, supplier)


async def post_until_answered(url: str, update: dict, secret: str, timeout: float = 30.0) -> list:
    """What Telegram does with a webhook: post the update until a 2xx comes back; returns every outcome."""
    import asyncio

    import httpx
    outcomes: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(timeout=5) as client:
        while loop.time() < deadline:
            try:
                answer = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})
                outcomes.append(answer.status_code)
                if answer.status_code == 200:
                    return outcomes
            except httpx.HTTPError as exc:
                if not outcomes or outcomes[-1] != type(exc).__name__:
                    outcomes.append(type(exc).__name__)
            await asyncio.sleep(0.05)
    raise AssertionError(f"the webhook never answered 200: {outcomes}")


@pytest.mark.parametrize("point", ["K1", "K2"])
async def test_webhook_killed_before_the_answer_then_one_reply_after_restart(tmp_path, api, point):
    """K1/K2 on the webhook path: killed after reading the update (K1) or after its commit (K2), before answering.
    Telegram posts the update again until it gets 200; the owner gets exactly one reply."""
    secret = "kill-point-webhook-secret"
    product = Product(tmp_path, api, SHOPBOT_WEBHOOK_URL="https://bot.example/telegram/webhook",
                      SHOPBOT_WEBHOOK_SECRET=secret, SHOPBOT_HTTP_PORT="0")   # each start logs the port it bound

    async def webhook_url() -> str:
        return f"http://127.0.0.1:{await product.http_port()}/telegram/webhook"

    update = {"update_id": 1, "message": {"message_id": 1, "date": 1, "text": "how much vanilla",
                                          "chat": {"id": OWNER, "type": "private", "first_name": "L"},
                                          "from": {"id": OWNER, "is_bot": False, "first_name": "L"}}}
    killed = (await product.start(point)).pid
    first = await post_until_answered_or_killed(await webhook_url(), update, secret, product)
    await product.died_at_fault()
    assert product.query("SELECT count(*) FROM work") == [(0 if point == "K1" else 1,)]
    await product.start()
    try:
        outcomes = await post_until_answered(await webhook_url(), update, secret)
        await api.wait_for(lambda: len(owner_texts(api)) >= 1, timeout=30)
        await product.wait_db("SELECT state FROM deliveries", [("confirmed",)], context=lambda: owner_texts(api))
    finally:
        assert await product.stop() == 0
    assert first != 200 and outcomes[-1] == 200
    assert len(owner_texts(api)) == 1 and "vanilla on hand: 9 tubs" in owner_texts(api)[0]
    work = product.query("SELECT source, state, attempts FROM work")
    runs = product.query("SELECT worker_id, outcome FROM runs ORDER BY started_at")
    assert one_turn_after_a_kill(work, runs, killed, f"tg:{OWNER}:1") == [], (work, runs)
    rc, out = await product.check()
    assert rc == 0, out
    result = full_audit(product.db, [m.text for m in api.sent], owner_messages=1)
    assert result.ok, result.violations


def one_turn_after_a_kill(work: list[tuple], runs: list[tuple], killed_pid: int, source: str) -> list[str]:
    """What K1/K2 allow of the one item (`work`: source, state, attempts; `runs`: worker_id, outcome by start):
    finished by the restarted process. The killed one may have claimed it too: its worker can claim the item the
    moment the admission commits, before the webhook handler reaches K2 and the kill (the claim queued behind the
    admission on the store's writer thread). Such a run never answered (the process died) and the restart's
    recovery hands it back (outcome `released`, C10), so attempts is 2 and there is still one reply. Anything else
    (a run of the restarted process handed back, two finished runs, attempts not counting the runs) is a fault."""
    problems = []
    if [(s, state) for s, state, _ in work] != [(source, "finished")]:
        problems.append(f"the item is not finished once: {work}")
    elif work[0][2] != len(runs):
        problems.append(f"attempts {work[0][2]} for {len(runs)} runs")
    by_killed = [r[0].endswith(f"-{killed_pid}") for r in runs]      # worker ids end with the process id
    if [outcome for (_, outcome), mine in zip(runs, by_killed, strict=True) if not mine] != ["finished"]:
        problems.append(f"the restarted process did not finish it in one run: {runs}")
    if by_killed not in ([False], [True, False]) or (by_killed[0] and runs[0][1] != "released"):
        problems.append(f"a run besides one claim of the killed process, handed back by the restart: {runs}")
    return problems


def test_the_kill_drills_judgement_of_the_item_catches_a_second_turn():
    """Negative controls for `one_turn_after_a_kill`: the legal outcomes pass, each planted fault is named."""
    source, ok = "tg:1:1", [("tg:1:1", "finished", 1)]
    assert one_turn_after_a_kill(ok, [("worker-h-2", "finished")], 1, source) == []
    assert one_turn_after_a_kill([(source, "finished", 2)], [("worker-h-1", "released"), ("worker-h-2", "finished")],
                                 1, source) == []
    assert one_turn_after_a_kill([(source, "finished", 2)], [("worker-h-2", "released"), ("worker-h-2", "finished")],
                                 1, source)                               # the restarted process gave it back
    assert one_turn_after_a_kill([(source, "finished", 2)], [("worker-h-1", "finished"), ("worker-h-2", "finished")],
                                 1, source)                               # answered twice
    assert one_turn_after_a_kill([(source, "finished", 2)], [("worker-h-2", "finished")], 1, source)   # uncounted
    assert one_turn_after_a_kill([(source, "failed", 1)], [("worker-h-2", "failed")], 1, source)
    assert one_turn_after_a_kill([(source, "finished", 1)], [("worker-h-21", "finished")], 1, source) == []


async def post_until_answered_or_killed(url: str, update: dict, secret: str, product: Product) -> object:
    """Post until the armed process answers (it must not: it dies at its kill point) or dies; the last outcome."""
    import asyncio

    import httpx
    async with httpx.AsyncClient(timeout=5) as client:
        while product.proc is not None and product.proc.returncode is None:
            try:
                answer = await client.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})
                return answer.status_code
            except httpx.ConnectError:           # not listening yet
                await asyncio.sleep(0.05)
            except httpx.HTTPError as exc:       # the process died while holding the request
                return type(exc).__name__
    return "died"
