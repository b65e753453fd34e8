"""Fuzzing of every input edge (issue 7, hostile input): Telegram updates, webhook bodies and headers, till bodies,
shop files. Each input must give a clear error or a deliberate refusal, change nothing it should not, and never
crash the process.

- Telegram updates through `Ingress.admit_raw` (the Router), in-process on a real SQLite file: missing fields,
  wrong types, huge texts, unknown update kinds, forged chat ids (chat id != sender id), groups, bots, callbacks with
  garbage data or nonces never issued. No exception escapes; every update is counted under exactly one outcome;
  work appears only for an allow-listed owner writing in their own private chat; refusals are counted; no text is
  logged; the rows that existed are unchanged; the invariants hold.
- Webhook bodies and headers over real HTTP (`local_product` with a webhook secret, running in its own thread and
  event loop so hypothesis can drive it synchronously): a wrong, missing or long secret is 401 and changes nothing;
  with the secret every body is 200 (never 5xx: only a failed commit may be) and makes work only when valid.
- Till bodies over real HTTP against `POST /till/counts` of the same product (tokens from SHOPBOT_TILL_TOKENS), and
  `parse_counts_body` directly with many more examples: 401 without a valid token, 415/413/400 with the error shape,
  202 and exactly one stored row (canonical payload) for a valid body, 409 for a reused request id, never 500.
- Shop files through `parse_shop`: mutated versions of the example shop and random text give a ShopSpec or a
  ShopFileError (a ValueError) with a message, never another exception.

Bugs found are pinned by strict-xfail tests below (named test_bug_*); tests/support/strategies.py KNOWN_BUGS keeps those
input classes out of the general fuzzing until they are fixed.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import sqlite3
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from telegram import Bot

from bot.sandbox.local_setup import OWNER_ID, local_product
from bot.shop_file import ShopFileError, parse_shop
from producers.telegram.polling import Ingress
from producers.telegram.webhook import MAX_WEBHOOK_BYTES
from producers.till_request import MAX_BODY_BYTES, TillCounts, TillError, parse_counts_body
from store import ManualClock, SqliteStore, Store
from store.sqlite import invariants
from tests.support import DATA
from tests.support.strategies import (
    KNOWN_BUGS,
    OWNER,
    OWNER2,
    PROFILE,
    STRANGER,
    TILL_ITEMS,
    canonical_till,
    content_types,
    examples,
    header_value,
    json_values,
    looks_owner_private,
    mutated_shop,
    plain_text,
    raw_update,
    telegram_update,
    till_body,
    till_body_valid,
    toml_document,
    valid_till_body,
)

# the long profile runs far past pytest-timeout's 180 s default (pyproject.toml)
pytestmark = [pytest.mark.timeout(3600)] if PROFILE != "ci" else []

assert OWNER == OWNER_ID
START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
CALM = DATA / "shop_calm.toml"
BOT = Bot("123456:fuzz-token")          # never initialised: used only to parse updates
OWNERS = frozenset({OWNER})
REFUSAL_OUTCOMES = {"no_sender", "bot", "not_private", "stranger", "malformed", "unsupported", "chat_member",
                    "refused"}

# Figures for docs/reliability.md: every fuzz test records how many inputs it sent and of which kinds.
FUZZED: dict[str, int] = {}


def fuzzed(kind: str, n: int = 1) -> None:
    FUZZED[kind] = FUZZED.get(kind, 0) + n


# Parsers that may meet a RecursionError run in a thread of their own: on CPython 3.11 a RecursionError raised inside
# the json C scanner can leave the thread's recursion counter off, and pytest's own ast.parse then fails on that thread.
ISOLATED = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fuzz-parser")


def isolated(fn, *args):
    """fn(*args) on the isolated thread: ("ok", result) or ("raised", exception type name, message)."""
    def call():
        try:
            return "ok", fn(*args)
        except BaseException as exc:
            return "raised", type(exc).__name__, str(exc)[:200], isinstance(exc, ShopFileError)
    return ISOLATED.submit(call).result()


def owner_message(update_id: int, message_id: int, text: Any, chat: Any = OWNER, sender: Any = OWNER) -> dict:
    return {"update_id": update_id, "message": {"message_id": message_id, "date": 1, "text": text,
                                                 "chat": {"id": chat, "type": "private", "first_name": "L"},
                                                 "from": {"id": sender, "is_bot": False, "first_name": "L"}}}


def owner_press(update_id: int, callback_id: str, data: Any, chat: Any = OWNER, sender: Any = OWNER,
                chat_type: str = "private") -> dict:
    return {"update_id": update_id, "callback_query": {
        "id": callback_id, "from": {"id": sender, "is_bot": False, "first_name": "L"}, "chat_instance": "1",
        "data": data, "message": {"message_id": 1, "date": 1, "chat": {"id": chat, "type": chat_type}}}}


# ---- in-process Router fuzzing ------------------------------------------------------------------------------------

class LogSink(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class Snapshot:
    work: dict[int, tuple]
    counters: dict[str, int]
    resolutions: int
    decided_prompts: int


def snapshot(path: Path) -> Snapshot:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return Snapshot(
            {r[0]: tuple(r[1:]) for r in conn.execute(
                "SELECT work_id, source, session, kind, payload, destination, state FROM work")},
            dict(conn.execute("SELECT kind, sum(count) FROM counters GROUP BY kind").fetchall()),
            conn.execute("SELECT count(*) FROM resolutions").fetchone()[0],
            conn.execute("SELECT count(*) FROM prompts WHERE decided_at IS NOT NULL").fetchone()[0])
    finally:
        conn.close()


def in_fresh_loop(main):
    """Run `main(path)` on a fresh event loop against a fresh database file (hypothesis tests stay synchronous)."""
    tmp = Path(tempfile.mkdtemp(prefix="shopbot-fuzz-"))
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main(tmp / "shop.sqlite3"))
    finally:
        loop.close()
        shutil.rmtree(tmp, ignore_errors=True)


async def admit(path: Path, batch: list, owners: frozenset[int] = OWNERS, capacity: int = 100):
    """Admit `batch` after a first owner message; returns (result, before, after, log lines, None)."""
    store = await SqliteStore.open(path, ManualClock(START), capacity=capacity, debounce_ms=0)
    try:
        ingress = Ingress(store, BOT, None, lambda: owners)   # type: ignore[arg-type] - no sender: nothing is sent
        await ingress.admit_raw([owner_message(10**9, 10**9, "stock")])
        before = snapshot(path)
        sink = LogSink()
        logger = logging.getLogger("shopbot")
        level = logger.level
        logger.addHandler(sink)
        logger.setLevel(logging.DEBUG)
        try:
            result = await ingress.admit_raw(batch)
        finally:
            logger.removeHandler(sink)
            logger.setLevel(level)
        await store.flush_counts()          # refusals are counted in memory first (C1)
        after = snapshot(path)
        assert invariants.check(path) == []
        return result, before, after, sink.lines, None
    finally:
        await store.close()


def private_texts(batch: list) -> set[str]:
    """Texts, callback data and names of the batch that must never reach a log line."""
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in ("text", "data", "first_name") and len(value) >= 8 \
                and not value.isdigit() and value.strip():
            found.add(value)
    walk(batch)
    return found


def note_event(text: str) -> None:
    """hypothesis.event inside a hypothesis test; nothing in a plain test."""
    try:
        event(text)
    except InvalidArgument:
        pass


def check_routed(batch: list, result, before: Snapshot, after: Snapshot, logs: list[str],
                 owners: frozenset[int] = OWNERS) -> None:
    for outcome in result.outcomes:
        note_event(f"outcome {outcome}")
    # every update is counted under exactly one outcome
    assert sum(result.outcomes.values()) == len(batch), result.outcomes
    # what existed is unchanged (the first owner message may be repeated: a duplicate or a conflict)
    assert {k: after.work[k] for k in before.work} == before.work
    new = {k: v for k, v in after.work.items() if k not in before.work}
    owner_updates = [u for u in batch if looks_owner_private(u, owners)]
    if not owner_updates:
        assert new == {}, f"work from a non-owner: {new}"
    assert sum(1 for w in new.values() if w[1] != "notice:busy") <= len(owner_updates)
    for source, session, kind, payload, destination, state in new.values():
        match = re.fullmatch(r"tg:(-?\d+)", destination or "")
        assert match, f"work {source} goes to {destination!r}, which is no chat"
        chat = int(match.group(1))
        assert chat in owners
        assert session in (f"tg:{chat}", "notice:busy")
        assert re.fullmatch(rf"(tg:{chat}:-?\d+|edit:{chat}:-?\d+:-?\d+|cb:.+|notice:busy:{chat}:.+)", source), source
        assert kind in ("agent", "control", "notice")
        if kind == "agent":
            assert len(payload) <= 4096 and state == "pending"
        else:
            assert state in ("finished", "failed")           # answered inside its admission
    # refusals, strangers and malformed input are counted (C1), one count each
    counted = sum(after.counters.values()) - sum(before.counters.values())
    assert counted == sum(n for k, n in result.outcomes.items() if k in REFUSAL_OUTCOMES)
    # nothing was decided by a press: no prompt was ever issued in these tests
    assert (after.resolutions, after.decided_prompts) == (before.resolutions, before.decided_prompts)
    # logged by id, never the text (C1)
    for text in private_texts(batch):
        assert not any(text in line for line in logs), f"text {text[:30]!r} reached the log"


@settings(max_examples=examples(120))
@given(batch=st.lists(raw_update, min_size=1, max_size=6))
def test_telegram_updates_never_crash_and_only_owners_make_work(batch: list) -> None:
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)
    fuzzed("telegram update (Router)", len(batch))


@settings(max_examples=examples(40))
@given(batch=st.lists(telegram_update(mutate=False), min_size=1, max_size=6))
def test_well_formed_updates_from_anyone_only_owners_make_work(batch: list) -> None:
    """Unmutated updates (so PTB parses them): forged chat ids, groups, bots, strangers, commands, edits, presses."""
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)
    owner_texts = [u["message"]["text"] for u in batch
                   if "message" in u and looks_owner_private(u, OWNERS) and isinstance(u["message"].get("text"), str)]
    new_agent = [w for k, w in after.work.items() if k not in before.work and w[2] == "agent"]
    # agent work comes from an owner's plain text (cut to Telegram's limit) or the /brief command, nothing else
    plain = [t for t in owner_texts if not t.startswith("/")]
    briefs = [t for t in owner_texts if t.startswith("/") and "brief" in t.lower()]
    assert len(new_agent) <= len(plain) + len(briefs)
    from producers.telegram.routing import _clean  # lone surrogates are stored as U+FFFD (they are not text)
    for w in new_agent:
        assert any(_clean(t)[:4096] == w[3] for t in plain) or (briefs and w[3] == "Prepare the opening brief")
    fuzzed("telegram update (well-formed, forged senders)", len(batch))


def test_a_full_queue_refuses_counts_and_tells_each_chat_once_per_minute() -> None:
    """C1: the excess is refused (no row), counted, and each chat gets one busy notice per minute; commands still
    work on a full queue."""
    owners = frozenset({OWNER, OWNER2})
    batch = [owner_message(i, i, f"message {i}") for i in range(1, 6)] + \
            [owner_message(10 + i, i, f"other {i}", chat=OWNER2, sender=OWNER2) for i in range(1, 4)] + \
            [owner_message(20, 50, "/status")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch, owners, capacity=1))
    check_routed(batch, result, before, after, logs, owners)
    assert result.outcomes == {"refused": 8, "accepted": 1}            # the /status command
    new = [w for k, w in after.work.items() if k not in before.work]
    assert sorted(w[4] for w in new if w[1] == "notice:busy") == [f"tg:{OWNER}", f"tg:{OWNER2}"]
    assert after.counters.get("refused_capacity", 0) - before.counters.get("refused_capacity", 0) == 8
    fuzzed("telegram update (capacity)", len(batch))


def test_busy_notices_are_once_per_chat_per_minute() -> None:
    async def main(path: Path) -> list[int]:
        clock = ManualClock(START)
        store = await SqliteStore.open(path, clock, capacity=1, debounce_ms=0)
        try:
            ingress = Ingress(store, BOT, None, lambda: OWNERS)   # type: ignore[arg-type]
            await ingress.admit_raw([owner_message(1, 1, "stock")])           # fills the queue
            notices = []
            for n, advance in enumerate([0, 10, 20, 40, 59]):                 # 0, 10, 30, 70, 129 s later
                clock.advance(advance)
                await ingress.admit_raw([owner_message(100 + n, 100 + n, f"more {n}")])
                notices.append(len(await store.db.read(lambda c: c.execute(
                    "SELECT * FROM work WHERE session = 'notice:busy'").fetchall())))
            return notices
        finally:
            await store.close()
    # 09:00:00 and 09:00:10 and 09:00:30 share a minute; 09:01:10 and 09:02:09 are two more
    assert in_fresh_loop(main) == [1, 1, 1, 2, 3]


async def forget_prompt(store: Store) -> str:
    """A real prompt (the /forget question) issued to the owner's chat; its nonce is returned."""
    return await store.atomic(lambda tx: tx.ask("forget", f"tg:{OWNER}", OWNER).nonce)


@settings(max_examples=examples(60))
@given(data=st.data())
def test_a_press_decides_only_with_the_exact_data_from_the_prompts_chat(data: st.DataObject) -> None:
    """C8 with a live prompt: a press decides it only when its data is exactly `<verb>:<nonce>` for a verb of that
    prompt, from an allow-listed owner, in the chat the prompt went to. Another owner, a stranger, a group, a
    mutated nonce or a wrong verb: "no longer valid" or refused, and nothing decided."""
    owners = frozenset({OWNER, OWNER2})
    choice = data.draw(st.fixed_dictionaries({
        "verb": st.sampled_from(["forget", "keep", "resend", "delivered", "approve", "FORGET", ""]),
        "mangle": st.sampled_from(["none", "none", "none", "suffix", "prefix", "truncate", "upper", "flip"]),
        "who": st.sampled_from(["owner", "owner", "owner2", "stranger", "owner_in_group", "owner2_in_owner_chat"]),
        "press_id": st.text("0123456789", min_size=1, max_size=12)}))

    async def main(path: Path):
        store = await SqliteStore.open(path, ManualClock(START), capacity=100, debounce_ms=0)
        try:
            ingress = Ingress(store, BOT, None, lambda: owners)   # type: ignore[arg-type]
            nonce = await forget_prompt(store)
            mangled = {"none": nonce, "suffix": nonce + "0", "prefix": "0" + nonce, "truncate": nonce[:-1],
                       "upper": nonce.upper() if nonce.upper() != nonce else nonce + "A",
                       "flip": nonce[:-1] + ("0" if nonce[-1] != "0" else "1")}[choice["mangle"]]
            chat, sender, kind = {"owner": (OWNER, OWNER, "private"), "owner2": (OWNER2, OWNER2, "private"),
                                  "stranger": (STRANGER, STRANGER, "private"),
                                  "owner_in_group": (-100123, OWNER, "group"),
                                  "owner2_in_owner_chat": (OWNER, OWNER2, "private")}[choice["who"]]
            press = owner_press(7, choice["press_id"], f"{choice['verb']}:{mangled}", chat, sender, kind)
            before = snapshot(path)
            routed = await ingress.admit_raw([press])
            await store.flush_counts()
            after = snapshot(path)
            assert invariants.check(path) == []
        finally:
            await store.close()
        return routed, before, after, press

    routed, before, after, press = in_fresh_loop(main)
    exact = (choice["verb"] in ("forget", "keep") and choice["mangle"] == "none" and choice["who"] == "owner")
    assert after.decided_prompts - before.decided_prompts == (1 if exact else 0), (choice, routed.outcomes)
    if choice["who"] in ("stranger", "owner_in_group", "owner2_in_owner_chat"):
        assert after.work == before.work                        # refused at the adapter (C3): no row
    if not exact and routed.presses:
        assert routed.presses[0][1].answer == "This button is no longer valid."
    fuzzed("callback press on a live prompt")


# ---- over real HTTP: the webhook and the till API of one running product --------------------------------------------

WEBHOOK_SECRET = "fuzz_secret-0123456789"
TILL_TOKENS = {"1": "till-one-fuzz-token-0001", "2": "till-two-fuzz-token-0002"}


class ThreadedProduct:
    """`local_product` running in its own thread and event loop, so synchronous hypothesis tests can drive it over
    HTTP and read its database from outside, as Telegram and a till would."""

    def __init__(self, overrides: dict[str, str]) -> None:
        self.overrides = overrides
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.port = 0
        self.db = Path()
        self.run = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._main, name="fuzz-product", daemon=True)

    def start(self) -> None:
        self.thread.start()
        if not self.ready.wait(30) or self.error is not None:
            raise RuntimeError(f"the product did not start: {self.error!r}")

    def _main(self) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:
            self.error = exc
            self.ready.set()
        finally:
            self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with local_product(self.overrides) as run:
            self.run = run
            await asyncio.wait_for(run.app.parts.http.started.wait(), 20)
            self.port = run.app.parts.http.port
            self.db = run.app.cfg.db
            self.ready.set()
            stop = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait([stop, run.task], return_when=asyncio.FIRST_COMPLETED)

    def alive(self) -> bool:
        return self.error is None and self.run is not None and not self.run.task.done()

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def query(self, sql: str, *args: object) -> list[tuple]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def work(self) -> dict[int, tuple]:
        return {r[0]: r[1:] for r in self.query("SELECT work_id, source, session, kind, payload FROM work")}


@pytest.fixture(scope="module")
def product():
    running = ThreadedProduct({
        "SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SHOP_FILE": str(CALM),
        "SHOPBOT_WEBHOOK_URL": "https://bot.example/telegram/webhook", "SHOPBOT_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "SHOPBOT_TILL_TOKENS": ",".join(f"{k}:{v}" for k, v in TILL_TOKENS.items()), "SHOPBOT_CAPACITY": "10000"})
    running.start()
    try:
        yield running
    finally:
        running.stop()
    assert running.error is None, f"the product crashed: {running.error!r}"


@pytest.fixture(scope="module")
def client(product):
    with httpx.Client(timeout=20) as http:
        yield http


def post_webhook(client: httpx.Client, product: ThreadedProduct, body: bytes, secret: Any = WEBHOOK_SECRET,
                 ) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    return client.post(product.url("/telegram/webhook"), content=body, headers=headers)


def telegram_work(product: ThreadedProduct) -> dict[int, tuple]:
    """Work that came through Telegram (the shop's own producers may add stock checks meanwhile)."""
    return {k: w for k, w in product.work().items() if re.match(r"(tg|edit|cb|notice:busy):", w[0])}


def till_work(product: ThreadedProduct) -> dict[int, tuple]:
    """Work admitted from the till (the worker adds count notices of its own meanwhile)."""
    return {k: w for k, w in product.work().items() if w[0].startswith("till:")}


def settle() -> None:
    """Let the server finish logging an exception before this thread formats a failure: on CPython 3.11 the ast
    module's recursion counter is shared by threads, and both traceback printing and pytest's report parse source."""
    import time
    time.sleep(0.5)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


@settings(max_examples=examples(40))
@given(secret=st.one_of(st.none(), header_value, st.sampled_from([
    WEBHOOK_SECRET + "x", WEBHOOK_SECRET[:-1], WEBHOOK_SECRET.upper(), "", "a" * 10_000, WEBHOOK_SECRET * 400,
    "Bearer " + WEBHOOK_SECRET])), body=st.one_of(st.binary(max_size=200), raw_update.map(json_bytes)))
def test_webhook_without_the_right_secret_is_401_and_changes_nothing(product, client, secret, body) -> None:
    if isinstance(secret, bytes):
        assume(secret.strip(b" \t") != WEBHOOK_SECRET.encode())
    elif isinstance(secret, str):
        assume(secret.strip() != WEBHOOK_SECRET)
    before = telegram_work(product)
    try:
        response = post_webhook(client, product, body, secret)
    except httpx.LocalProtocolError:
        assume(False)       # not a header value HTTP can carry at all
        raise
    assert response.status_code == 401
    assert telegram_work(product) == before and product.alive()
    fuzzed("webhook secret header")


@settings(max_examples=examples(60))
@given(body=st.one_of(st.binary(max_size=300), raw_update.map(json_bytes),
                      st.lists(raw_update, max_size=3).map(json_bytes), json_values.map(json_bytes),
                      st.sampled_from([b"", b"null", b"{}", b"[]", b'{"update_id": 1}', b"\xff\xfe\x00",
                                       b'\xef\xbb\xbf{"update_id": 5}', b"{" * 50])))
def test_webhook_bodies_with_the_secret_are_200_and_make_work_only_when_valid(product, client, body) -> None:
    before = telegram_work(product)
    response = post_webhook(client, product, body)
    assert response.status_code == 200, response.text
    new = {k: v for k, v in telegram_work(product).items() if k not in before}
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        decoded = None
    if not looks_owner_private(decoded, OWNERS):
        assert not new, new
    else:
        assert len(new) <= 1 and all(w[1] == f"tg:{OWNER}" for w in new.values())
    assert product.alive()
    fuzzed("webhook body")


def test_webhook_huge_bodies_are_200_and_a_huge_owner_text_is_truncated(product, client) -> None:
    before = telegram_work(product)
    over = json_bytes(owner_message(900_001, 900_001, "z" * (MAX_WEBHOOK_BYTES + 10)))
    assert post_webhook(client, product, over).status_code == 200      # over the limit: dropped as malformed
    assert telegram_work(product) == before
    under = json_bytes(owner_message(900_002, 900_002, "w" * 500_000))
    assert post_webhook(client, product, under).status_code == 200
    [(source, payload)] = [(w[0], w[3]) for k, w in telegram_work(product).items() if k not in before]
    assert source == f"tg:{OWNER}:900002" and payload == "w" * 4096
    assert product.alive()
    fuzzed("webhook huge body", 2)


TILL_AUTH = st.sampled_from(["till1", "till2", "till1", "wrong", "none", "basic", "bearer-empty", "lowercase"])


def till_headers(auth: str, content_type: str | None) -> dict[str, str]:
    headers = {} if content_type is None else {"Content-Type": content_type}
    token = {"till1": f"Bearer {TILL_TOKENS['1']}", "till2": f"Bearer {TILL_TOKENS['2']}",
             "wrong": "Bearer till-one-fuzz-token-0002", "basic": f"Basic {TILL_TOKENS['1']}",
             "bearer-empty": "Bearer", "lowercase": f"bearer {TILL_TOKENS['1']}"}.get(auth)
    if token is not None:
        headers["Authorization"] = token
    return headers


def content_type_ok(content_type: str | None) -> bool:
    if not content_type:
        return False
    media, _, params = content_type.partition(";")
    charset = re.search(r"charset=\"?([^;\"]*)", params)
    return media.strip().lower() == "application/json" and (charset is None or
                                                            charset.group(1).strip().lower() in ("utf-8", "utf8"))


@settings(max_examples=examples(80))
@given(body=st.one_of(valid_till_body.map(json_bytes), valid_till_body.map(json_bytes), till_body().map(json_bytes),
                      st.binary(max_size=200), json_values.map(json_bytes)),
       content_type=st.one_of(st.just("application/json"), content_types), auth=TILL_AUTH)
def test_till_bodies_over_http(product, client, body, content_type, auth) -> None:
    before = till_work(product)
    response = client.post(product.url("/till/counts"), content=body, headers=till_headers(auth, content_type))
    till = {"till1": "1", "till2": "2", "lowercase": "1"}.get(auth)
    after = till_work(product)
    assert response.status_code != 500 and product.alive()
    if till is None:
        assert response.status_code == 401 and after == before
        fuzzed("till request (bad token)")
        return
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        decoded = None
    shape = response.json()
    if not content_type_ok(content_type):
        assert response.status_code == 415
    elif not till_body_valid(decoded, TILL_ITEMS):
        assert response.status_code == 400, (decoded, response.text)
    if response.status_code >= 400:
        assert set(shape) >= {"error", "detail", "field"} and isinstance(shape["detail"], str) and shape["detail"]
        assert shape["field"] is None or (isinstance(shape["field"], str) and shape["field"].startswith("$")
                                          and shape["field"].isascii())
        new = {k: v for k, v in after.items() if k not in before}
        assert all(v[1] != f"till:{till}" for v in new.values()), "a refused till post left work"
        fuzzed("till request (refused)")
        return
    # a valid body: admitted once under till:<till_id>:<request_id>, or a duplicate, or 409 for other content
    source = f"till:{till}:{decoded['request_id']}"
    rows = [w for w in after.values() if w[0] == source]
    assert len(rows) == 1 and rows[0][1:3] == (f"till:{till}", "agent")
    earlier = [w for w in before.values() if w[0] == source]
    if earlier and earlier[0][3] != canonical_till(decoded):
        assert response.status_code == 409 and shape["error"] == "conflict"
    else:
        assert response.status_code == 202
        assert shape["outcome"] == ("duplicate" if earlier else "accepted")
        assert rows[0][3] == canonical_till(decoded)
    fuzzed("till request (valid)")


@settings(max_examples=examples(40))
@given(request_id=st.one_of(st.sampled_from(["v-1", "v-2", "full-1", "a" * 64, "a" * 65, "..", "%2e%2e", "%00"]),
                            plain_text.filter(bool)), auth=TILL_AUTH)
def test_till_reads_over_http(product, client, request_id, auth) -> None:
    """GET /till/counts/<request_id>: 401 without a valid token, 400 for a malformed id, 404 for another till's or an
    unknown request, 200 with its state for this till's own; never 500, and a read changes nothing."""
    before = till_work(product)
    response = client.get(product.url("/till/counts/") + quote(request_id, safe=""), headers=till_headers(auth, None))
    assert response.status_code in (200, 307, 400, 401, 404, 405), response.text   # 307: Starlette's slash redirect
    assert response.status_code != 401 or auth not in ("till1", "till2", "lowercase")
    assert till_work(product) == before and product.alive()
    fuzzed("till read (path)")


TRICKY_TILL = [b'{"request_id": "a", "counts": {"vanilla": 1}, "request_id": "b"}', b'{"request_id": "\\ud800", '
               b'"counts": {"vanilla": 1}}', b'{"request_id": "a", "counts": {"\\udc80": 1}}',
               b'{"request_id": "a", "counts": {"vanilla": NaN}}', b'{"request_id": "a", "counts": {"vanilla": 1e400}}',
               b'{"request_id": "a", "counts": {"vanilla": ' + b"9" * 5000 + b"}}", b"[" * 60_000,
               b'{"request_id": "a", "counts": {"vanilla": 1}, "note": "\\udfff"}', b"\xef\xbb\xbf{}",
               b'{"request_id": "a", "counts": {"vanilla": true}}', b'{"request_id": "a", "counts": {"vanilla": -0}}']


@settings(max_examples=examples(300))
@given(raw=st.one_of(till_body().map(json_bytes), st.binary(max_size=300), json_values.map(json_bytes),
                     st.sampled_from(TRICKY_TILL),
                     st.integers(1, 3).map(lambda n: b"{" + b" " * (MAX_BODY_BYTES + n) + b"}")),
       content_type=st.one_of(content_types, st.none(), plain_text))
def test_parse_counts_body_never_raises(raw: bytes, content_type: str | None) -> None:
    """The till body parser directly, with many more inputs: a TillCounts or a TillError, never an exception."""
    outcome = isolated(parse_counts_body, raw, content_type, TILL_ITEMS)
    assert outcome[0] == "ok", outcome
    result = outcome[1]
    assert isinstance(result, (TillCounts, TillError))
    if isinstance(result, TillError):
        assert result.status in (400, 413, 415) and result.error and isinstance(result.detail, str) and result.detail
        assert result.field is None or (result.field.startswith("$") and result.field.isascii())
        json.dumps(result.body(), ensure_ascii=False).encode("utf-8")      # the answer can always be sent
    else:
        assert content_type_ok(content_type) and till_body_valid(json.loads(raw), TILL_ITEMS)
        result.canonical_payload().encode("utf-8")                          # storable text
    fuzzed("till body (parser)")


# ---- shop files ------------------------------------------------------------------------------------------------------

ITEM_NAME = re.compile(r"[a-z0-9][a-z0-9 _-]{0,39}")
SQLITE_MAX = 2**63 - 1


def check_shop(text: str) -> None:
    outcome = isolated(parse_shop, text, "fuzz.toml")
    if outcome[0] == "raised":
        assert outcome[3] and outcome[2].strip(), f"parse_shop raised {outcome[1]}: {outcome[2]}"
        return
    spec = outcome[1]
    assert spec.items and spec.timezone
    for item in spec.items:
        if not KNOWN_BUGS["item_name_newline"]:
            assert ITEM_NAME.fullmatch(item.item), item.item
        for value in (item.on_hand, item.reorder_point, item.target, item.unit_cost_cents):
            assert 0 <= value <= SQLITE_MAX
    if not KNOWN_BUGS["stock_cron"]:
        from producers.scheduler import stock_schedule
        stock_schedule(spec.stock_cron, spec.timezone)


@settings(max_examples=examples(150))
@given(shop=mutated_shop())
def test_mutated_shop_files_give_a_spec_or_a_shop_file_error(shop: dict) -> None:
    check_shop(toml_document(shop))
    fuzzed("shop file (mutated)")


@settings(max_examples=examples(60))
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_random_text_shop_files_give_a_shop_file_error(text: str) -> None:
    check_shop(text)
    fuzzed("shop file (random text)")


def test_report_fuzz_figures() -> None:
    """Prints the inputs fuzzed by kind (for docs/reliability.md); runs last in this module."""
    print("\nfuzzed inputs by kind:", json.dumps(FUZZED, indent=1, sort_keys=True), "total", sum(FUZZED.values()))


# ---- bugs found: each pinned by a strict xfail (see KNOWN_BUGS in tests/support/strategies.py) -----------------------

def test_formerly_bug_owner_text_with_a_lone_surrogate_is_handled() -> None:
    batch = [owner_message(1, 1, "a\ud800b"), owner_message(2, 2, "stock")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)
    assert any(w[0] == f"tg:{OWNER}:2" for w in after.work.values())      # the rest of the batch is admitted


def test_formerly_bug_owner_press_with_a_lone_surrogate_is_handled() -> None:
    batch = [owner_press(1, "c\udc80", "forget:00"), owner_press(2, "c2", "keep:\ud800")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)


@pytest.mark.parametrize("text", [5, ["x"], {"a": 1}, True])
def test_formerly_bug_owner_text_of_another_type_is_handled(text: Any) -> None:
    batch = [owner_message(1, 1, text), owner_message(2, 2, "stock")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)


def test_formerly_bug_owner_callback_data_of_another_type_is_handled() -> None:
    batch = [owner_press(1, "c1", 12345), owner_message(2, 2, "stock")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)


def test_formerly_bug_float_ids_are_not_admitted_under_a_malformed_identity() -> None:
    batch = [owner_message(1, 1, "stock", chat=float(OWNER), sender=float(OWNER))]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)


@pytest.mark.parametrize("message_id", [None, "abc", 1.5])
def test_formerly_bug_messages_without_an_integer_message_id_are_malformed(message_id: Any) -> None:
    batch = [owner_message(1, message_id, "stock")]
    result, before, after, logs, _ = in_fresh_loop(lambda path: admit(path, batch))
    check_routed(batch, result, before, after, logs)


def test_formerly_bug_webhook_deeply_nested_body_is_200(product, client) -> None:
    response = post_webhook(client, product, b"[" * 100_000 + b"]" * 100_000)
    settle()
    assert response.status_code == 200


def test_formerly_bug_webhook_owner_text_with_a_lone_surrogate_is_200(product, client) -> None:
    body = json.dumps(owner_message(900_100, 900_100, "a\ud800b")).encode()
    response = post_webhook(client, product, body)
    settle()
    assert response.status_code == 200


async def test_formerly_bug_polling_survives_an_owner_text_with_a_lone_surrogate() -> None:
    async with local_product({"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0",
                              "SHOPBOT_SHOP_FILE": str(CALM)}) as run:
        run.api.post_raw_update(owner_message(0, 777, "a\ud800b") | {"update_id": None})
        after = run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")
        await run.admitted(after["update_id"], timeout=2)
        await run.replies(1, timeout=2)
        assert not run.task.done()


def test_formerly_bug_shop_file_long_timezone_is_a_shop_file_error() -> None:
    check_shop(toml_document({"timezone": "a" * 300, "items": {"vanilla": {
        "on_hand": 1, "reorder_point": 1, "target": 1, "unit_cost_cents": 1}}}))


def test_formerly_bug_shop_file_deeply_nested_array_is_a_shop_file_error() -> None:
    check_shop("a = " + "[" * 1000 + "]" * 1000)


def test_formerly_bug_shop_file_huge_integer_is_a_shop_file_error() -> None:
    with pytest.raises(ShopFileError):
        parse_shop('timezone = "Europe/London"\n[items.vanilla]\non_hand = 99999999999999999999999\n'
                   'reorder_point = 1\ntarget = 1\nunit_cost_cents = 1\n')


def test_formerly_bug_shop_file_item_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ShopFileError):
        parse_shop('timezone = "Europe/London"\n[items."vanilla\\n"]\non_hand = 1\nreorder_point = 1\n'
                   'target = 1\nunit_cost_cents = 1\n')


@pytest.mark.parametrize("cron", ['"garbage"', "5", '"61 * * * *"'])
def test_formerly_bug_shop_file_invalid_stock_cron_is_refused(cron: str) -> None:
    with pytest.raises(ShopFileError):
        parse_shop('timezone = "Europe/London"\n[stock_watch]\ncron = ' + cron + '\n[items.vanilla]\non_hand = 1\n'
                   'reorder_point = 1\ntarget = 1\nunit_cost_cents = 1\n')


def test_formerly_bug_shop_file_non_string_unit_is_refused() -> None:
    with pytest.raises(ShopFileError):
        parse_shop('timezone = "Europe/London"\n[items.vanilla]\nunit = {a = 1}\non_hand = 1\nreorder_point = 1\n'
                   'target = 1\nunit_cost_cents = 1\n')
