"""The context a turn gets: a short system prompt about the shop that stays byte-identical all day (C18), today's date
and time heading the latest user message, and the session's history (C17: what the model said and did) within a
token budget, compacted by halves."""
from datetime import UTC, datetime, time

from store import Occurrence, ShopItem
from tests.integration.test_worker import SHOP
from worker import history as conversation
from worker.agent_loop import run_agent
from worker.figures import DASH
from worker.history import estimate_tokens
from worker.models.base import Message, ModelTurn, ToolCall
from worker.models.scripted import ScriptedModel
from worker.money import ShopFormat
from worker.prompts import TOOL_FIRST, ShopContext, build_system, system_text
from worker.tools.registry import ToolRegistry
from worker.worker import Worker, WorkerSettings

ITEMS = [ShopItem(name, unit, on_hand=0, reorder_point=0, target=0, unit_cost_cents=0, max_order=None, pack=None,
                  min_order=None, price_cents=None, file_reorder_point=0, file_target=0, applied_by=None,
                  applied_at=None, open_proposal=None, on_order=0) for name, unit in (("vanilla", "tubs"),
                                                                                     ("cones", "boxes"))]
HOURS = (("Mon-Fri", "11:00-19:00"), ("Sun", "closed"))


def test_the_system_prompt_names_the_shop_currency_items_words_and_hours_and_stays_short():
    text = system_text(ShopContext("Lucy's Ice Cream", ShopFormat("EUR", "de_DE", "Europe/Berlin"), HOURS), ITEMS)
    for part in ("Lucy's Ice Cream", "EUR (€)", "vanilla (tubs), cones (boxes)", "Reorder point:", "Target:",
                 "On order:", "Opening hours: Mon-Fri 11:00-19:00; Sun closed.", "nothing is on order",
                 "one polite sentence"):
        assert part in text
    assert "cents" not in text
    assert estimate_tokens(text) < 520


def test_today_heads_the_user_message_in_the_shops_time_zone_and_the_system_prompt_has_no_time():
    now = datetime(2026, 12, 5, 23, 30, tzinfo=UTC)
    shop = ShopContext("Lucy's", ShopFormat("NZD", "en_NZ", "Pacific/Auckland"), HOURS)
    system, head, figures = build_system(shop, ITEMS, now)
    assert system == system_text(shop, ITEMS)
    assert head == ("[Today is Sunday 6 December 2026 (2026-12-06); the time in the shop is 12:30 "
                    f"(Pacific/Auckland). {TOOL_FIRST}]")
    later, later_head, _ = build_system(shop, ITEMS, datetime(2026, 12, 9, 8, 0, tzinfo=UTC))
    assert later == system and later_head != head             # the system prompt never changes with the time
    assert [(f.label, f.value) for f in figures][:1] == [("today", datetime(2026, 12, 6).date())]
    assert ("opens Mon-Fri", time(11, 0)) in [(f.label, f.value) for f in figures]


async def test_the_issue_example_keeps_the_brief_time_and_todays_date():
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    system, head, figures = build_system(
        ShopContext(schedules=(("opening_brief", "30 8 * * *"), ("odd", "*/5 9 * * 1"))), ITEMS, now)
    assert "Scheduled: opening_brief daily at 08:30; odd (cron */5 9 * * 1)." in system
    model = ScriptedModel([ModelTurn("Today is 2026-12-05, the brief runs at 08:30, the other at 09:05.", ())])
    result = await run_agent(model=model, registry=ToolRegistry(), system=system, history=(), user_text="when?",
                             journal=None, context=None, context_figures=figures, turn_head=head)
    assert result.text.startswith(f"Today is 2026-12-05, the brief runs at 08:30, the other at {DASH}.")
    assert model.calls[0].messages[-1].text == f"{head}\n\nwhen?"     # the date after the history, never before


async def test_a_run_may_repeat_the_date_and_the_hours_but_not_another_date():
    system, head, figures = build_system(ShopContext(hours=HOURS), ITEMS, datetime(2026, 12, 5, 9, 0, tzinfo=UTC))
    model = ScriptedModel([ModelTurn("Today is 5 December; we open at 11:00 and close at 19:00, not 20:00. "
                                     "Tomorrow is 2026-12-06.", ())])
    result = await run_agent(model=model, registry=ToolRegistry(), system=system, history=(), user_text="hours?",
                             journal=None, context=None, context_figures=figures, turn_head=head)
    assert result.prose != result.text
    assert result.text.startswith(f"Today is 5 December; we open at 11:00 and close at 19:00, not {DASH}. "
                                  f"Tomorrow is {DASH}.")
    assert model.calls[0].system == system


def exchange(n, tokens=10):
    return [Message("user", f"q{n}" + "x" * (4 * tokens - 2)), Message("assistant", "a" * (4 * tokens))]


def test_history_is_kept_whole_until_the_budget_then_halved_at_once_and_the_cut_stays_put():
    found = [exchange(n) for n in range(1, 4)]                 # 20 tokens each exchange
    assert conversation.fit(found, 60) == [m for e in found for m in e]
    assert conversation.fit(found, 0) == []
    # 4 exchanges pass a budget of 60: the oldest go down to about half (30) at once: only the newest stays
    cuts, dropped = [], []
    for turns in range(4, 9):
        kept = conversation.fit([exchange(n) for n in range(1, turns + 1)], 60)
        cuts.append(kept[0].text[:2])
        dropped.append(conversation.cut([exchange(n) for n in range(1, turns + 1)], 60))
    assert cuts == ["q4", "q4", "q4", "q7", "q7"]             # the prefix stays the same for several turns
    assert dropped == [3, 3, 3, 6, 6]
    assert conversation.cut(found, 60) == 0 and conversation.cut([*found, exchange(4)], 60) == 3


def test_an_exchange_round_trips_through_its_stored_form_and_older_rows_read_as_text():
    said = [Message("user", "[Today] how much vanilla"),
            Message("assistant", "", (ToolCall("c1", "get_item", '{"item": "vanilla"}'),)),
            Message("tool", '{"on_hand": 2}', tool_call_id="c1"), Message("tool", '{"error": "x"}',
                                                                      tool_call_id="c2", is_error=True),
            Message("assistant", "Vanilla: 2 tubs.")]
    rows = [("user", "old question", None), ("assistant", "old answer", None),
            ("user", "how much vanilla", None), ("assistant", "Vanilla: 2 tubs.", conversation.encode(said))]
    assert conversation.exchanges(rows) == [[Message("user", "old question"), Message("assistant", "old answer")],
                                            said]
    assert conversation.exchanges(rows[1:])[0] == said        # an answer without its question is dropped


async def test_a_turn_sees_earlier_turns_tool_calls_and_results_and_not_the_report(store, raw):
    await store.seed_shop(SHOP.items, "test")
    model = ScriptedModel([
        ModelTurn("", (ToolCall("c1", "get_item", '{"item": "vanilla"}'),)), ModelTurn("Vanilla: 2 tubs.", ()),
        ModelTurn("Second answer.", ())])
    worker = Worker(store, model, WorkerSettings())
    for n, text in enumerate(["How is vanilla?", "And now?"], start=1):
        await store.admit(Occurrence(f"tg:1:{n}", "tg:1", text, destination="tg:1"))
        await worker.drain()
    second = model.calls[2]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert second.messages[0] == model.calls[1].messages[0]          # the user message exactly as it was sent
    assert second.messages[1].tool_calls == (ToolCall("c1", "get_item", '{"item": "vanilla"}'),)
    assert '"on_hand": 2' in second.messages[2].text
    assert second.messages[3].text == "Vanilla: 2 tubs."             # the model's prose, no Figures block
    assert "Figures" in raw.execute("SELECT body FROM reports WHERE report_id = 'r1.1'").fetchone()[0]
    assert list(second.messages[:4]) == list(model.calls[1].messages) + [Message("assistant", "Vanilla: 2 tubs.")]


def _shop_file(extra: str) -> str:
    return ('name = "Lucy\'s"\ntimezone = "Europe/Berlin"\ncurrency = "EUR"\n' + extra +
            '\n[items.vanilla]\nunit = "tubs"\non_hand = 2\nreorder_point = 8\ntarget = 8\nunit_cost_cents = 300\n')


def test_the_shop_file_gives_locale_and_opening_hours_and_refuses_bad_ones():
    import pytest

    from bot.shop_file import ShopFileError, parse_shop
    shop = parse_shop(_shop_file('locale = "de_DE"\n[hours]\n"Mo-Fr" = "09:00-18:00"\n"So" = "closed"\n'))
    assert (shop.locale, shop.hours) == ("de_DE", (("Mo-Fr", "09:00-18:00"), ("So", "closed")))
    assert parse_shop(_shop_file("")).locale == "en_US" and parse_shop(_shop_file("")).hours == ()
    for bad, message in (('locale = "xx_XX"', "locale must be"), ('locale = 5', "locale must be"),
                         ('[hours]\n"Mon" = "9-5"', 'hours.Mon must be "HH:MM-HH:MM"'),
                         ('[hours]\n"Mon" = "25:00-26:00"', "hours.Mon must be"), ('hours = 3', "hours must be")):
        with pytest.raises(ShopFileError, match=message):
            parse_shop(_shop_file(bad))
