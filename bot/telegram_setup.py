"""The Telegram side of starting: `getMe` waited out while the network comes up, then the commands menu, the
webhook (or its removal for long polling) and a first look at the owner chat. Setup failures are logged, never
fatal: the outbox keeps every reply until Telegram takes it."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from telegram.error import InvalidToken, TelegramError

from bot.config import Config
from bot.supervision import StartAborted
from producers.telegram.owner import COMMANDS
from producers.telegram.routing import ALLOWED_UPDATES

log = logging.getLogger("shopbot.app")


async def initialize(bot: Any, stopping: asyncio.Event) -> None:
    """`getMe` at start. Telegram unreachable (the network is not up yet) or answering anything but the bot (a 403,
    a 5xx, a body that is not the Bot API's: C21) is waited out with backoff; a refused token is a configuration error
    and stops the start; SIGINT/SIGTERM during the wait stop it cleanly."""
    delay = 0.5
    while True:
        try:
            await bot.initialize()
            return
        except InvalidToken:
            raise
        except TelegramError as exc:          # NetworkError, RetryAfter, Forbidden, ...
            log.warning("Telegram is not reachable at start (%s); trying again in %.1f s", type(exc).__name__, delay)
            try:
                await asyncio.wait_for(stopping.wait(), delay)
                raise StartAborted("stopped while waiting for Telegram at start")
            except TimeoutError:
                pass
            delay = min(30.0, delay * 2)


async def set_up(bot: Any, cfg: Config) -> None:
    try:
        await bot.set_my_commands([(name, what) for name, what in COMMANDS.items()])
        if cfg.webhook_url:
            await bot.set_webhook(cfg.webhook_url, secret_token=str(cfg.webhook_secret), max_connections=1,
                                  allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
            log.info("webhook mode: Telegram posts to the configured URL")
        else:
            await bot.delete_webhook(drop_pending_updates=False)   # never drop pending updates
    except Exception as exc:
        log.error("Telegram setup failed: %s", type(exc).__name__)
    if cfg.owner_chat_id:
        try:
            await bot.send_chat_action(cfg.owner_chat_id, "typing")
        except Exception as exc:
            log.error("cannot write to the owner chat %s (%s): the owner must open the bot in Telegram and press "
                      "Start once; until then briefs and notices wait in the outbox", cfg.owner_chat_id,
                      type(exc).__name__)
    if not cfg.owner_ids:
        log.warning("SHOPBOT_OWNER_IDS is empty: every Telegram sender will be refused")
