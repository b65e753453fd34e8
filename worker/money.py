"""Money as a typed value in the shop's currency, and how the owner reads it (docs/contracts.md C13).

`Money(cents, currency)` holds an amount in minor units (cents for USD, pence for GBP, fils for KWD; yen have none),
as many places as CLDR gives the currency (KWD 3, JPY 0). Records keep integers; the model and the owner see
`ShopFormat.money(...)`, formatted by Babel from CLDR for the shop's locale: `$3.00` for `en_US`, `3,00 €` for
`de_DE`, `KWD1.000` for 1000 fils. A currency Babel cannot format is refused when the shop is loaded (never shown
as `10.00` of something); the owner never reads an amount in minor units.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from zoneinfo import ZoneInfo

from babel.numbers import format_currency, get_currency_precision, get_currency_symbol, list_currencies

# language -> (decimal mark, grouping mark, symbol after the number)
_LANGUAGES = {"en": (".", ",", False), "de": (",", ".", True), "fr": (",", "\u202f", True), "es": (",", ".", True),
              "it": (",", ".", True), "nl": (",", ".", False), "pt": (",", ".", True), "sv": (",", "\u00a0", True),
              "da": (",", ".", True), "nb": (",", "\u00a0", True), "pl": (",", "\u00a0", True)}
MONTHS = {"en": ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                 "November", "December"),
          "de": ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
                 "November", "Dezember"),
          "fr": ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
                 "novembre", "décembre"),
          "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
                 "noviembre", "diciembre")}
WEEKDAYS = {"en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
            "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo")}


def day_words(day: date, lang: str = "en", *, day_first: bool = True, year: bool = True) -> str:
    """A day in words in the owner's language (`lang`), the day and month in the shop's order (`day_first`):
    `Thursday 11 March 2027`, `Thursday, March 11, 2027`, `jueves 11 de marzo de 2027`; without the year when
    `year` is False. Other languages: `11 März 2027`."""
    months = MONTHS.get(lang, MONTHS["en"])
    month = months[day.month - 1]
    if lang == "es":
        return f"{WEEKDAYS['es'][day.weekday()]} {day.day} de {month}" + (f" de {day.year}" if year else "")
    if lang == "en":
        weekday = WEEKDAYS["en"][day.weekday()]
        if day_first:
            return f"{weekday} {day.day} {month}" + (f" {day.year}" if year else "")
        return f"{weekday}, {month} {day.day}" + (f", {day.year}" if year else "")
    return f"{day.day} {month}" + (f" {day.year}" if year else "")
LOCALES = tuple(sorted(_LANGUAGES))


@dataclass(frozen=True, order=True)
class Money:
    cents: int            # minor units
    currency: str = "USD"

    def __post_init__(self) -> None:
        if isinstance(self.cents, bool) or not isinstance(self.cents, int):
            raise TypeError(f"Money needs whole minor units, got {self.cents!r}")

    @property
    def exponent(self) -> int:
        """The currency's minor-unit places (CLDR): 2 for USD, 0 for JPY, 3 for KWD."""
        return _places(self.currency)

    @property
    def major(self) -> float:
        return float(self.cents / 10 ** self.exponent)


@cache
def _places(currency: str) -> int:
    return int(get_currency_precision(currency))


def formattable(currency: str) -> bool:
    """Whether Babel (CLDR) knows the currency: only those are accepted in a shop file."""
    return currency in _currencies()


@cache
def _currencies() -> frozenset[str]:
    return frozenset(list_currencies())


def language(locale: str) -> str:
    return (locale or "en").replace("-", "_").split("_", 1)[0].lower()


@dataclass(frozen=True)
class ShopFormat:
    """How the shop's numbers read: currency, locale (`en_US`, `de_DE`, ...) and time zone."""
    currency: str = "USD"
    locale: str = "en_US"
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if language(self.locale) not in _LANGUAGES:
            raise ValueError(f"unknown locale {self.locale!r}: the language must be one of {', '.join(LOCALES)}")
        if not formattable(self.currency):
            raise ValueError(f"unknown currency {self.currency!r}: Babel (CLDR) cannot format it; use an ISO 4217 "
                             "code such as USD, EUR, GBP, JPY or KWD")
        ZoneInfo(self.timezone)

    @property
    def decimal_comma(self) -> bool:
        return _LANGUAGES[language(self.locale)][0] == ","

    @property
    def day_first(self) -> bool:
        return not self.locale.replace("-", "_").upper().endswith("_US")

    def money_of(self, cents: int) -> Money:
        return Money(cents, self.currency)

    def money(self, amount: Money) -> str:
        """`$3.00`, `-$1,800.50`, `3,00 €`, `¥300`, `KWD1.000`: the amount as the owner reads it (Babel, CLDR)."""
        return str(format_currency(Decimal(amount.cents).scaleb(-amount.exponent), amount.currency,
                                   locale=self.locale.replace("-", "_")))

    def cents(self, cents: int) -> str:
        """An amount in the shop's minor units as the owner reads it: `fmt.cents(1800)` is `$18.00`."""
        return self.money(self.money_of(cents))

    @property
    def symbol(self) -> str:
        """The currency's symbol in the shop's locale (`$`, `€`, `CA$`)."""
        return str(get_currency_symbol(self.currency, self.locale.replace("-", "_")))

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def local(self, moment: datetime) -> datetime:
        return moment.astimezone(self.zone())

    def date_words(self, day: date) -> str:
        """`Saturday 5 December 2026` (en), `5 Dezember 2026` (de), `sábado 5 de diciembre de 2026` (es)."""
        return day_words(day, language(self.locale), day_first=self.day_first)
