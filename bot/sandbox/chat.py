"""`shopbot chat`: type as the owner in the terminal against the local setup. Buttons are shown numbered; type
`/press N` to press one, `/quit` (or Ctrl-D) to leave.

Every message the bot sends, and every card it edits in place, is shown as it arrives (its Figures folded as the
phone folds them, behind ┃ bars), with the receipt on each of the owner's messages (👀: stored) and the progress
drafts of a turn (… Checking stock… (draft)), in the order the Bot API
received it, with its buttons, including messages nobody asked for (a stock check's proposal, a notice). After each
line typed, the chat waits until what it caused is settled (the update admitted, no request waiting or running, no
reply waiting to be sent) before it reads the next line, so an answer is never shown one message late.
"""
from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from bot.sandbox.bot_api.state import SentMessage
from bot.sandbox.demo import SANDBOX, Transcript, as_seen
from bot.sandbox.local_setup import OWNER_ID, LocalRun, local_product

SETTLE_TIMEOUT_S = 15.0


async def _stdin_lines() -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    while True:
        sys.stdout.write("you > ")
        sys.stdout.flush()
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        yield line.rstrip("\n")


class ChatView:
    """Shows the owner's chat as it happens: each new message and each edit, with numbered buttons."""

    def __init__(self, run: LocalRun, t: Transcript) -> None:
        self.run, self.t = run, t
        self.shown = 0
        self.buttons: list[tuple[str, int]] = []      # (callback data, message id), numbered from 1

    def _labels(self, markup: dict[str, Any] | None, message_id: int) -> list[str] | None:
        labels = []
        for row in (markup or {}).get("inline_keyboard", []):
            for button in row:
                self.buttons.append((button["callback_data"], message_id))
                labels.append(f"{len(self.buttons)}: {button['text']}")
        return labels or None

    def show_new(self) -> None:
        timeline = self.run.api.timeline
        while self.shown < len(timeline):
            kind, item = timeline[self.shown]
            self.shown += 1
            if isinstance(item, SentMessage):
                if item.chat_id == OWNER_ID:
                    self.t.bot(as_seen(item.text, item.html), self._labels(item.reply_markup, item.message_id))
            elif not isinstance(item, dict):
                continue                     # a Bot API call or answer: not shown
            elif kind == "edited" and item["chat_id"] == OWNER_ID:
                self.t.note(f"the bot edited its message {item['message_id']}; it now reads:")
                self.t.bot(as_seen(item["text"], item["html"]), self._labels(item["reply_markup"], item["message_id"]))
            elif kind == "reaction" and item["chat_id"] == OWNER_ID and item["emoji"]:
                self.t.receipt(item["emoji"])
            elif kind == "draft" and item["chat_id"] == OWNER_ID:
                self.t.draft(item["text"])

    async def follow(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.show_new()
            try:
                await self.run.api.wait_for(lambda: stop.is_set() or self.shown < len(self.run.api.timeline),
                                            timeout=3600)
            except TimeoutError:
                continue
        self.show_new()


async def settled(run: LocalRun, update_id: int | None, timeout: float = SETTLE_TIMEOUT_S) -> bool:
    """Until the update (if any) was admitted and nothing is still waiting, running or unsent."""
    assert run.app.parts is not None, "the local product has started"
    store = run.app.parts.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        if update_id is not None:
            await run.admitted(update_id, timeout=timeout)
    except TimeoutError:
        return False
    while loop.time() < deadline:
        status = await store.status(window_seconds=60)
        work, deliveries = status.agent_work, status.deliveries
        if not (work.pending or work.running or deliveries.pending or deliveries.sending):
            return True
        await asyncio.sleep(0.05)        # a terminal's pace: the store is asked again
    return False


async def chat(lines: AsyncIterator[str] | None = None, out: TextIO = sys.stdout, *, echo: bool | None = None,
               overrides: dict[str, str] | None = None) -> None:
    """Run the chat; `lines` (default: the terminal) are what the owner types. With `echo` (default when stdin is
    not a terminal) each line is printed as the owner's, so a transcript reads in order."""
    t = Transcript(out)
    if echo is None:
        echo = lines is not None or not sys.stdin.isatty()
    out.write("shopbot chat: you are the owner (user 1001). Try: stock, how much vanilla, brief, reorder, /status, "
              "/pending, /forget. /press N presses button N; /quit leaves.\n")
    async with local_product({**SANDBOX, **(overrides or {})}) as run:
        view = ChatView(run, t)
        stop = asyncio.Event()
        follower = asyncio.create_task(view.follow(stop))
        try:
            await run.api.wait_for(lambda: run.api.offsets_requested != [], timeout=10)
            producers = run.app.parts.producers if run.app.parts else None
            if producers is not None:        # its start-up check has committed (it runs under its own lease)
                await asyncio.wait_for(producers.started.wait(), SETTLE_TIMEOUT_S)
            await settled(run, None)         # what the bot says at start (a stock check's proposals) comes first
            async for line in lines if lines is not None else _stdin_lines():
                line = line.strip()
                if line == "/quit":
                    break
                if not line:
                    view.show_new()
                    continue
                if echo:
                    t.owner(line)
                if line.startswith("/press"):
                    try:
                        data, message_id = view.buttons[int(line.split()[1]) - 1]
                    except (IndexError, ValueError):
                        out.write("  (no such button: /press N with N from the numbers shown)\n")
                        continue
                    update = run.api.post_callback(OWNER_ID, OWNER_ID, data, message_id)
                else:
                    update = run.api.post_message(OWNER_ID, OWNER_ID, line)
                if not await settled(run, update["update_id"]):
                    out.write("  (no reply yet; press Enter to look again)\n")
                view.show_new()
        finally:
            stop.set()
            await follower


def main() -> int:
    try:
        asyncio.run(chat())
    except KeyboardInterrupt:
        pass
    return 0
