"""`shopbot chat`: type as the owner in the terminal against the local setup. Buttons are shown numbered; type
`/press N` to press one, `/quit` (or Ctrl-D) to leave."""
from __future__ import annotations

import asyncio
import sys

from bot.sandbox.demo import Transcript
from bot.sandbox.local_setup import OWNER_ID, local_product


async def _read_line(prompt: str) -> str | None:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line.rstrip("\n") if line else None


async def chat() -> None:
    t = Transcript(sys.stdout)
    print("shopbot chat: you are the owner (user 1001). Try: stock, how much vanilla, brief, reorder, /status, "
          "/pending, /forget. /press N presses button N; /quit leaves.")
    buttons: list[tuple[str, int]] = []     # (callback data, message id), numbered from 1
    async with local_product() as run:
        async def show_new() -> None:
            for message in run.owner_messages()[run.seen:]:
                labels = []
                markup = message.reply_markup or {}
                for row in markup.get("inline_keyboard", []):
                    for button in row:
                        buttons.append((button["callback_data"], message.message_id))
                        labels.append(f"{len(buttons)}: {button['text']}")
                t.bot(message.text, labels or None)
                run.seen += 1
        while True:
            line = await _read_line("you > ")
            if line is None or line.strip() == "/quit":
                break
            line = line.strip()
            if not line:
                await show_new()
                continue
            if line.startswith("/press"):
                try:
                    data, message_id = buttons[int(line.split()[1]) - 1]
                except (IndexError, ValueError):
                    print("  (no such button: /press N with N from the numbers shown)")
                    continue
                run.api.post_callback(OWNER_ID, OWNER_ID, data, message_id)
            else:
                run.api.post_message(OWNER_ID, OWNER_ID, line)
            try:
                await run.api.wait_for(lambda: len(run.owner_messages()) > run.seen, timeout=15)
                await asyncio.sleep(0.3)     # let a second message of the same answer (a notice) arrive too
            except TimeoutError:
                print("  (no reply yet; press Enter to look again)")
            await show_new()


def main() -> int:
    try:
        asyncio.run(chat())
    except KeyboardInterrupt:
        pass
    return 0
