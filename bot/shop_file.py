"""The shop file (TOML): time zone, currency, supplier, spending limits, items, schedules. Unknown fields are refused
with the path of the field, so a typo never silently falls back to a default."""
from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar, overload
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from producers.schedule import (
    OPENING_BRIEF,
    WEEKLY_REVIEW,
    Schedule,
    ScheduleError,
    parse_schedules,
    weekly_review_default,
)
from store import ItemSpec
from store.units import UnitWords, singular
from worker.money import LOCALES, formattable
from worker.ordering import OrderingSettings

T = TypeVar("T")


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
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (item, its other names), for items that have some
    unit_words: tuple[UnitWords, ...] = ()    # each unit's forms (singular, plural, Spanish when named): store/units.py
    ordering: OrderingSettings = OrderingSettings()          # [ordering]: the window and service level of suggestions


TOP = {"name", "timezone", "currency", "locale", "hours", "count_tolerance", "supplier", "limits", "stock_watch",
       "items", "schedule", "ordering"}
ITEM = {"unit", "unit_es", "on_hand", "reorder_point", "target", "unit_cost_cents", "max_order", "aliases", "pack",
        "min_order", "price_cents"}
MAX_ALIASES = 10
_ITEM_NAME = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,39}$")


def _unknown(table: dict[str, object], allowed: set[str], where: str) -> None:
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


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ShopFileError(f"{where} must be a table")
    return value


def _forms(value: object, where: str) -> tuple[str, str]:
    """`["tub", "tubs"]`: a unit's singular and plural, each a line of text."""
    if not isinstance(value, list) or len(value) != 2:
        raise ShopFileError(f"{where} must be [\"singular\", \"plural\"], got {value!r}"[:300])
    one, other = (_text(v, where, "") for v in value)
    return one, other


def _unit_words(table: dict[str, object], where: str) -> UnitWords:
    """An item's unit: `unit = "tubs"` (the plural; the singular by the English rule) or `unit = ["tub", "tubs"]`,
    and optionally `unit_es = ["tarrina", "tarrinas"]` (Spanish replies use them)."""
    raw = table.get("unit")
    if isinstance(raw, list):
        one, other = _forms(raw, f"{where}.unit")
    else:
        other = _text(raw, f"{where}.unit", "units")
        one = singular(other)
    es = _forms(table["unit_es"], f"{where}.unit_es") if "unit_es" in table else (None, None)
    return UnitWords(one, other, *es)


def _aliases(value: object, where: str) -> tuple[str, ...]:
    """An item's other names (`aliases = ["vainilla"]`): lowercase names like item names, each at most once."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_ALIASES:
        raise ShopFileError(f"{where} must be a list of at most {MAX_ALIASES} names, got {value!r}"[:300])
    out: list[str] = []
    for alias in value:
        if not isinstance(alias, str) or not _ITEM_NAME.fullmatch(alias):
            raise ShopFileError(f"{where}: each alias is 1-40 lowercase letters, digits, spaces, - or _, "
                                f"got {alias!r}"[:300])
        if alias not in out:
            out.append(alias)
    return tuple(out)


class _Problems:
    """Collects every problem of one shop file, so a start reports all of them at once (one line each, each with
    its path in the file)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @overload
    def check(self, fn: Callable[[], T]) -> T | None: ...
    @overload
    def check(self, fn: Callable[[], T], default: T) -> T: ...

    def check(self, fn: Callable[[], T], default: T | None = None) -> T | None:
        """`fn()`, or `default` after recording its ShopFileError."""
        try:
            return fn()
        except ShopFileError as exc:
            self.lines.append(str(exc))
            return default

    def add(self, line: str) -> None:
        self.lines.append(line)


def _timezone(data: dict[str, object]) -> str:
    timezone = data.get("timezone")
    if not isinstance(timezone, str) or not timezone:
        raise ShopFileError("timezone is required: an IANA name such as Europe/London")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ShopFileError(f"timezone {timezone[:80]!r} is not a known IANA time zone") from None
    return timezone


def _currency(data: dict[str, object]) -> str:
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Z]{3}", currency):
        raise ShopFileError(f"currency must be a three-letter code such as USD, got {currency!r}"[:300])
    if not formattable(currency):     # refused at start, never shown wrong (money reads through Babel, CLDR)
        raise ShopFileError(f"currency {currency!r} is not one Babel (CLDR) can format; use an ISO 4217 code such "
                            "as USD, EUR, GBP, JPY or KWD")
    return currency


def _locale(data: dict[str, object]) -> str:
    locale = data.get("locale", "en_US")
    if not isinstance(locale, str) or not re.fullmatch(r"[a-z]{2}(?:[_-][A-Z]{2})?", locale) \
            or locale[:2] not in LOCALES:
        raise ShopFileError(f"locale must be a language (and region) such as en_US or de_DE, one of the languages "
                            f"{', '.join(LOCALES)}; got {locale!r}"[:300])
    return locale


def _hours(data: dict[str, object]) -> tuple[tuple[str, str], ...]:
    hours = []
    for days, span in _table(data.get("hours", {}), "hours").items():
        if not re.fullmatch(r"[A-Za-z, -]{1,40}", days) or not isinstance(span, str) or not (
                span == "closed" or re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d", span)):
            raise ShopFileError(f"hours.{days[:40]} must be \"HH:MM-HH:MM\" or \"closed\", got {span!r}"[:300])
        hours.append((days, span))
    return tuple(hours)


def _item(name: str, raw: object, p: _Problems) -> ItemSpec | None:
    where = f"items.{name}"
    if not _ITEM_NAME.fullmatch(name):
        p.add(f"{where[:60]}: item names are 1-40 lowercase letters, digits, spaces, - or _")
        return None
    table = p.check(lambda: _table(raw, where))
    if table is None:
        return None
    p.check(lambda: _unknown(table, ITEM, f"{where}."))
    before = len(p.lines)
    for required in ("on_hand", "reorder_point", "target", "unit_cost_cents"):
        if required not in table:
            p.add(f"{where}.{required} is required")
    if len(p.lines) > before:
        return None
    max_order = table.get("max_order")
    values = [p.check(partial(_int, table[key], f"{where}.{key}"))
              for key in ("on_hand", "reorder_point", "target", "unit_cost_cents")]
    cap = p.check(lambda: _int(max_order, f"{where}.max_order", 1)) if max_order is not None else None
    # The supplier's pack and minimum order, the selling price: optional (ordering, the weekly review).
    extra = {key: p.check(partial(_int, table[key], f"{where}.{key}", 0 if key == "price_cents" else 1))
             if table.get(key) is not None else None for key in ("pack", "min_order", "price_cents")}
    words = p.check(lambda: _unit_words(table, where))
    if len(p.lines) > before:
        return None
    if cap is not None and extra["min_order"] is not None and extra["min_order"] > cap:
        p.add(f"{where}.min_order ({extra['min_order']}) is over its max_order ({cap})")
    if cap is not None and extra["pack"] is not None and extra["pack"] > cap:
        p.add(f"{where}.pack ({extra['pack']}) is over its max_order ({cap}): no whole pack could be ordered")
    if len(p.lines) > before:
        return None
    on_hand, reorder_point, target, unit_cost = values
    # no problem recorded: every check returned its value
    assert words is not None and on_hand is not None and reorder_point is not None and target is not None \
        and unit_cost is not None
    return ItemSpec(item=name, unit=words.other, on_hand=on_hand, reorder_point=reorder_point, target=target,
                    unit_cost_cents=unit_cost, max_order=cap, pack=extra["pack"], min_order=extra["min_order"],
                    price_cents=extra["price_cents"])


def _ordering(data: dict[str, object]) -> OrderingSettings:
    """`[ordering]`: history_days (7-365, default 28), service_level (0.5 to 0.999, default 0.95), review_days
    (1-90, default 7)."""
    table = _table(data.get("ordering", {}), "ordering")
    _unknown(table, {"history_days", "service_level", "review_days"}, "ordering.")
    default = OrderingSettings()
    history = table.get("history_days", default.history_days)
    review = table.get("review_days", default.review_days)
    level = table.get("service_level", default.service_level)
    if isinstance(history, bool) or not isinstance(history, int) or not 7 <= history <= 365:
        raise ShopFileError(f"ordering.history_days must be a whole number from 7 to 365, got {history!r}"[:300])
    if isinstance(review, bool) or not isinstance(review, int) or not 1 <= review <= 90:
        raise ShopFileError(f"ordering.review_days must be a whole number from 1 to 90, got {review!r}"[:300])
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.5 <= level <= 0.999:
        raise ShopFileError(f"ordering.service_level must be a number from 0.5 to 0.999, got {level!r}"[:300])
    return OrderingSettings(history_days=history, service_level=float(level), review_days=review)


def parse_shop(text: str, source: str = "shop file") -> ShopSpec:
    """Parse and check a shop file. Every problem found is reported in one ShopFileError, one line each."""
    try:
        data: dict[str, object] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShopFileError(f"{source} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ShopFileError(f"{source} nests tables or arrays too deeply") from None
    p = _Problems()
    p.check(lambda: _unknown(data, TOP, ""))
    timezone = p.check(lambda: _timezone(data))
    currency = p.check(lambda: _currency(data))
    locale = p.check(lambda: _locale(data))
    hours: tuple[tuple[str, str], ...] = p.check(lambda: _hours(data), ())
    supplier: dict[str, object] = p.check(lambda: _table(data.get("supplier", {"name": "supplier"}), "supplier"), {})
    p.check(lambda: _unknown(supplier, {"name", "lead_time_days"}, "supplier."))
    limits: dict[str, object] = p.check(lambda: _table(data.get("limits", {}), "limits"), {})
    p.check(lambda: _unknown(limits, {"order_max_cents", "day_max_cents"}, "limits."))
    watch: dict[str, object] = p.check(lambda: _table(data.get("stock_watch", {}), "stock_watch"), {})
    p.check(lambda: _unknown(watch, {"cron"}, "stock_watch."))
    items_table: dict[str, object] = p.check(lambda: _table(data.get("items", {}), "items"), {})
    if not items_table:
        p.add("the shop needs at least one [items.<name>] table")
    items = [spec for name, raw in items_table.items() if (spec := _item(name, raw, p)) is not None]
    aliases: list[tuple[str, tuple[str, ...]]] = []
    for name, raw in items_table.items():
        if isinstance(raw, dict) and raw.get("aliases") is not None:
            names: tuple[str, ...] = p.check(partial(_aliases, raw.get("aliases"), f"items.{name}.aliases"), ())
            if names:
                aliases.append((name, names))
    unit_words: dict[str, UnitWords] = {}
    for name, raw in items_table.items():
        words = _unit_words(raw, f"items.{name}") if isinstance(raw, dict) and name in {i.item for i in items} else None
        if words is None:
            continue
        seen = unit_words.setdefault(words.other, words)
        if words.es_one and not seen.es_one and seen.one == words.one:
            unit_words[words.other] = words              # Spanish forms given on one item serve every item
        elif seen.one != words.one or (words.es_one and (seen.es_one, seen.es_other) != (words.es_one,
                                                                                        words.es_other)):
            p.add(f"items.{name}.unit: {words.other!r} has other forms in another item; one unit reads one way")
    owners: dict[str, str] = {}
    for item, names in aliases:
        for alias in names:
            other = alias if alias in items_table else owners.get(alias)
            if other is not None and other != item:
                p.add(f"items.{item}.aliases: {alias!r} already names {other}")
            owners[alias] = item
    schedules_raw = data.get("schedule", [])
    if not isinstance(schedules_raw, list):
        p.add("schedule must be an array of tables: [[schedule]]")
        schedules_raw = []
    stock_cron = watch.get("cron", "*/15 * * * *")
    schedules: list[Schedule] = []
    if timezone is not None:
        for index, raw in enumerate(schedules_raw):
            try:   # each entry alone (every problem reported); parse_schedules appends the default brief after it
                schedules += parse_schedules([raw], shop_timezone=timezone)[:1]
            except ScheduleError as exc:
                p.add(str(exc) if str(exc).startswith("schedule") else f"schedule[{index}]: {exc}")
        if not any(s.name == OPENING_BRIEF for s in schedules):
            schedules += parse_schedules([], shop_timezone=timezone)     # the default opening brief, once
        if not any(s.name == WEEKLY_REVIEW for s in schedules):
            schedules.append(weekly_review_default(timezone))           # the default weekly review, once
        try:   # the stock watcher's cron follows the same rules as a schedule's (checked the same way)
            parse_schedules([{"name": "stock_watch", "cron": stock_cron, "prompt": "stock check"}],
                            shop_timezone=timezone)
        except ScheduleError as exc:
            p.add(str(exc).replace("schedule 'stock_watch'", "[stock_watch]"))
        taken = [s.name for s in schedules]
        for twice in sorted({n for n in taken if taken.count(n) > 1}):
            p.add(f"schedule {twice!r}: the name is used by two schedules; names must be unique")
    shop_name = p.check(lambda: _text(data.get("name"), "name", "the shop"))
    supplier_name = p.check(lambda: _text(supplier.get("name"), "supplier.name", "supplier"))
    lead_time = p.check(lambda: _int(supplier.get("lead_time_days", 3), "supplier.lead_time_days", 1))
    order_max = (p.check(lambda: _int(limits["order_max_cents"], "limits.order_max_cents"))
                 if "order_max_cents" in limits else None)
    day_max = p.check(lambda: _int(limits["day_max_cents"], "limits.day_max_cents")) \
        if "day_max_cents" in limits else None
    tolerance = p.check(lambda: _int(data.get("count_tolerance", 0), "count_tolerance"))
    ordering = p.check(lambda: _ordering(data), OrderingSettings())
    if p.lines:
        raise ShopFileError("\n".join(p.lines))
    # no problem recorded: every check returned its value, and the stock watcher's cron was checked as a text
    assert shop_name is not None and timezone is not None and currency is not None and locale is not None \
        and supplier_name is not None and lead_time is not None and tolerance is not None \
        and isinstance(stock_cron, str)
    return ShopSpec(
        name=shop_name, timezone=timezone, currency=currency, locale=locale, hours=hours, supplier=supplier_name,
        lead_time_days=lead_time,
        order_max_cents=order_max, day_max_cents=day_max, count_tolerance=tolerance,
        stock_cron=stock_cron, items=tuple(items), schedules=tuple(schedules), source=source,
        aliases=tuple(aliases), unit_words=tuple(unit_words.values()), ordering=ordering)


def load_shop(path: Path) -> ShopSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ShopFileError(f"no shop file at {path.resolve()} "
                            "(set SHOPBOT_SHOP_FILE; see shop.example.toml)") from None
    except UnicodeDecodeError:
        raise ShopFileError(f"{path} is not UTF-8 text") from None
    return parse_shop(text, str(path))
