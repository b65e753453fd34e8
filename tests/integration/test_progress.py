"""C20 progress drafts: the real ProgressDrafts with the real sender against the local Bot API and the real store's
journal; the turn is a claimed run whose tool steps are journaled while the drafts run."""
from __future__ import annotations

import asyncio
import re

import pytest

from bot.relays.progress import PHRASES, ProgressDrafts, draft_id, draft_text
from bot.relays.sender import TelegramSender
from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.local_setup import OWNER_ID, local_product
from producers.telegram.client import make_bot
from store import ManualClock, Occurrence, SqliteStore, WorkKind
from tests.support import DATA

TOKEN = "424242:progress-token"
FAST = {"SHOPBOT_DEBOUNCE_MS": "0", "SHOPBOT_CHAT_PACE_MS": "0", "SHOPBOT_SHOP_FILE": str(DATA / "shop_calm.toml")}


class Ticks:
    """The limiter's clock, moved by the test: the one-a-second rule shown without waiting a second."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_draft_texts_name_steps_in_the_owners_language_and_never_hold_a_digit():
    assert draft_text([], "en") == "Working on it…"
    assert draft_text(["list_stock"], "en") == "Checking stock…"
    assert draft_text(["list_stock", "sales_rate"], "de") == "Lese die Verkäufe der letzten zwei Wochen…"
    assert draft_text(["a_tool_added_later"], "fr") == "Je m'en occupe…"
    assert draft_text(["get_item"], "nl") == "Checking stock…"               # no Dutch phrases: English
    assert not any(re.search(r"\d", text) for words in PHRASES.values() for text in words.values())
    # negative control: a phrase with a digit is never shown
    planted = {"en": {**PHRASES["en"], "stock": "Checking 12 items…"}}
    assert draft_text(["list_stock"], "en", planted) == "Working on it…"
    assert draft_id("run-a") != 0 and draft_id("run-a") == draft_id("run-a") != draft_id("run-b")


async def test_drafts_follow_the_journaled_steps_at_most_once_a_second_per_chat(tmp_path):
    clock = ManualClock(__import__("datetime").datetime(2027, 3, 1, 9, tzinfo=__import__("datetime").UTC))
    store = await SqliteStore.open(tmp_path / "p.sqlite3", clock, debounce_ms=0)
    async with LocalBotApi(TOKEN) as api:
        api.post_message(OWNER_ID, OWNER_ID, "hi")                              # the owner's private chat
        bot = make_bot(TOKEN, api.base_url, read_timeout=2.0, connect_timeout=1.0)
        async with bot:
            ticks = Ticks()
            progress = ProgressDrafts(TelegramSender(bot).draft, store.run_steps, after_s=0, poll_s=0.01,
                                      monotonic=ticks)
            await store.admit(Occurrence(f"tg:{OWNER_ID}:1", f"tg:{OWNER_ID}", "stock", WorkKind.AGENT,
                                         f"tg:{OWNER_ID}"))
            claim = await store.claim("w1")
            assert claim is not None
            async with progress.during(OWNER_ID, claim.run_id):
                await api.wait_for(lambda: [d["text"] for d in api.drafts] == ["Working on it…"])
                await store.op_started(claim.run_id, "c1", "list_stock", {}, "read")
                polls = progress.sent
                await asyncio.sleep(0.1)                                         # ten polls: the second held back
                assert [d["text"] for d in api.drafts] == ["Working on it…"] and progress.sent == polls
                ticks.now += 1.0
                await api.wait_for(lambda: [d["text"] for d in api.drafts][-1:] == ["Checking stock…"])
            assert {d["draft_id"] for d in api.drafts} == {draft_id(claim.run_id)}
            # a draft that Telegram refuses changes nothing: the turn's context is left as usual
            api.inject("sendMessageDraft", "400", count=100)
            ticks.now += 5.0
            async with progress.during(OWNER_ID, "another-run"):
                pass
            assert await store.run_steps(claim.run_id) == ["list_stock"]
    await store.close()


@pytest.mark.parametrize("fault", [None, "400"])
async def test_with_0_the_first_draft_comes_before_the_reply_and_a_failed_one_changes_nothing(fault):
    async with local_product({**FAST, "SHOPBOT_PROGRESS_AFTER_MS": "0"}) as run:
        if fault:
            run.api.inject("sendMessageDraft", fault, count=100)
        run.api.post_message(OWNER_ID, OWNER_ID, "how much vanilla")
        [reply] = await run.replies(1)
        assert "vanilla" in reply.text
        if fault is None:
            kinds = [kind for kind, _ in run.api.timeline if kind in ("draft", "sent")]
            assert kinds.index("draft") < kinds.index("sent")
            assert all(not re.search(r"\d", d["text"]) for d in run.api.drafts)
            assert all(d["chat_id"] == OWNER_ID for d in run.api.drafts)
        else:
            assert run.api.drafts == [] and run.api.calls.get("sendMessageDraft", 0) >= 1
        assert len(run.owner_messages()) == 1                               # the answer, once, through the outbox


def test_every_offered_tool_has_its_step_in_every_language():
    """A tool added without a phrase would show only "Working on it…": each one the registry offers is named."""
    from bot.relays.progress import STEP_OF_TOOL
    from worker.tools.shop import shop_registry
    assert set(shop_registry().names()) <= set(STEP_OF_TOOL)
    assert all(set(words) == set(PHRASES["en"]) for words in PHRASES.values())
