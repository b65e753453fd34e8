"""Progress drafts (C20): while a turn runs, the owner sees what it is doing, as a Telegram draft.

A turn still running `after_s` after it started (SHOPBOT_PROGRESS_AFTER_MS, default 1.5 s; 0: at once) shows a
draft (`sendMessageDraft`, private chats only) naming the tool steps the run has journaled so far, in the owner's
language: "Checking stock…", "Reading two weeks of sales…", and before any step "Working on it…". A draft is a
hint, never an answer:

- its text is made here from the names of journaled tools only (`Journal.run_steps`), through fixed phrases: never
  model prose, never a number (a phrase with a digit is refused by `draft_text`, so nothing C13 has not checked
  can reach the owner this way);
- at most one draft a second per chat (over all turns of that chat), renewed while the step is unchanged only
  every `renew_s` (Telegram shows a draft about 30 s);
- a failed call is logged at debug by the sender and changes nothing; nothing on the turn's path waits for
  Telegram, except with `after_s == 0`, where the turn's first draft is sent (or has failed) before the turn
  ends, so it reaches the owner before the reply (bounded by `first_wait_s`);
- the answer itself comes only through the outbox (C7), as before.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

log = logging.getLogger("shopbot.progress")

WORKING = "working"
# tool -> the step it is, in words; a tool not named here is "working"
STEP_OF_TOOL = {"list_stock": "stock", "get_item": "stock", "reorder_need": "reorder", "draft_order": "order",
                "propose_order": "order", "sales_rate": "sales", "days_of_cover": "cover", "on_order": "on_order",
                "recent_counts": "counts", "open_proposals": "proposals", "order_cost": "prices",
                "waiting_for_owner": "pending", "offer_received": "on_order", "reorder_suggestions": "reorder"}
PHRASES: dict[str, dict[str, str]] = {
    "en": {WORKING: "Working on it…", "stock": "Checking stock…", "reorder": "Working out what to reorder…",
           "order": "Preparing an order for your approval…", "sales": "Reading two weeks of sales…",
           "cover": "Working out how long the stock lasts…", "on_order": "Checking what is on order…",
           "counts": "Reading the latest till counts…", "proposals": "Checking open proposals…",
           "prices": "Working out the cost…", "pending": "Checking what waits for you…"},
    "de": {WORKING: "Einen Moment…", "stock": "Prüfe den Bestand…", "reorder": "Prüfe, was nachzubestellen ist…",
           "order": "Bereite eine Bestellung zur Freigabe vor…", "sales": "Lese die Verkäufe der letzten zwei Wochen…",
           "cover": "Rechne aus, wie lange der Bestand reicht…", "on_order": "Prüfe offene Bestellungen…",
           "counts": "Lese die letzten Kassenzählungen…", "proposals": "Prüfe offene Vorschläge…",
           "prices": "Rechne die Kosten aus…", "pending": "Prüfe, was auf dich wartet…"},
    "fr": {WORKING: "Je m'en occupe…", "stock": "Je vérifie le stock…", "reorder": "Je regarde quoi recommander…",
           "order": "Je prépare une commande à valider…", "sales": "Je lis deux semaines de ventes…",
           "cover": "Je calcule combien de temps dure le stock…", "on_order": "Je vérifie les commandes en cours…",
           "counts": "Je lis les derniers comptages de caisse…", "proposals": "Je vérifie les propositions ouvertes…",
           "prices": "Je calcule le coût…", "pending": "Je regarde ce qui vous attend…"},
    "es": {WORKING: "Estoy en ello…", "stock": "Revisando el stock…", "reorder": "Viendo qué hay que reponer…",
           "order": "Preparando un pedido para tu aprobación…", "sales": "Leyendo dos semanas de ventas…",
           "cover": "Calculando cuánto dura el stock…", "on_order": "Revisando lo que está pedido…",
           "counts": "Leyendo los últimos recuentos de caja…", "proposals": "Revisando las propuestas abiertas…",
           "prices": "Calculando el coste…", "pending": "Revisando lo que te espera…"},
}
_DIGIT = re.compile(r"\d")


def draft_text(steps: Sequence[str], language: str, phrases: dict[str, dict[str, str]] | None = None) -> str:
    """The draft for a run that journaled `steps` (tool names): the latest step's phrase in `language` (English
    when the shop's language has none). A phrase holding a digit is refused for "working" (C20: no number)."""
    table = (phrases or PHRASES)
    words = table.get(language) or table["en"]
    step = STEP_OF_TOOL.get(steps[-1], WORKING) if steps else WORKING
    text = words.get(step) or words[WORKING]
    if _DIGIT.search(text):
        log.error("progress phrase %r holds a digit: not shown (C20)", step)
        text = PHRASES["en"][WORKING]
    return text


def draft_id(run_id: str) -> int:
    """A stable non-zero id per run: its drafts replace each other (Telegram animates changes of one draft)."""
    return zlib.crc32(run_id.encode()) % (2**31 - 1) + 1


class ProgressDrafts:
    def __init__(self, send: Callable[[int, int, str], Awaitable[bool]], steps: Callable[[str], Awaitable[list[str]]],
                 *, after_s: float, language: str = "en", min_interval_s: float = 1.0, poll_s: float = 0.5,
                 renew_s: float = 20.0, first_wait_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._send = send                  # e.g. TelegramSender.draft (best effort, logs its own failures)
        self._steps = steps                # e.g. Store.run_steps
        self.after_s = after_s
        self.language = language
        self.min_interval_s = min_interval_s
        self.poll_s = poll_s
        self.renew_s = renew_s
        self.first_wait_s = first_wait_s
        self._monotonic = monotonic
        self._last_sent: dict[int, float] = {}     # chat -> when its last draft call started
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0                      # draft calls started (tests, benchmarks)

    @contextlib.asynccontextmanager
    async def during(self, chat_id: int, run_id: str) -> AsyncIterator[None]:
        """Drafts in `chat_id` while the body (a turn's model call) runs."""
        first = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._show(chat_id, run_id, first), name=f"progress-{chat_id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        try:
            yield
            if self.after_s == 0 and not task.done():
                # C20 with 0: the turn's first draft is sent (or has failed) before its reply can be (a turn that
                # failed or was cancelled does not wait)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(first.wait()), self.first_wait_s)
        finally:
            task.cancel()

    async def _show(self, chat_id: int, run_id: str, first: asyncio.Event) -> None:
        try:
            await asyncio.sleep(self.after_s)
            shown, shown_at = "", float("-inf")
            while True:
                try:
                    text = draft_text(await self._steps(run_id), self.language)
                except Exception as exc:      # a busy database: no draft this time, nothing else changes
                    log.debug("progress steps unreadable run_id=%s: %s", run_id, type(exc).__name__)
                    text = ""
                now = self._monotonic()
                due = text and (text != shown or now - shown_at >= self.renew_s)
                if due and now - self._last_sent.get(chat_id, float("-inf")) >= self.min_interval_s:
                    self._last_sent[chat_id] = now
                    self.sent += 1
                    await self._send(chat_id, draft_id(run_id), text)
                    shown, shown_at = text, now
                    first.set()
                elif not text:
                    first.set()
                await asyncio.sleep(self.poll_s)
        finally:
            first.set()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("progress task failed (a hint, ignored): %r", task.exception())

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
