"""All configuration, read in one place from one mapping (the environment over an optional `.env` file).

Every value is checked at load and every problem is reported at once, one line each naming the key, the bad
value (a secret's never) and what is expected; an unknown SHOPBOT_ key is refused (a typo must not silently
fall back to a default); secrets print as ****.

Each setting is declared once, as a field of `Config` (`setting(...)`): its key, default, help, whether it is a
secret, and the check that reads it. Everything else follows from that one line: the known keys, the order problems
are reported in, `.env.example` and docs/configuration.md (written by `python -m bot.config_docs`; a test keeps
both in step).
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """One or more configuration problems; `lines` holds one line per problem (the message joins them)."""

    def __init__(self, *lines: str) -> None:
        self.lines = [line for text in lines for line in str(text).splitlines()] or ["invalid configuration"]
        super().__init__("\n".join(self.lines))


class Secret(str):
    """A string that never shows itself in repr or logs."""

    def __repr__(self) -> str:
        return "Secret('****')" if self else "Secret('')"


# The emoji a bot may set as a reaction (Bot API `ReactionTypeEmoji`), as python-telegram-bot 22.8 lists them
# (`telegram.constants.ReactionEmoji`). Written out so that the operator commands, which load these settings, do not
# import python-telegram-bot (a third of a `shopbot status`'s 0.5 s); tests/integration/test_receipts.py checks the
# list against the installed library's.
REACTIONS: tuple[str, ...] = tuple((
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 "
    "🥱 🥴 😍 🐳 ❤️‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 "
    "😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 "
    "🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂️ 🤷 🤷‍♀️ 😡"
).split())


def read_dotenv(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.exists():
        return values
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected KEY=value")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def environment(cwd: Path | None = None) -> dict[str, str]:
    """The one mapping: `.env` in the working directory, overridden by the process environment."""
    merged = read_dotenv((cwd or Path.cwd()) / ".env")
    merged.update(os.environ)
    return merged


def supplier_url_problem(url: str) -> str | None:
    """Why a supplier URL is refused: it must be https unless its host is a loopback address."""
    from ipaddress import ip_address
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    if parts.scheme == "https":
        return None
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return None if loopback else "an https URL (http only for a loopback address such as 127.0.0.1)"


_WHOLE = re.compile(r"-?[0-9]+")          # ASCII digits only: no "1_000", no full-width digits, no spaces
_ID = re.compile(r"[0-9]+")
_TOKEN_CHARS = re.compile(r"[\x21-\x7e]{16,256}")
_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?|\*")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
MAX_ID = 2**53                            # Telegram ids fit in 52 bits; SQLite integers are 64-bit


def _shown(value: str, secret: bool = False) -> str:
    """How a bad value appears in an error: quoted (so a stray space shows), cut short, a secret never shown."""
    if secret:
        return "****" if value else "''"
    return repr(value if len(value) <= 80 else value[:77] + "...")


class _Checks:
    """Reads every setting and collects every problem, so one start reports all of them (one line each)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.errors: list[str] = []
        self.got: dict[str, Any] = {}         # the values read so far, by key (a check may look at an earlier one)

    def fail(self, key: str, value: str, expected: str, *, secret: bool = False) -> None:
        self.errors.append(f"{key}={_shown(value, secret)}: expected {expected}")

    def raw(self, key: str) -> str:
        return self.env.get(key, "")

    def text(self, key: str) -> str:
        return self.env.get(key, "") or KEYS[key][0]

    def whole(self, key: str, low: int, high: int, meaning: str = "") -> int:
        """A whole number of ASCII digits from `low` to `high` (the default when unset)."""
        raw = self.text(key)
        if _WHOLE.fullmatch(raw) and low <= int(raw) <= high:
            return int(raw)
        self.fail(key, raw, f"a whole number from {low} to {high:,}{meaning} (ASCII digits only)")
        return int(KEYS[key][0] or low)

    def seconds(self, key: str, high: float) -> float:
        """A positive number of seconds up to `high`, ASCII digits with an optional decimal part (the default when
        unset)."""
        raw = self.text(key)
        if _DECIMAL.fullmatch(raw) and 0 < float(raw) <= high:
            return float(raw)
        self.fail(key, raw, f"a positive number of seconds up to {high:,g}, e.g. 30 or 1.5 (ASCII digits only)")
        return float(KEYS[key][0])

    def ids(self, key: str) -> tuple[int, ...]:
        """Comma-separated positive Telegram ids (ASCII digits, optional spaces around the commas); empty: none."""
        raw = self.raw(key)
        if not raw.strip():
            return ()
        parts = [part.strip() for part in raw.split(",")]
        if all(_ID.fullmatch(p) and 0 < int(p) < MAX_ID for p in parts):
            ids = tuple(int(p) for p in parts)
            if len(set(ids)) == len(ids):
                return ids
            self.fail(key, raw, "each Telegram user id once")
            return ()
        self.fail(key, raw, "comma-separated positive Telegram user ids of ASCII digits, e.g. 1001,1002")
        return ()

    def url(self, key: str, *, https_only: bool = False) -> str:
        """Empty, or an absolute http(s) URL with a host, no spaces, no query or fragment."""
        raw = self.text(key)
        if not raw:
            return raw
        from urllib.parse import urlsplit
        schemes = ("https",) if https_only else ("http", "https")
        try:
            parts = urlsplit(raw)
            ok = (parts.scheme in schemes and bool(parts.hostname) and not parts.query and not parts.fragment
                  and not any(c.isspace() for c in raw) and raw.isascii()
                  and (parts.port is None or parts.port >= 0))   # .port raises ValueError out of range
        except ValueError:
            ok = False
        if not ok:
            self.fail(key, raw, f"an absolute {' or '.join(schemes)} URL with a host (no spaces, query or fragment), "
                                "e.g. https://host.example/path")
        return raw



# --- how a setting is read: each takes the checks and the key, reports problems via `c.fail` and returns the value

Reader = Callable[[_Checks, str], Any]


def _whole(low: int, high: int, meaning: str = "") -> Reader:
    return lambda c, key: c.whole(key, low, high, meaning)


def _whole_float(low: int, high: int) -> Reader:
    return lambda c, key: float(c.whole(key, low, high))


def _seconds(high: float) -> Reader:
    return lambda c, key: c.seconds(key, high)


def _text(c: _Checks, key: str) -> str:
    return c.text(key)


def _path(c: _Checks, key: str) -> Path:
    return Path(c.text(key))


def _secret(c: _Checks, key: str) -> Secret:
    return Secret(c.raw(key))


def _url(*, https_only: bool = False, strip_slash: bool = False) -> Reader:
    def read(c: _Checks, key: str) -> str:
        url = c.url(key, https_only=https_only)
        return url.rstrip("/") if strip_slash else url
    return read


def _db(c: _Checks, key: str) -> Path | str:
    from store import is_database_url
    db: Path | str = c.text(key)
    if not is_database_url(db):
        db = Path(db)
    if isinstance(db, Path) and not db.parent.is_dir():
        c.fail(key, str(db), "a path in an existing folder")
    return db


def _retention_days(c: _Checks, key: str) -> int | None:
    return c.whole(key, 1, 100_000) if c.raw(key) else None


def _http_hosts(c: _Checks, key: str) -> tuple[str, ...]:
    hosts = tuple(h.strip().lower() for h in c.raw(key).split(",") if h.strip())
    if not all(_HOST.fullmatch(h) for h in hosts):
        c.fail(key, c.raw(key),
               "comma-separated host names or addresses (no port, no scheme), e.g. shop.example.com,192.168.1.5")
    if hosts:
        return hosts
    # the loopback names, and the name Telegram posts the webhook to
    from urllib.parse import urlsplit
    webhook = c.text("SHOPBOT_WEBHOOK_URL")
    return ("127.0.0.1", "localhost") + ((urlsplit(webhook).hostname or "",) if webhook else ())


def _min_length_secret(low: int, pattern: re.Pattern[str] | None, expected: str) -> Reader:
    def read(c: _Checks, key: str) -> Secret:
        value = c.raw(key)
        if value and (len(value) < low or (pattern is not None and not pattern.fullmatch(value))):
            c.fail(key, value, expected, secret=True)
        return Secret(value)
    return read


def _telegram_token(c: _Checks, key: str) -> Secret:
    token = c.raw(key)
    if token and (len(token) > 200 or not token.isascii() or any(ch.isspace() or ch == "/" for ch in token)):
        c.fail(key, token, "the token from @BotFather (no spaces or slashes)", secret=True)
    return Secret(token)


def _owner_ids(c: _Checks, key: str) -> tuple[int, ...]:
    ids = c.ids(key)
    if c.raw("TELEGRAM_BOT_TOKEN") and not ids and not c.raw(key).strip():
        c.fail(key, "", "at least one owner id: TELEGRAM_BOT_TOKEN is set, and without owners the bot would ignore "
                        "everyone")
    return ids


def _owner_chat_id(c: _Checks, key: str) -> int | None:
    owner_ids: tuple[int, ...] = c.got["SHOPBOT_OWNER_IDS"]
    if not c.raw(key).strip():
        return owner_ids[0] if owner_ids else None
    chat = c.ids(key)
    if chat and (len(chat) != 1 or chat[0] not in owner_ids):
        c.fail(key, c.raw(key),
               "one of the owner ids in SHOPBOT_OWNER_IDS (briefs and proposals to any other chat are refused)")
    elif chat:
        return chat[0]
    return owner_ids[0] if owner_ids else None


def _webhook_secret(c: _Checks, key: str) -> Secret:
    secret = c.raw(key)
    if c.got["SHOPBOT_WEBHOOK_URL"] and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
        c.fail(key, secret, "1-256 characters of A-Za-z0-9_- because SHOPBOT_WEBHOOK_URL is set (Telegram sends it "
                            "back with every update)", secret=True)
    return Secret(secret)


def _reaction(c: _Checks, key: str) -> str:
    # unset: the default; set and empty: receipts off (so not `text`, which gives the default for empty)
    reaction = c.env.get(key, KEYS[key][0]).strip()
    if reaction and reaction not in REACTIONS:
        c.fail(key, reaction, "one of the emoji Telegram allows for reactions (" + " ".join(REACTIONS[:12])
               + " ...), or empty for no receipts")
    return reaction


def _model(c: _Checks, key: str) -> str:
    model = c.text(key).strip()
    provider, sep, model_name = model.partition(":")
    if model != "offline" and not (sep and provider in ("openai", "anthropic") and model_name.strip()):
        c.fail(key, model, "offline, openai:<model> or anthropic:<model>")
    return model


def _supplier_url(c: _Checks, key: str) -> str:
    before = len(c.errors)
    url = c.url(key).rstrip("/")
    if url and len(c.errors) == before and (why := supplier_url_problem(url)):
        c.fail(key, url, why)       # C21: orders and their token never go in the clear
    return url


def _till_tokens(c: _Checks, key: str) -> Secret:
    from producers.till import parse_till_tokens
    tokens = c.raw(key)
    try:
        parse_till_tokens(tokens)
    except ValueError as exc:      # the message names the key and the pair, never a token
        c.errors.append(f"{exc}")
    return Secret(tokens)


def _one_of(*allowed: str, upper: bool = False) -> Reader:
    def read(c: _Checks, key: str) -> str:
        raw = c.text(key)
        value = raw.upper() if upper else raw.lower()
        if value not in allowed:
            c.fail(key, raw, ", ".join(allowed[:-1]) + " or " + allowed[-1])
        return value
    return read


def _log_file(c: _Checks, key: str) -> Path | None:
    log_file = Path(c.raw(key)) if c.raw(key) else None
    if log_file is not None and not log_file.parent.is_dir():
        c.fail(key, str(log_file), "a file in an existing folder")
    return log_file


def _test_mode_on(c: _Checks) -> bool:
    return c.text("SHOPBOT_TEST_MODE") == "1"


def _test_mode(c: _Checks, key: str) -> bool:
    if c.text(key) not in ("0", "1"):
        c.fail(key, c.text(key), "0 or 1")
    return _test_mode_on(c)


def _clock(c: _Checks, key: str) -> str:
    from store import parse_clock
    clock = c.text(key)
    if clock != "system" and not _test_mode_on(c):
        c.fail(key, clock, "system: accelerated:... and skewed:... are refused unless SHOPBOT_TEST_MODE=1")
        return clock
    try:
        parse_clock(clock, test_mode=_test_mode_on(c))
    except ValueError:
        c.fail(key, clock, "system, accelerated:<start ISO-8601>:<factor> or skewed:<+/-seconds>")
    return clock


def _fault(c: _Checks, key: str) -> str:
    from store import faults
    fault = c.text(key)
    try:
        faults.parse(fault)
    except ValueError as exc:
        c.fail(key, fault, "a fault point such as K7:kill (" + str(exc).removeprefix("SHOPBOT_FAULT: ") + ")")
    return fault


def _db_max_pages(c: _Checks, key: str) -> int | None:
    raw = c.raw(key)
    if raw and not _test_mode_on(c):
        c.fail(key, raw, "nothing: it is a test-only setting and needs SHOPBOT_TEST_MODE=1")
        return None
    return c.whole(key, 1, 2**31 - 1) if raw else None


@dataclass(frozen=True)
class Setting:
    """One setting as declared: its key in the environment, its default (as text), what it means, whether it is a
    secret (never shown), the check that reads it, and the heading it opens in the generated docs (if any)."""
    key: str
    default: str
    help: str
    read: Reader
    secret: bool = False
    section: str = ""


def setting(key: str, default: str, help: str, read: Reader, *, secret: bool = False, section: str = "",
            show: bool = True) -> Any:
    """Declare a field of Config as a setting (the one place a setting is written down)."""
    return field(repr=show, metadata={"setting": Setting(key, default, help, read, secret, section)})


@dataclass(frozen=True)
class Config:
    """Every setting, one line each, in the order of .env.example, docs/configuration.md and of the problems."""
    # A SQLite file path, or a postgresql:// URL (kept as text, never a path; out of repr: it may hold a password).
    db: Path | str = setting(
        "SHOPBOT_DB", "./shopbot.sqlite3", "path of the SQLite database, or a postgresql:// URL (the postgres extra)",
        _db, show=False, section="Database and work")
    capacity: int = setting(
        "SHOPBOT_CAPACITY", "100", "most open agent work (pending + running) before new work is refused",
        _whole(1, 1_000_000))
    debounce_ms: int = setting(
        "SHOPBOT_DEBOUNCE_MS", "300", "a session is claimed this long after its oldest pending item arrived; "
        "0 disables", _whole(0, 3_600_000, " (0 disables)"))
    attempt_cap: int = setting(
        "SHOPBOT_ATTEMPT_CAP", "3", "attempts per work item before it fails with an error report", _whole(1, 100))
    worker_concurrency: int = setting(
        "SHOPBOT_WORKER_CONCURRENCY", "4", "sessions the worker runs at once (one turn per session at a time): a "
        "long turn never holds another session's",
        _whole(1, 64))
    lease_s: float = setting(
        "SHOPBOT_LEASE_S", "30", "seconds a claimed turn (PostgreSQL) and a leader lease (the poller, relays, "
        "producers) stay this process's without renewal (renewed every third of it); a dead or paused process's "
        "turns and singletons are taken over after it", _seconds(3600))
    shop_file: Path = setting(
        "SHOPBOT_SHOP_FILE", "shop.example.toml", "the shop description (TOML): time zone, items, schedules, limits",
        _path)
    proposal_expiry_hours: int = setting(
        "SHOPBOT_PROPOSAL_EXPIRY_HOURS", "24", "an order proposal not approved within this many hours expires",
        _whole(1, 24 * 366))
    retention_days: int | None = setting(
        "SHOPBOT_RETENTION_DAYS", "", "when set, the bot prunes what ended more than this many days ago, once a "
        "day (as `shopbot prune --older-than`); empty keeps everything", _retention_days)

    http_host: str = setting(
        "SHOPBOT_HTTP_HOST", "127.0.0.1", "address of the HTTP server (webhook, till, health)", _text,
        section="HTTP server")
    http_port: int = setting(
        "SHOPBOT_HTTP_PORT", "8080", "port of the HTTP server; 0 picks a free port; -1 disables the server",
        _whole(-1, 65535, " (0 picks a free port, -1 disables the server)"))
    http_hosts: tuple[str, ...] = setting(
        "SHOPBOT_HTTP_HOSTS", "", "comma-separated host names the HTTP server answers (the Host header; "
        "*.example.com allowed); empty: 127.0.0.1, localhost and the host of SHOPBOT_WEBHOOK_URL. Add the name or "
        "address your till uses", _http_hosts)
    ops_token: Secret = setting(
        "SHOPBOT_OPS_TOKEN", "", "the operator page /ops is served only when this is set: at least 24 characters "
        "(secret), typed into the page's login form",
        _min_length_secret(24, None, "at least 24 characters (it guards the operator page)"), secret=True)
    metrics_token: Secret = setting(
        "SHOPBOT_METRICS_TOKEN", "", "when set, /metrics answers only with `Authorization: Bearer <token>` (secret, "
        "at least 16 characters); empty: open, as /healthz",
        _min_length_secret(16, _TOKEN_CHARS, "at least 16 printable ASCII characters without spaces"), secret=True)

    telegram_token: Secret = setting(
        "TELEGRAM_BOT_TOKEN", "", "the bot token from @BotFather (secret); empty runs without Telegram",
        _telegram_token, secret=True, section="Telegram")
    telegram_api_base_url: str = setting(
        "TELEGRAM_API_BASE_URL", "https://api.telegram.org",
        "Bot API server root; the bot calls <root>/bot<token>/<method>", _url(strip_slash=True))
    owner_ids: tuple[int, ...] = setting(
        "SHOPBOT_OWNER_IDS", "", "comma-separated Telegram user ids allowed to use the bot (positive, ASCII digits; "
        "required with a bot token)", _owner_ids)
    owner_chat_id: int | None = setting(
        "SHOPBOT_OWNER_CHAT_ID", "", "chat for briefs, stock checks and notices: one of the owner ids; default the "
        "first", _owner_chat_id)
    webhook_url: str = setting(
        "SHOPBOT_WEBHOOK_URL", "", "public HTTPS URL of /telegram/webhook; empty uses long polling",
        _url(https_only=True))
    webhook_secret: Secret = setting(
        "SHOPBOT_WEBHOOK_SECRET", "", "secret token Telegram sends with each webhook call (secret, 1-256 of "
        "A-Za-z0-9_-)", _webhook_secret, secret=True)
    chat_pace_ms: int = setting(
        "SHOPBOT_CHAT_PACE_MS", "1000", "a chat's bucket refills one message per this many ms once its burst is "
        "spent (Telegram allows about 1/s); 0: no per-chat pacing", _whole(0, 3_600_000))
    chat_burst: int = setting(
        "SHOPBOT_CHAT_BURST", "3", "messages one chat may get at once (a reply in parts) before its pace applies",
        _whole(1, 1_000))
    global_pace_per_s: int = setting(
        "SHOPBOT_GLOBAL_PACE_PER_S", "30", "messages per second over all chats once the global burst is spent "
        "(Telegram allows about 30); 0: no limit", _whole(0, 10_000, " (0: no limit)"))
    global_burst: int = setting(
        "SHOPBOT_GLOBAL_BURST", "30", "messages over all chats at once before the global rate applies",
        _whole(1, 10_000))
    receipt_reaction: str = setting(
        "SHOPBOT_RECEIPT_REACTION", "👀", "the reaction set on each owner message once it is stored (C19): "
        "one of the emoji Telegram allows for reactions; empty: no receipts", _reaction)
    typing_after_ms: int = setting(
        "SHOPBOT_TYPING_AFTER_MS", "300", "a turn still running after this many ms shows \"typing…\" in the chat "
        "(renewed every 4 s while it runs); a turn answered sooner sends no chat action; 0: at once",
        _whole(0, 600_000, " (0: at once)"))
    progress_after_ms: int = setting(
        "SHOPBOT_PROGRESS_AFTER_MS", "1500", "a turn still running after this many ms shows the owner a draft "
        "naming its steps (C20); 0: at once", _whole(0, 600_000, " (0: at once)"))

    model: str = setting(
        "SHOPBOT_MODEL", "offline", "offline | openai:<model> | anthropic:<model>", _model, section="Model")
    model_base_url: str = setting(
        "SHOPBOT_MODEL_BASE_URL", "", "OpenAI-compatible server root (Ollama, vLLM, OpenRouter); empty for the "
        "default", _url())
    model_api_key: Secret = setting(
        "SHOPBOT_MODEL_API_KEY", "", "the model provider's API key (secret); optional with SHOPBOT_MODEL_BASE_URL",
        _secret, secret=True)
    model_max_tokens: int = setting(
        "SHOPBOT_MODEL_MAX_TOKENS", "1024", "output cap sent with every model request (max_tokens or "
        "max_completion_tokens)", _whole(1, 1_000_000))
    model_timeout_s: float = setting(
        "SHOPBOT_MODEL_TIMEOUT_S", "60", "seconds one model request may take before the turn is released and "
        "retried", _whole_float(1, 3600))
    turn_timeout_s: float = setting(
        "SHOPBOT_TURN_TIMEOUT_S", "180", "seconds a whole turn may take, model calls included; then it answers "
        "with what its tools found", _whole_float(1, 3600))
    history_tokens: int = setting(
        "SHOPBOT_HISTORY_TOKENS", "2000", "conversation history a turn sees, in tokens estimated as characters / 4 "
        "(0: none, each question alone: for a model as small as 1.5B, docs/local-model.md)",
        _whole(0, 10_000_000))

    supplier_url: str = setting(
        "SHOPBOT_SUPPLIER_URL", "", "supplier API root (POST <url>/orders); empty: approved orders wait, none is "
        "sent", _supplier_url, section="Supplier and till")
    supplier_token: Secret = setting(
        "SHOPBOT_SUPPLIER_TOKEN", "", "bearer token for the supplier API (secret)", _secret, secret=True)
    supplier_timeout_s: float = setting(
        "SHOPBOT_SUPPLIER_TIMEOUT_S", "10", "seconds one supplier request may take in all (connect, send, read); "
        "past it the order is reconciled by its key", _seconds(60))
    till_tokens: Secret = setting(
        "SHOPBOT_TILL_TOKENS", "", "till credentials as till_id:token pairs, comma-separated (secret)",
        _till_tokens, secret=True)

    log_level: str = setting(
        "SHOPBOT_LOG_LEVEL", "INFO", "DEBUG | INFO | WARNING | ERROR",
        _one_of("DEBUG", "INFO", "WARNING", "ERROR", upper=True), section="Logs")
    log_file: Path | None = setting(
        "SHOPBOT_LOG_FILE", "", "also write the log to this file (reopened when logrotate moves it)", _log_file)
    log_format: str = setting(
        "SHOPBOT_LOG_FORMAT", "text", "text | json (one JSON object a line: ts, level, logger, event, ids)",
        _one_of("text", "json"))

    test_mode: bool = setting(
        "SHOPBOT_TEST_MODE", "0", "1 allows test-only settings (accelerated or skewed clock, database page cap)",
        _test_mode, section="Tests and drills")
    clock: str = setting(
        "SHOPBOT_CLOCK", "system", "system | accelerated:<start>:<factor> | skewed:<+/-seconds> (test mode only)",
        _clock)
    fault: str = setting(
        "SHOPBOT_FAULT", "", "arm a fault point for drills, e.g. K7:kill (kills the process when reached)", _fault)
    db_max_pages: int | None = setting(
        "SHOPBOT_DB_MAX_PAGES", "", "test only: cap the database size in pages to simulate a full disk",
        _db_max_pages)

    def secrets(self) -> list[str]:
        """Every secret value, for log redaction (each till token on its own, and a database URL's password)."""
        values = [str(getattr(self, f.name)) for f in fields(self)
                  if f.metadata["setting"].secret and f.name != "till_tokens"]
        values += [pair.partition(":")[2] for pair in str(self.till_tokens).split(",")]
        values.append(_url_password(self.db))
        return [v for v in values if v]

    def redacted(self) -> dict[str, str]:
        shown = {}
        for f in fields(self):
            value = getattr(self, f.name)
            shown[f.name] = "****" if isinstance(value, Secret) and value else str(value)
            if f.name == "db":
                from store import describe_location
                shown[f.name] = describe_location(value)     # a URL's password is never shown
        return shown


# Every setting in declaration order, with the field it fills; KEYS: key -> (default, help), as before.
SETTINGS: tuple[tuple[str, Setting], ...] = tuple((f.name, f.metadata["setting"]) for f in fields(Config))
KEYS: dict[str, tuple[str, str]] = {s.key: (s.default, s.help) for _, s in SETTINGS}


def _url_password(db: Path | str) -> str:
    """The password inside a postgresql:// URL ('' for a file or a URL without one)."""
    if isinstance(db, Path):
        return ""
    from urllib.parse import urlsplit
    return urlsplit(db).password or ""


# Read by the test suite and the benchmarks, never by the bot: allowed in the environment, not settings of shopbot.
HARNESS_KEYS = {"SHOPBOT_TEST_PG_DSN": "the PostgreSQL server the tests and bench.store_backends use"}


def load(env: Mapping[str, str] | None = None, *, overrides: Mapping[str, str] | None = None) -> Config:
    """Read and check every setting. All problems are collected and raised together as one ConfigError, one line
    per problem naming the key, the bad value (never a secret's) and what is expected."""
    env = dict(environment() if env is None else env)
    env.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(k for k in env if k.startswith("SHOPBOT_") and k not in KEYS and k not in HARNESS_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {', '.join(unknown)}: see .env.example for the known keys")
    c = _Checks(env)
    for _, s in SETTINGS:
        c.got[s.key] = s.read(c, s.key)
    if c.errors:
        raise ConfigError(*c.errors)
    return Config(**{name: c.got[s.key] for name, s in SETTINGS})
