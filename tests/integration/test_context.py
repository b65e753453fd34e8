"""The context a turn gets: a short, stable system prompt about the shop, today's date and time in a second block,
and the session's history within a token budget (whole exchanges, newest kept, no tool calls replayed)."""
from datetime import UTC, datetime, time

from store import Occurrence
from tests.integration.test_worker import SHOP
from worker.agent_loop import run_agent
from worker.figures import DASH
from worker.models.base import Message, ModelTurn, SystemPrompt, ToolCall
from worker.models.scripted import ScriptedModel
from worker.money import ShopFormat
from worker.prompts import ShopContext, build_system, estimate_tokens, fit_history, system_text
from worker.tools.registry import ToolRegistry
from worker.worker import Worker, WorkerSettings

ITEMS = [{"item": "vanilla", "unit": "tubs"}, {"item": "cones", "unit": "boxes"}]
HOURS = (("Mon-Fri", "11:00-19:00"), ("Sun", "closed"))


def test_the_system_prompt_names_the_shop_currency_items_words_and_hours_and_stays_short():
    text = system_text(ShopContext("Lucy's Ice Cream", ShopFormat("EUR", "de_DE", "Europe/Berlin"), HOURS), ITEMS)
    for part in ("Lucy's Ice Cream", "EUR (€)", "vanilla (tubs), cones (boxes)", "Reorder point:", "Target:",
                 "On order:", "Opening hours: Mon-Fri 11:00-19:00; Sun closed."):
        assert part in text
    assert "cents" not in text
    assert estimate_tokens(text) < 400


def test_today_comes_in_a_second_block_in_the_shops_time_zone_and_its_numbers_are_figures():
    now = datetime(2026, 12, 5, 23, 30, tzinfo=UTC)
    shop = ShopContext("Lucy's", ShopFormat("NZD", "en_NZ", "Pacific/Auckland"), HOURS)
    system, figures = build_system(shop, ITEMS, now)
    assert isinstance(system, SystemPrompt) and system.cached == system_text(shop, ITEMS)
    assert system.turn == ("Today is Sunday 6 December 2026 (2026-12-06); the time in the shop is 12:30 "
                           "(Pacific/Auckland).")
    assert str(system) == f"{system.cached}\n\n{system.turn}"
    later, _ = build_system(shop, ITEMS, datetime(2026, 12, 9, 8, 0, tzinfo=UTC))
    assert later.cached == system.cached                      # the cached block never changes with the time
    assert [(f.label, f.value) for f in figures][:1] == [("today", datetime(2026, 12, 6).date())]
    assert ("opens Mon-Fri", time(11, 0)) in [(f.label, f.value) for f in figures]


async def test_the_issue_example_keeps_the_brief_time_and_todays_date():
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    system, figures = build_system(ShopContext(schedules=(("opening_brief", "30 8 * * *"), ("odd", "*/5 9 * * 1"))),
                                   ITEMS, now)
    assert "Scheduled: opening_brief daily at 08:30; odd (cron */5 9 * * 1)." in system.cached
    model = ScriptedModel([ModelTurn("Today is 2026-12-05, the brief runs at 08:30, the other at 09:05.", ())])
    result = await run_agent(model=model, registry=ToolRegistry(), system=system, history=(), user_text="when?",
                             journal=None, context=None, context_figures=figures)
    assert result.text.startswith(f"Today is 2026-12-05, the brief runs at 08:30, the other at {DASH}.")


async def test_a_run_may_repeat_the_date_and_the_hours_but_not_another_date():
    system, figures = build_system(ShopContext(hours=HOURS), ITEMS, datetime(2026, 12, 5, 9, 0, tzinfo=UTC))
    model = ScriptedModel([ModelTurn("Today is 5 December; we open at 11:00 and close at 19:00, not 20:00. "
                                     "Tomorrow is 2026-12-06.", ())])
    result = await run_agent(model=model, registry=ToolRegistry(), system=system, history=(), user_text="hours?",
                             journal=None, context=None, context_figures=figures)
    assert result.prose != result.text
    assert result.text.startswith(f"Today is 5 December; we open at 11:00 and close at 19:00, not {DASH}. "
                                  f"Tomorrow is {DASH}.")
    assert model.calls[0].system == system


def rows(*exchanges):
    return [(role, text) for q, a in exchanges for role, text in (("user", q), ("assistant", a))]


def test_history_keeps_the_newest_whole_exchanges_within_the_budget():
    history = rows(("q1" * 20, "a1" * 20), ("q2" * 20, "a2" * 20), ("q3" * 20, "a3" * 20))   # 20 tokens each exchange
    assert estimate_tokens("q1" * 20) == 10
    assert fit_history(history, 60) == [Message("user", "q1" * 20), Message("assistant", "a1" * 20),
                                        Message("user", "q2" * 20), Message("assistant", "a2" * 20),
                                        Message("user", "q3" * 20), Message("assistant", "a3" * 20)]
    assert fit_history(history, 59) == [Message(r, t) for r, t in history[2:]]      # the oldest dropped first
    assert fit_history(history, 39) == [Message(r, t) for r, t in history[4:]]
    assert fit_history(history, 19) == []                    # never half an exchange
    assert fit_history(history, 0) == []


def test_history_never_starts_inside_an_exchange_and_a_too_big_one_stops_the_walk():
    history = rows(("q1", "a1"), ("q2" * 400, "a2"), ("q3", "a3"))
    assert fit_history(history, 50) == [Message("user", "q3"), Message("assistant", "a3")]   # nothing around q2
    assert fit_history(history[1:], 10_000)[0] == Message("user", "q2" * 400)                # a1 has no question
    for budget in range(0, 600, 7):                          # whatever the budget: whole exchanges only
        kept = fit_history(history, budget)
        assert len(kept) % 2 == 0 and all(m.role == ("user", "assistant")[i % 2] for i, m in enumerate(kept))


async def test_a_turn_sees_earlier_turns_as_text_only_within_the_budget(store, raw):
    await store.seed_shop(SHOP.items, "test")
    model = ScriptedModel([
        ModelTurn("", (ToolCall("c1", "get_item", '{"item": "vanilla"}'),)), ModelTurn("Vanilla: 2 tubs.", ()),
        ModelTurn("Second answer.", ()), ModelTurn("Third answer.", ())])
    worker = Worker(store, model, WorkerSettings())
    for n, text in enumerate(["How is vanilla?", "And now?", "Last one?"], start=1):
        await store.admit(Occurrence(f"tg:1:{n}", "tg:1", text, destination="tg:1"))
        await worker.drain()
        if n == 1:   # a budget the first exchange fits alone, but not beside the second
            first = sum(estimate_tokens(t) for (t,) in raw.execute("SELECT text FROM history ORDER BY entry_id"))
            worker.settings.history_tokens = first + 2
    second, third = model.calls[2], model.calls[3]
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]       # no tool call replayed
    assert second.messages[0].text == "How is vanilla?" and second.messages[1].text.startswith("Vanilla: 2 tubs.")
    # the first exchange no longer fits beside the second: the oldest is dropped
    assert [m.text for m in third.messages] == ["And now?", "Second answer.", "Last one?"]


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
