"""The local setup shared by `shopbot demo` and `shopbot chat`: a local Bot API server on 127.0.0.1, a temporary
database, the offline model and the whole product in this process. No token, no API key, no network."""
from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import config as config_module
from bot.app import App
from bot.sandbox.bot_api import LocalBotApi, SentMessage
from bot.sandbox.supplier import LocalSupplier

OWNER_ID = 1001
DEMO_TOKEN = "123456:local-demo-token"


@dataclass
class LocalRun:
    api: LocalBotApi
    app: App
    task: asyncio.Task[None]
    supplier: LocalSupplier
    seen: int = 0

    def owner_messages(self) -> list[SentMessage]:
        return [m for m in self.api.sent if m.chat_id == OWNER_ID]

    def owner_texts(self) -> list[str]:
        """Every text the owner's chat has shown: each message as sent, then every edit of a message in place."""
        return [m.text for m in self.owner_messages()] + [e["text"] for e in self.api.edited_texts
                                                           if e["chat_id"] == OWNER_ID]

    def now(self, message: SentMessage) -> dict[str, Any]:
        """A message as it reads now, after edits: {"text", "markup", ...}."""
        return self.api.current(message.chat_id, message.message_id) or {"text": message.text,
                                                                          "markup": message.reply_markup}

    async def replies(self, count: int, timeout: float = 10.0) -> list[SentMessage]:
        """Wait until `count` new bot messages reached the owner's chat; return them."""
        start = self.seen
        await self.api.wait_for(lambda: len(self.owner_messages()) >= start + count, timeout=timeout)
        self.seen = start + count
        return self.owner_messages()[start:start + count]

    async def admitted(self, update_id: int, timeout: float = 10.0) -> None:
        """Wait until the bot confirmed this update (it asked for a higher offset: admitted and committed)."""
        await self.api.wait_for(lambda: any((o or 0) > update_id for o in self.api.offsets_requested), timeout=timeout)


# The sandbox plays the same at any hour and on any day: the packaged shop's schedules are replaced by ones that fire
# only on 29 February with a second of grace. A start within the opening brief's grace, or on a Monday within the
# weekly review's, would otherwise run one at start, ahead of the demo's script and of what a test expects;
# `/brief` asks for the brief at any time.
QUIET_SCHEDULES = """
[[schedule]]
name = "opening_brief"
cron = "30 8 29 2 *"
prompt = "Prepare the opening brief"
grace = "1s"

[[schedule]]
name = "weekly_review"
cron = "0 8 29 2 *"
prompt = "Weekly review"
grace = "1s"
"""


def quiet_shop(folder: Path) -> Path:
    """The packaged example shop (beside this module) with QUIET_SCHEDULES instead of its own, written as
    `folder`/example-shop/shop.toml (a folder of its own: a test that lists the files the product made in `folder`
    does not see it). Written once: a product may be reading it while a later command asks for it again."""
    path = folder / "example-shop" / "shop.toml"
    if not path.exists():
        shop = (Path(__file__).resolve().parent / "shop.example.toml").read_text(encoding="utf-8")
        path.parent.mkdir(exist_ok=True)
        path.write_text(shop.split("[[schedule]]")[0].rstrip() + "\n" + QUIET_SCHEDULES, encoding="utf-8")
    return path


@asynccontextmanager
async def local_product(overrides: dict[str, str] | None = None) -> AsyncIterator[LocalRun]:
    with tempfile.TemporaryDirectory(prefix="shopbot-local-") as tmp:
        token = os.environ.get("TELEGRAM_BOT_TOKEN") or DEMO_TOKEN
        async with LocalBotApi(token) as api, LocalSupplier("local-supplier-token") as supplier:
            env = {k: v for k, v in config_module.environment().items()
                   if not (k.startswith("SHOPBOT_") or k.startswith("TELEGRAM_"))}
            env.update({
                "SHOPBOT_DB": str(Path(tmp) / "demo.sqlite3"),
                "TELEGRAM_BOT_TOKEN": token,
                "TELEGRAM_API_BASE_URL": api.base_url,
                "SHOPBOT_OWNER_IDS": str(OWNER_ID),
                "SHOPBOT_MODEL": "offline",
                "SHOPBOT_HTTP_PORT": "0",
                "SHOPBOT_CHAT_PACE_MS": "200",
                "SHOPBOT_SUPPLIER_URL": supplier.base_url,
                "SHOPBOT_SUPPLIER_TOKEN": "local-supplier-token",
                "SHOPBOT_SHOP_FILE": str(quiet_shop(Path(tmp))),
            })
            for key in ("SHOPBOT_LOG_LEVEL", "SHOPBOT_LOG_FILE", "SHOPBOT_SHOP_FILE"):
                if os.environ.get(key):
                    env[key] = os.environ[key]
            env.update(overrides or {})
            cfg = config_module.load(env)
            async with App(cfg, poll_timeout=10) as app:
                task = asyncio.create_task(app.run())
                run = LocalRun(api, app, task, supplier)
                try:
                    yield run
                finally:
                    app.stop()
                    await task
