"""Money as a typed value in the shop's currency, and how the owner reads it (docs/contracts.md C13).

`Money(cents, currency)` holds an amount in minor units (cents for USD, pence for GBP; yen have none). Records keep
integers; the model and the owner see `ShopFormat.money(...)`: `$3.00` for an `en` shop, `3,00 €` for a `de` or
`fr` shop. No locale database is needed: a shop's locale picks the decimal mark, the grouping mark and where the
symbol goes, which is all a price needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CHF": "CHF", "CAD": "CA$", "AUD": "A$", "NZD": "NZ$",
           "SEK": "kr", "NOK": "kr", "DKK": "kr", "PLN": "zł", "INR": "₹", "CNY": "CN¥", "BRL": "R$", "MXN": "MX$"}
ZERO_DECIMAL = {"JPY", "KRW", "ISK", "CLP", "VND"}
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
        return 0 if self.currency in ZERO_DECIMAL else 2

    @property
    def major(self) -> float:
        return float(self.cents / 10 ** self.exponent)


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
        """`$3.00`, `-$1,800.50`, `3,00 €`, `¥300`: the amount as the owner reads it."""
        point, group, after = _LANGUAGES[language(self.locale)]
        places = amount.exponent
        whole, part = divmod(abs(amount.cents), 10 ** places)
        digits = f"{whole:,}".replace(",", group) + (f"{point}{part:0{places}d}" if places else "")
        symbol = SYMBOLS.get(amount.currency, amount.currency)
        sign = "-" if amount.cents < 0 else ""
        if after:
            return f"{sign}{digits}\u00a0{symbol}"
        return f"{sign}{symbol}{digits}" if len(symbol) <= 3 and not symbol.isalpha() else f"{sign}{symbol} {digits}"

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def local(self, moment: datetime) -> datetime:
        return moment.astimezone(self.zone())

    def date_words(self, day: date) -> str:
        """`Saturday 5 December 2026` (en), `5 Dezember 2026` (de), `sábado 5 de diciembre de 2026` (es)."""
        return day_words(day, language(self.locale), day_first=self.day_first)
