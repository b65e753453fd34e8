"""The shop file (TOML): time zone, currency, supplier, spending limits, items, schedules. Unknown fields are refused
with the path of the field, so a typo never silently falls back to a default."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from producers.schedule import Schedule, ScheduleError, parse_schedules
from store import ItemSpec
from worker.money import LOCALES


class ShopFileError(ValueError):
    pass


@dataclass(frozen=True)
class ShopSpec:
    name: str
    timezone: str
    currency: str
    locale: str
    hours: tuple[tuple[str, str], ...]
    supplier: str
    lead_time_days: int
    order_max_cents: int | None
    day_max_cents: int | None
    count_tolerance: int
    stock_cron: str
    items: tuple[ItemSpec, ...]
    schedules: tuple[Schedule, ...]
    source: str


TOP = {"name", "timezone", "currency", "locale", "hours", "count_tolerance", "supplier", "limits", "stock_watch",
       "items", "schedule"}
ITEM = {"unit", "on_hand", "reorder_point", "target", "unit_cost_cents", "max_order"}
_ITEM_NAME = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,39}$")


def _unknown(table: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise ShopFileError(f"unknown field {where}{extra[0]} (allowed: {', '.join(sorted(allowed))})")


MAX_NUMBER = 1_000_000_000     # stock counts and cents beyond this are typos, and SQLite integers are 64-bit


def _int(value: object, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_NUMBER:
        raise ShopFileError(f"{where} must be a whole number from {minimum} to {MAX_NUMBER:,}, got {value!r}"[:300])
    return value


def _text(value: object, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip() or len(value) > 100 or "\n" in value:
        raise ShopFileError(f"{where} must be a line of text (1-100 characters), got {value!r}"[:300])
    return value


def _table(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ShopFileError(f"{where} must be a table")
    return value


def parse_shop(text: str, source: str = "shop file") -> ShopSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShopFileError(f"{source} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ShopFileError(f"{source} nests tables or arrays too deeply") from None
    _unknown(data, TOP, "")
    timezone = data.get("timezone")
    if not isinstance(timezone, str) or not timezone:
        raise ShopFileError("timezone is required: an IANA name such as Europe/London")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ShopFileError(f"timezone {timezone[:80]!r} is not a known IANA time zone") from None
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Z]{3}", currency):
        raise ShopFileError(f"currency must be a three-letter code such as USD, got {currency!r}")
    locale = data.get("locale", "en_US")
    if not isinstance(locale, str) or not re.fullmatch(r"[a-z]{2}(?:[_-][A-Z]{2})?", locale) \
            or locale[:2] not in LOCALES:
        raise ShopFileError(f"locale must be a language (and region) such as en_US or de_DE, one of the languages "
                            f"{', '.join(LOCALES)}; got {locale!r}"[:300])
    hours_table = _table(data.get("hours", {}), "hours")
    hours = []
    for days, span in hours_table.items():
        if not re.fullmatch(r"[A-Za-z, -]{1,40}", days) or not isinstance(span, str) or not (
                span == "closed" or re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d", span)):
            raise ShopFileError(f"hours.{days[:40]} must be \"HH:MM-HH:MM\" or \"closed\", got {span!r}"[:300])
        hours.append((days, span))
    supplier = _table(data.get("supplier", {"name": "supplier"}), "supplier")
    _unknown(supplier, {"name", "lead_time_days"}, "supplier.")
    limits = _table(data.get("limits", {}), "limits")
    _unknown(limits, {"order_max_cents", "day_max_cents"}, "limits.")
    watch = _table(data.get("stock_watch", {}), "stock_watch")
    _unknown(watch, {"cron"}, "stock_watch.")
    items_table = _table(data.get("items", {}), "items")
    if not items_table:
        raise ShopFileError("the shop needs at least one [items.<name>] table")
    items = []
    for name, raw in items_table.items():
        where = f"items.{name}"
        if not _ITEM_NAME.fullmatch(name):
            raise ShopFileError(f"{where}: item names are 1-40 lowercase letters, digits, spaces, - or _")
        raw = _table(raw, where)
        _unknown(raw, ITEM, f"{where}.")
        for required in ("on_hand", "reorder_point", "target", "unit_cost_cents"):
            if required not in raw:
                raise ShopFileError(f"{where}.{required} is required")
        max_order = raw.get("max_order")
        items.append(ItemSpec(
            item=name, unit=_text(raw.get("unit"), f"{where}.unit", "units"),
            on_hand=_int(raw["on_hand"], f"{where}.on_hand"),
            reorder_point=_int(raw["reorder_point"], f"{where}.reorder_point"),
            target=_int(raw["target"], f"{where}.target"),
            unit_cost_cents=_int(raw["unit_cost_cents"], f"{where}.unit_cost_cents"),
            max_order=_int(max_order, f"{where}.max_order", 1) if max_order is not None else None))
    schedules_raw = data.get("schedule", [])
    if not isinstance(schedules_raw, list):
        raise ShopFileError("schedule must be an array of tables: [[schedule]]")
    stock_cron = watch.get("cron", "*/15 * * * *")
    try:
        schedules = parse_schedules(schedules_raw, shop_timezone=timezone)
        # the stock watcher's cron follows the same rules as a schedule's (checked the same way)
        parse_schedules([{"name": "stock_watch", "cron": stock_cron, "prompt": "stock check"}], shop_timezone=timezone)
    except ScheduleError as exc:
        raise ShopFileError(str(exc).replace("schedule 'stock_watch'", "[stock_watch]")) from None
    return ShopSpec(
        name=_text(data.get("name"), "name", "the shop"), timezone=timezone, currency=currency, locale=locale,
        hours=tuple(hours),
        supplier=_text(supplier.get("name"), "supplier.name", "supplier"),
        lead_time_days=_int(supplier.get("lead_time_days", 3), "supplier.lead_time_days", 1),
        order_max_cents=(_int(limits["order_max_cents"], "limits.order_max_cents")
                         if "order_max_cents" in limits else None),
        day_max_cents=_int(limits["day_max_cents"], "limits.day_max_cents") if "day_max_cents" in limits else None,
        count_tolerance=_int(data.get("count_tolerance", 0), "count_tolerance"),
        stock_cron=stock_cron, items=tuple(items), schedules=tuple(schedules),
        source=source)


def load_shop(path: Path) -> ShopSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ShopFileError(f"no shop file at {path.resolve()} "
                            "(set SHOPBOT_SHOP_FILE; see shop.example.toml)") from None
    except UnicodeDecodeError:
        raise ShopFileError(f"{path} is not UTF-8 text") from None
    return parse_shop(text, str(path))
