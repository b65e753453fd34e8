"""What the composition root built (bot/app.py): every part of one process, None where it is off."""
from __future__ import annotations

from dataclasses import dataclass

from bot.http import Health, HttpServer
from bot.leadership import Leader, Presence
from bot.relays.progress import ProgressDrafts
from bot.relays.receipts import ReceiptRelay
from bot.relays.sender import TelegramSender
from bot.relays.supplier import ActionRelay
from bot.relays.telegram import Relay
from bot.relays.typing import TypingIndicator
from bot.shop_file import ShopSpec
from producers.scheduler import ProducerScheduler
from producers.telegram.polling import Ingress
from store import Store
from worker.worker import Worker


@dataclass
class Parts:
    store: Store
    shop: ShopSpec
    worker: Worker
    relay: Relay | None
    ingress: Ingress | None
    sender: TelegramSender | None
    http: HttpServer | None
    health: Health
    actions: ActionRelay | None = None
    producers: ProducerScheduler | None = None
    typing: TypingIndicator | None = None
    leaders: dict[str, Leader] | None = None
    presence: Presence | None = None
    receipts: ReceiptRelay | None = None
    progress: ProgressDrafts | None = None
