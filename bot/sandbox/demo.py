"""`shopbot demo`: a short scripted day against the local Bot API server, printed as the owner would see it."""
from __future__ import annotations

import asyncio
import html as html_module
import re
import sys
import time
from typing import Any, TextIO

from bot.cli.render import print_status
from bot.sandbox.bot_api.state import SentMessage
from bot.sandbox.local_setup import OWNER_ID, LocalRun, local_product
from store import Status

STRANGER_ID = 666
FOLDED_LINES = 3       # an expandable quote shows its first lines until tapped (a phone shows about three)
# the sandbox's model answers at once: drafts are shown from the start (the product's default waits 1.5 s)
SANDBOX = {"SHOPBOT_PROGRESS_AFTER_MS": "0"}
_QUOTE = re.compile(r"<blockquote expandable>(.*?)</blockquote>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def as_seen(text: str, html: str | None) -> str:
    """A message as the owner's phone shows it: an expandable quote folded to its first lines behind a bar, the rest
    counted ("tap to open"); the other tags gone."""
    if not html or "<blockquote expandable>" not in html:
        return text

    def fold(match: re.Match[str]) -> str:
        lines = html_module.unescape(match.group(1)).splitlines()
        shown = [f"┃ {line}" for line in lines[:FOLDED_LINES]]
        if len(lines) > FOLDED_LINES:
            shown.append(f"┃ … {len(lines) - FOLDED_LINES} more (tap to open)")
        return "\n".join(shown)
    return html_module.unescape(_TAG.sub("", _QUOTE.sub(fold, html)))


class Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.start = time.monotonic()

    def owner(self, text: str) -> None:
        self.out.write(f"\n  Lucy  > {text}\n")

    def bot(self, text: str, buttons: list[str] | None = None) -> None:
        lines = text.splitlines() or [""]
        self.out.write(f"  bot   < {lines[0]}\n")
        for line in lines[1:]:
            self.out.write(f"          {line}\n")
        if buttons:
            self.out.write("          " + "  ".join(f"[{b}]" for b in buttons) + "\n")

    def note(self, text: str) -> None:
        self.out.write(f"  ({text})\n")

    def receipt(self, emoji: str | None) -> None:
        """The reaction on the owner's message: it was stored (C19)."""
        self.out.write(f"          {emoji} on Lucy's message (stored)\n")

    def draft(self, text: str) -> None:
        """A progress draft (C20): shown in the chat while the turn runs, never a message."""
        self.out.write(f"  bot   … {text}  (draft)\n")


def _buttons(message: SentMessage) -> list[str]:
    markup = message.reply_markup or {}
    return [b["text"] for row in markup.get("inline_keyboard", []) for b in row]


async def _say(run: LocalRun, t: Transcript, text: str, replies: int = 1
               ) -> tuple[dict[str, Any], list[SentMessage]]:
    t.owner(text)
    drafts = len(run.api.drafts)
    update = run.api.post_message(OWNER_ID, OWNER_ID, text)
    got = await run.replies(replies)
    message_id = update["message"]["message_id"]
    if run.app.cfg.receipt_reaction:
        await run.api.wait_for(lambda: run.api.reaction(OWNER_ID, message_id) is not None, timeout=10)
        t.receipt(run.api.reaction(OWNER_ID, message_id))
    for draft in run.api.drafts[drafts:]:
        t.draft(draft["text"])
    for message in got:
        t.bot(as_seen(message.text, message.html), _buttons(message))
    return update, got


async def play(out: TextIO) -> Status:
    t = Transcript(out)
    out.write("shopbot demo: a local Telegram Bot API on 127.0.0.1, the offline model, a temporary database.\n")
    async with local_product(SANDBOX) as run:
        await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
        t.note("at start the stock watcher finds vanilla and strawberry below their reorder points; each check "
               "proposes an order, which waits for Lucy's approval")
        for message in await run.replies(2, timeout=15):
            t.bot(as_seen(message.text, message.html), _buttons(message))
        await _say(run, t, "How much vanilla do we have?")

        t.note("Lucy taps 'stock' and the signal drops: Telegram delivers the same message twice")
        update, _ = await _say(run, t, "stock")
        run.api.redeliver(update["update_id"])
        await run.admitted(max(run.api._all_updates))
        t.note(f"the second copy was admitted as a duplicate: {len(run.owner_messages()) - run.seen} extra replies")

        t.note("the next reply reaches Telegram but the confirmation is lost on the way back")
        run.api.inject("sendMessage", "drop_after_accept")
        _, got = await _say(run, t, "count chocolate", replies=2)
        notice = got[-1]
        t.note("Lucy has the reply, so she presses 'I have it'")
        assert notice.reply_markup is not None, "the notice has its Resend / I have it buttons"
        run.api.post_callback(OWNER_ID, OWNER_ID, notice.reply_markup["inline_keyboard"][0][1]["callback_data"],
                              notice.message_id)
        await run.api.wait_for(lambda: "noted that you have" in run.now(notice)["text"], timeout=10)
        t.note("the notice is edited in place with the decision:")
        t.bot(run.now(notice)["text"])

        t.note(f"a stranger (user {STRANGER_ID}) writes to the bot")
        stranger = run.api.post_message(STRANGER_ID, STRANGER_ID, "give me free ice cream")
        await run.admitted(stranger["update_id"])
        t.note("ignored: no work, no reply; counted by id in the status below")

        await _say(run, t, "/brief")
        await _say(run, t, "reorder")

        proposal = next(m for m in run.owner_messages() if m.text.startswith("Order proposal")
                        and "vanilla" in m.text.splitlines()[0])
        t.note("Lucy approves the vanilla order: the card is edited in place, then the supplier's answer arrives")
        assert proposal.reply_markup is not None, "the proposal has its Approve / Reject buttons"
        run.api.post_callback(OWNER_ID, OWNER_ID, proposal.reply_markup["inline_keyboard"][0][0]["callback_data"],
                              proposal.message_id)
        for message in await run.replies(1):
            card = run.now(proposal)
            t.note("the card now reads:")
            t.bot(card["text"], [b["text"] for row in (card["markup"] or {}).get("inline_keyboard", []) for b in row])
            t.bot(message.text)
        t.note(f"the local supplier holds {len(run.supplier.orders)} order(s): "
               + ", ".join(f"{o['order_id']} {o['lines'][0]['quantity']} {o['lines'][0]['item']}"
                           for o in run.supplier.orders))
        assert run.app.parts is not None
        status = await run.app.parts.store.status()
    out.write("\nFinal status:\n")
    print_status(status, out)
    out.write(f"\ndemo finished in {time.monotonic() - t.start:.1f} s\n")
    return status


def main(out: TextIO = sys.stdout) -> int:
    status = asyncio.run(play(out))
    return 0 if status.work.pending == 0 and status.work.running == 0 else 1
