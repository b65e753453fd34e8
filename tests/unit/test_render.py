"""Replies made for a phone (C7): one renderer escapes everything from records or the model, parts are counted in
UTF-16 code units as Telegram counts, and the local Bot API, as strict about HTML as Telegram, accepts every reply
kind. The real PTB client talks to the fake over HTTP."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.relays.render import render_part
from bot.relays.sender import OutcomeKind, TelegramSender
from bot.relays.telegram import Relay, RelaySettings
from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.bot_api.entities import HtmlRefused, parse_html
from producers.telegram.client import make_bot
from store import ItemSpec, Occurrence, ReportDraft, WorkKind
from store.shared.outbox import PART_LIMIT, split_parts, units
from worker.models.offline import OfflineModel
from worker.worker import Worker

TOKEN = "123456:TEST-token-for-render-tests-0123456789"
CHAT = 4242


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


@pytest.fixture
async def sender(api):
    bot = make_bot(TOKEN, api.base_url, read_timeout=2.0, connect_timeout=1.0)
    async with bot:
        yield TelegramSender(bot)


# ---- the fake is as strict as Telegram (negative controls for every check below) ----------------------------------
@pytest.mark.parametrize("bad, why", [
    ("<b>open", "Can't find end tag"),
    ("<b>x</i>", "Unmatched end tag"),
    ("<script>x</script>", "Unsupported start tag \"script\""),
    ("a < b", "Unsupported start tag"),
    ("fish & chips", "Character '&' is reserved"),
    ("&nbsp;", "Unsupported HTML entity"),
])
async def test_the_local_bot_api_refuses_html_telegram_would_refuse(sender, api, bad, why):
    outcome = await sender.send(CHAT, bad)
    reason = outcome.reason.lower()           # PTB capitalises Telegram's description
    assert outcome.kind is OutcomeKind.FAILED and "can't parse entities" in reason and why.lower() in reason
    assert api.sent == []


def test_the_html_parser_keeps_visible_text_and_counts_entity_offsets_in_utf16():
    text, entities = parse_html("😀 <b>a&lt;b</b> &#x27;&quot;&amp;")
    assert text == "😀 a<b '\"&"
    assert entities == [{"type": "bold", "offset": 3, "length": 3}]      # the emoji counts two units
    with pytest.raises(HtmlRefused):
        parse_html("&#xD800;")


# ---- every reply kind is accepted and reads as typed ---------------------------------------------------------------
KINDS = {
    "less than": "Is 2 < 3? Yes: 2 tubs on hand.",
    "ampersand": "Fish & chips & <b>cream</b> &amp; &lt;",
    "quotes": 'She said "order more" and it\'s done.',
    "item a<b>": "a<b>: 2 tubs on hand.\n\nFigures:\n- a<b> on hand: 2 tubs",
    "emoji": "🍦 vanilla 😀👍🏽 2 tubs, 🇬🇧 flag, 👨‍👩‍👧 family",
    "a link and a tag from the model": '<a href="https://evil.example">click</a> <tg-spoiler>x</tg-spoiler>',
    "empty body": "",
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_reply_kind_is_accepted_by_the_server_and_reads_as_typed(sender, api, kind):
    body = KINDS[kind]
    [part] = split_parts(body, "r12.1")
    outcome = await sender.send(CHAT, render_part(part, "r12.1"))
    assert outcome.kind is OutcomeKind.CONFIRMED, outcome.reason
    [message] = api.sent
    assert message.text == part                                                  # shown exactly as typed
    assert message.text.endswith("r12.1")
    # the only markup is ours: the figures folded, the identity in <code>, small and last; no link or tag of the
    # model survives
    code = {"type": "code", "offset": units(message.text) - 5, "length": 5}
    if "Figures:" in body:
        start = units(message.text[:message.text.index("Figures:")])
        quote = {"type": "expandable_blockquote", "offset": start, "length": units(body) - start}
        assert message.entities == (quote, code)
    else:
        assert message.entities == (code,)


def test_the_figures_block_is_folded_once_and_only_when_it_is_the_bodys_last_block():
    body = "Vanilla: 2 tubs on hand.\n\nFigures:\n- vanilla on hand: 2 tubs\n- vanilla unit cost: $3.00"
    html = render_part(f"{body}\n\nr4.1", "r4.1")
    assert html == ("Vanilla: 2 tubs on hand.\n\n<blockquote expandable>Figures:\n- vanilla on hand: 2 tubs\n"
                    "- vanilla unit cost: $3.00</blockquote>\n\n<code>r4.1</code>")
    assert html.count("<blockquote expandable>") == 1
    # negative controls: a "Figures:" the prose wrote mid-text, or a block followed by more prose, stays plain text;
    # a tag the model wrote is escaped, never a quote
    for plain in ("Figures:\n- a: 1\n\nthen more prose", "<blockquote expandable>x</blockquote>"):
        assert "<blockquote" not in render_part(f"{plain}\n\nr4.1", "r4.1")


async def test_a_9000_character_reply_goes_in_parts_each_accepted_well_formed_and_in_order(sender, api, store):
    body = "\n".join(f"line {i}: 🍦 vanilla & <chocolate> \"{i}\"" for i in range(240))
    assert len(body) > 9000
    asked = api.post_message(CHAT, CHAT, "/long")["message"]["message_id"]
    await store.admit_answered(Occurrence(f"tg:4242:{asked}", "tg:4242", "/long", WorkKind.CONTROL, f"tg:{CHAT}"),
                               lambda tx, work_id: ReportDraft(body, destination=f"tg:{CHAT}"))
    relay = Relay(store, sender, lambda chat: True, RelaySettings(chat_pace_s=0))
    assert await relay.drain() == 3
    texts = [m.text for m in api.sent]
    assert [t.rsplit("\n", 1)[1] for t in texts] == ["r1.1 (1/3)", "r1.1 (2/3)", "r1.1 (3/3)"]
    assert all(units(t) <= PART_LIMIT for t in texts)
    joined = "\n".join(t.rsplit("\n\n", 1)[0] for t in texts)
    assert joined == body                                                        # nothing lost, nothing split
    assert all(m.entities[-1]["type"] == "code" for m in api.sent)
    assert [m.reply_to for m in api.sent] == [asked, None, None]                 # the first part quotes the ask


async def test_an_item_named_a_lt_b_gt_goes_from_the_record_to_the_chat_as_typed(sender, api, store):
    await store.seed_shop([ItemSpec("a<b>", "tubs", 2, 1, 4, 300)], "test")
    await store.admit(Occurrence("tg:4242:7", "tg:4242", "stock", destination=f"tg:{CHAT}"))
    await Worker(store, OfflineModel()).drain()
    await Relay(store, sender, lambda chat: True, RelaySettings(chat_pace_s=0)).drain()
    [message] = api.sent
    assert message.text.startswith("Stock: a<b> 2 tubs.") and "- a<b> on hand: 2 tubs" in message.text
    assert message.html is not None and "a&lt;b&gt;" in message.html


async def test_a_reply_quotes_the_message_it_answers_and_a_deleted_original_is_no_refusal(sender, api):
    update = api.post_message(CHAT, CHAT, "stock")
    quoted = await sender.send(CHAT, "answer", reply_to=update["message"]["message_id"])
    assert quoted.kind is OutcomeKind.CONFIRMED and api.sent[-1].reply_to == update["message"]["message_id"]
    gone = await sender.send(CHAT, "answer", reply_to=987654)                    # deleted meanwhile
    assert gone.kind is OutcomeKind.CONFIRMED and api.sent[-1].reply_to is None


# ---- parts are counted as Telegram counts --------------------------------------------------------------------------
def test_formerly_bug_parts_counted_python_characters_so_emoji_parts_were_too_long_for_telegram():
    body = "😀" * 5000                                       # 5,000 characters, 10,000 UTF-16 code units
    parts = split_parts(body, "r3.1")
    assert len(parts) == 3 and all(units(p) <= PART_LIMIT for p in parts)
    assert "".join(p.rsplit("\n\n", 1)[0] for p in parts) == body


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "<", "&", "\"", "\n", "😀", "é", "👍🏽", " "]), max_size=9000).map("".join))
def test_every_part_fits_is_well_formed_html_and_the_parts_rebuild_the_body(body):
    parts = split_parts(body, "r9.2")
    for part in parts:
        assert units(part) <= PART_LIMIT
        text, entities = parse_html(render_part(part, "r9.2"))      # well-formed on its own
        assert text == part and entities[-1]["type"] == "code"
    rebuilt = "".join(p.rsplit("\n\n", 1)[0] for p in parts)
    assert "".join(rebuilt.split()) == "".join(body.split())      # nothing lost but whitespace at part ends
