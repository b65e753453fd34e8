"""All configuration, read in one place from one mapping (the environment over an optional `.env` file).

Every value is checked at load and every problem is reported at once, one line each naming the key, the bad
value (a secret's never) and what is expected; an unknown SHOPBOT_ key is refused (a typo must not silently
fall back to a default); secrets print as ****. Every key is documented in .env.example (a test keeps both in step).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from telegram.constants import ReactionEmoji


class ConfigError(ValueError):
    """One or more configuration problems; `lines` holds one line per problem (the message joins them)."""

    def __init__(self, *lines: str) -> None:
        self.lines = [line for text in lines for line in str(text).splitlines()] or ["invalid configuration"]
        super().__init__("\n".join(self.lines))


class Secret(str):
    """A string that never shows itself in repr or logs."""

    def __repr__(self) -> str:
        return "Secret('****')" if self else "Secret('')"


# The emoji a bot may set as a reaction (Bot API `ReactionTypeEmoji`), as python-telegram-bot lists them.
REACTIONS: tuple[str, ...] = tuple(e.value for e in ReactionEmoji)

# key -> (default, help). The order is the order of .env.example.
KEYS: dict[str, tuple[str, str]] = {
    "SHOPBOT_DB": ("./shopbot.sqlite3", "path of the SQLite database, or a postgresql:// URL (the postgres extra)"),
    "SHOPBOT_CAPACITY": ("100", "most open agent work (pending + running) before new work is refused"),
    "SHOPBOT_DEBOUNCE_MS": ("300", "a session is claimed this long after its oldest pending item arrived; 0 disables"),
    "SHOPBOT_ATTEMPT_CAP": ("3", "attempts per work item before it fails with an error report"),
    "SHOPBOT_WORKER_CONCURRENCY": ("1", "sessions the worker runs at once (one turn per session at a time)"),
    "SHOPBOT_LEASE_S": ("30", "seconds a claimed turn (PostgreSQL) and a leader lease (the poller, relays, "
                              "producers) stay this process's without renewal (renewed every third of it); a dead or "
                              "paused process's turns and singletons are taken over after it"),
    "SHOPBOT_MODEL": ("offline", "offline | openai:<model> | anthropic:<model>"),
    "SHOPBOT_MODEL_BASE_URL": ("", "OpenAI-compatible server root (Ollama, vLLM, OpenRouter); empty for the default"),
    "SHOPBOT_MODEL_API_KEY": ("", "the model provider's API key (secret); optional with SHOPBOT_MODEL_BASE_URL"),
    "SHOPBOT_MODEL_MAX_TOKENS": ("1024",
                                 "output cap sent with every model request (max_tokens or max_completion_tokens)"),
    "SHOPBOT_MODEL_TIMEOUT_S": ("60", "seconds one model request may take before the turn is released and retried"),
    "SHOPBOT_TURN_TIMEOUT_S": ("180", "seconds a whole turn may take, model calls included; then it answers with "
                               "what its tools found"),
    "SHOPBOT_HISTORY_TOKENS": ("2000", "conversation history a turn sees, in tokens estimated as characters / 4"),
    "SHOPBOT_SHOP_FILE": ("shop.example.toml", "the shop description (TOML): time zone, items, schedules, limits"),
    "SHOPBOT_SUPPLIER_URL": ("", "supplier API root (POST <url>/orders); empty: approved orders wait, none is sent"),
    "SHOPBOT_SUPPLIER_TOKEN": ("", "bearer token for the supplier API (secret)"),
    "SHOPBOT_SUPPLIER_TIMEOUT_S": ("10", "seconds one supplier request may take in all (connect, send, read); past "
                                         "it the order is reconciled by its key"),
    "SHOPBOT_PROPOSAL_EXPIRY_HOURS": ("24", "an order proposal not approved within this many hours expires"),
    "SHOPBOT_TILL_TOKENS": ("", "till credentials as till_id:token pairs, comma-separated (secret)"),
    "TELEGRAM_BOT_TOKEN": ("", "the bot token from @BotFather (secret); empty runs without Telegram"),
    "TELEGRAM_API_BASE_URL": ("https://api.telegram.org",
                              "Bot API server root; the bot calls <root>/bot<token>/<method>"),
    "SHOPBOT_OWNER_IDS": ("", "comma-separated Telegram user ids allowed to use the bot (positive, ASCII digits; "
                              "required with a bot token)"),
    "SHOPBOT_OWNER_CHAT_ID": ("", "chat for briefs, stock checks and notices: one of the owner ids; default the first"),
    "SHOPBOT_WEBHOOK_URL": ("", "public HTTPS URL of /telegram/webhook; empty uses long polling"),
    "SHOPBOT_WEBHOOK_SECRET": ("", "secret token Telegram sends with each webhook call (secret, 1-256 of A-Za-z0-9_-)"),
    "SHOPBOT_RETENTION_DAYS": ("", "when set, the bot prunes what ended more than this many days ago, once a day "
                                   "(as `shopbot prune --older-than`); empty keeps everything"),
    "SHOPBOT_HTTP_HOST": ("127.0.0.1", "address of the HTTP server (webhook, till, health)"),
    "SHOPBOT_HTTP_PORT": ("8080", "port of the HTTP server; 0 picks a free port; -1 disables the server"),
    "SHOPBOT_OPS_TOKEN": ("", "the operator page /ops is served only when this is set: at least 24 characters "
                              "(secret), typed into the page's login form"),
    "SHOPBOT_HTTP_HOSTS": ("", "comma-separated host names the HTTP server answers (the Host header; *.example.com "
                               "allowed); empty: 127.0.0.1, localhost and the host of SHOPBOT_WEBHOOK_URL. Add the "
                               "name or address your till uses"),
    "SHOPBOT_METRICS_TOKEN": ("", "when set, /metrics answers only with `Authorization: Bearer <token>` (secret, at "
                                  "least 16 characters); empty: open, as /healthz"),
    "SHOPBOT_CHAT_PACE_MS": ("1000", "a chat's bucket refills one message per this many ms once its burst is spent "
                                     "(Telegram allows about 1/s); 0: no per-chat pacing"),
    "SHOPBOT_CHAT_BURST": ("3", "messages one chat may get at once (a reply in parts) before its pace applies"),
    "SHOPBOT_GLOBAL_PACE_PER_S": ("30", "messages per second over all chats once the global burst is spent "
                                        "(Telegram allows about 30); 0: no limit"),
    "SHOPBOT_GLOBAL_BURST": ("30", "messages over all chats at once before the global rate applies"),
    "SHOPBOT_RECEIPT_REACTION": ("👀", "the reaction set on each owner message once it is stored (C19): one of the "
                                      "emoji Telegram allows for reactions; empty: no receipts"),
    "SHOPBOT_PROGRESS_AFTER_MS": ("1500", "a turn still running after this many ms shows the owner a draft naming "
                                          "its steps (C20); 0: at once"),
    "SHOPBOT_LOG_LEVEL": ("INFO", "DEBUG | INFO | WARNING | ERROR"),
    "SHOPBOT_LOG_FILE": ("", "also write the log to this file (reopened when logrotate moves it)"),
    "SHOPBOT_LOG_FORMAT": ("text", "text | json (one JSON object a line: ts, level, logger, event, ids)"),
    "SHOPBOT_CLOCK": ("system", "system | accelerated:<start>:<factor> | skewed:<+/-seconds> (test mode only)"),
    "SHOPBOT_TEST_MODE": ("0", "1 allows test-only settings (accelerated or skewed clock, database page cap)"),
    "SHOPBOT_FAULT": ("", "arm a fault point for drills, e.g. K7:kill (kills the process when reached)"),
    "SHOPBOT_DB_MAX_PAGES": ("", "test only: cap the database size in pages to simulate a full disk"),
}


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


@dataclass(frozen=True)
class Config:
    # A SQLite file path, or a postgresql:// URL (kept as text, never a path; out of repr: it may hold a password).
    db: Path | str = field(repr=False)
    capacity: int
    debounce_ms: int
    attempt_cap: int
    worker_concurrency: int
    lease_s: float
    model: str
    model_base_url: str
    model_api_key: Secret
    model_max_tokens: int
    model_timeout_s: float
    history_tokens: int
    turn_timeout_s: float
    shop_file: Path
    supplier_url: str
    supplier_token: Secret
    supplier_timeout_s: float
    proposal_expiry_hours: int
    till_tokens: Secret
    telegram_token: Secret
    telegram_api_base_url: str
    owner_ids: tuple[int, ...]
    owner_chat_id: int | None
    webhook_url: str
    webhook_secret: Secret
    retention_days: int | None
    http_host: str
    http_port: int
    ops_token: Secret
    http_hosts: tuple[str, ...]
    metrics_token: Secret
    chat_pace_ms: int
    chat_burst: int
    global_pace_per_s: int
    global_burst: int
    receipt_reaction: str
    progress_after_ms: int
    log_level: str
    log_file: Path | None
    log_format: str
    clock: str
    test_mode: bool
    fault: str
    db_max_pages: int | None
    extra: dict[str, str] = field(default_factory=dict, repr=False)

    def secrets(self) -> list[str]:
        """Every secret value, for log redaction (each till token on its own)."""
        values = [str(v) for v in (self.model_api_key, self.telegram_token, self.webhook_secret, self.supplier_token,
                                   self.ops_token, self.metrics_token)]
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
    text = c.text

    test_mode_raw = text("SHOPBOT_TEST_MODE")
    if test_mode_raw not in ("0", "1"):
        c.fail("SHOPBOT_TEST_MODE", test_mode_raw, "0 or 1")
    test_mode = test_mode_raw == "1"
    capacity = c.whole("SHOPBOT_CAPACITY", 1, 1_000_000)
    debounce_ms = c.whole("SHOPBOT_DEBOUNCE_MS", 0, 3_600_000, " (0 disables)")
    attempt_cap = c.whole("SHOPBOT_ATTEMPT_CAP", 1, 100)
    concurrency = c.whole("SHOPBOT_WORKER_CONCURRENCY", 1, 64)
    lease_s = c.seconds("SHOPBOT_LEASE_S", 3600)
    expiry = c.whole("SHOPBOT_PROPOSAL_EXPIRY_HOURS", 1, 24 * 366)
    http_port = c.whole("SHOPBOT_HTTP_PORT", -1, 65535, " (0 picks a free port, -1 disables the server)")
    chat_pace = c.whole("SHOPBOT_CHAT_PACE_MS", 0, 3_600_000)
    global_pace = c.whole("SHOPBOT_GLOBAL_PACE_PER_S", 0, 10_000, " (0: no limit)")
    chat_burst = c.whole("SHOPBOT_CHAT_BURST", 1, 1_000)
    global_burst = c.whole("SHOPBOT_GLOBAL_BURST", 1, 10_000)
    progress_after_ms = c.whole("SHOPBOT_PROGRESS_AFTER_MS", 0, 600_000, " (0: at once)")
    # unset: the default; set and empty: receipts off (so not `text`, which gives the default for empty)
    reaction = env.get("SHOPBOT_RECEIPT_REACTION", KEYS["SHOPBOT_RECEIPT_REACTION"][0]).strip()
    if reaction and reaction not in REACTIONS:
        c.fail("SHOPBOT_RECEIPT_REACTION", reaction, "one of the emoji Telegram allows for reactions ("
               + " ".join(REACTIONS[:12]) + " ...), or empty for no receipts")

    model = text("SHOPBOT_MODEL").strip()
    provider, sep, model_name = model.partition(":")
    if model != "offline" and not (sep and provider in ("openai", "anthropic") and model_name.strip()):
        c.fail("SHOPBOT_MODEL", model, "offline, openai:<model> or anthropic:<model>")
    model_base_url = c.url("SHOPBOT_MODEL_BASE_URL")
    before = len(c.errors)
    supplier_url = c.url("SHOPBOT_SUPPLIER_URL").rstrip("/")
    if supplier_url and len(c.errors) == before and (why := supplier_url_problem(supplier_url)):
        c.fail("SHOPBOT_SUPPLIER_URL", supplier_url, why)       # C21: orders and their token never go in the clear
    supplier_timeout_s = c.seconds("SHOPBOT_SUPPLIER_TIMEOUT_S", 60)
    telegram_base = c.url("TELEGRAM_API_BASE_URL").rstrip("/")
    webhook_url = c.url("SHOPBOT_WEBHOOK_URL", https_only=True)

    token = env.get("TELEGRAM_BOT_TOKEN", "")
    if token and (len(token) > 200 or not token.isascii() or any(ch.isspace() or ch == "/" for ch in token)):
        c.fail("TELEGRAM_BOT_TOKEN", token, "the token from @BotFather (no spaces or slashes)", secret=True)
    owner_ids = c.ids("SHOPBOT_OWNER_IDS")
    if token and not owner_ids and not c.raw("SHOPBOT_OWNER_IDS").strip():
        c.fail("SHOPBOT_OWNER_IDS", "", "at least one owner id: TELEGRAM_BOT_TOKEN is set, and without owners the "
                                        "bot would ignore everyone")
    owner_chat_id: int | None = owner_ids[0] if owner_ids else None
    chat_raw = c.raw("SHOPBOT_OWNER_CHAT_ID")
    if chat_raw.strip():
        chat = c.ids("SHOPBOT_OWNER_CHAT_ID")
        if chat and (len(chat) != 1 or chat[0] not in owner_ids):
            c.fail("SHOPBOT_OWNER_CHAT_ID", chat_raw,
                   "one of the owner ids in SHOPBOT_OWNER_IDS (briefs and proposals to any other chat are refused)")
        elif chat:
            owner_chat_id = chat[0]

    webhook_secret = env.get("SHOPBOT_WEBHOOK_SECRET", "")
    if webhook_url and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", webhook_secret):
        c.fail("SHOPBOT_WEBHOOK_SECRET", webhook_secret, "1-256 characters of A-Za-z0-9_- because "
               "SHOPBOT_WEBHOOK_URL is set (Telegram sends it back with every update)", secret=True)
    till_tokens = env.get("SHOPBOT_TILL_TOKENS", "")
    from producers.till import parse_till_tokens
    try:
        parse_till_tokens(till_tokens)
    except ValueError as exc:      # the message names the key and the pair, never a token
        c.errors.append(f"{exc}")
    level = text("SHOPBOT_LOG_LEVEL").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        c.fail("SHOPBOT_LOG_LEVEL", text("SHOPBOT_LOG_LEVEL"), "DEBUG, INFO, WARNING or ERROR")
    ops_token = env.get("SHOPBOT_OPS_TOKEN", "")
    if ops_token and len(ops_token) < 24:
        c.fail("SHOPBOT_OPS_TOKEN", ops_token, "at least 24 characters (it guards the operator page)", secret=True)
    metrics_token = env.get("SHOPBOT_METRICS_TOKEN", "")
    if metrics_token and not _TOKEN_CHARS.fullmatch(metrics_token):
        c.fail("SHOPBOT_METRICS_TOKEN", metrics_token, "at least 16 printable ASCII characters without spaces",
               secret=True)
    http_hosts = tuple(h.strip().lower() for h in c.raw("SHOPBOT_HTTP_HOSTS").split(",") if h.strip())
    if not all(_HOST.fullmatch(h) for h in http_hosts):
        c.fail("SHOPBOT_HTTP_HOSTS", c.raw("SHOPBOT_HTTP_HOSTS"),
               "comma-separated host names or addresses (no port, no scheme), e.g. shop.example.com,192.168.1.5")
    if not http_hosts:                 # the loopback names, and the name Telegram posts the webhook to
        from urllib.parse import urlsplit
        http_hosts = ("127.0.0.1", "localhost") + ((urlsplit(webhook_url).hostname or "",) if webhook_url else ())
    log_format = text("SHOPBOT_LOG_FORMAT").lower()
    if log_format not in ("text", "json"):
        c.fail("SHOPBOT_LOG_FORMAT", text("SHOPBOT_LOG_FORMAT"), "text or json")
    log_file = Path(env["SHOPBOT_LOG_FILE"]) if env.get("SHOPBOT_LOG_FILE") else None
    if log_file is not None and not log_file.parent.is_dir():
        c.fail("SHOPBOT_LOG_FILE", str(log_file), "a file in an existing folder")
    from store import is_database_url
    db: Path | str = text("SHOPBOT_DB")
    if not is_database_url(db):
        db = Path(db)
    if isinstance(db, Path) and not db.parent.is_dir():
        c.fail("SHOPBOT_DB", str(db), "a path in an existing folder")
    model_max_tokens = c.whole("SHOPBOT_MODEL_MAX_TOKENS", 1, 1_000_000)
    model_timeout_s = c.whole("SHOPBOT_MODEL_TIMEOUT_S", 1, 3600)
    history_tokens = c.whole("SHOPBOT_HISTORY_TOKENS", 0, 10_000_000)
    turn_timeout_s = c.whole("SHOPBOT_TURN_TIMEOUT_S", 1, 3600)
    retention_days = c.whole("SHOPBOT_RETENTION_DAYS", 1, 100_000) if env.get("SHOPBOT_RETENTION_DAYS") else None
    max_pages = env.get("SHOPBOT_DB_MAX_PAGES", "")
    if max_pages and not test_mode:
        c.fail("SHOPBOT_DB_MAX_PAGES", max_pages, "nothing: it is a test-only setting and needs SHOPBOT_TEST_MODE=1")
    elif max_pages:
        c.whole("SHOPBOT_DB_MAX_PAGES", 1, 2**31 - 1)
    clock = text("SHOPBOT_CLOCK")
    from store import faults, parse_clock
    if clock != "system" and not test_mode:
        c.fail("SHOPBOT_CLOCK", clock, "system: accelerated:... and skewed:... are refused unless SHOPBOT_TEST_MODE=1")
    else:
        try:
            parse_clock(clock, test_mode=test_mode)
        except ValueError:
            c.fail("SHOPBOT_CLOCK", clock, "system, accelerated:<start ISO-8601>:<factor> or skewed:<+/-seconds>")
    try:
        faults.parse(text("SHOPBOT_FAULT"))
    except ValueError as exc:
        c.fail("SHOPBOT_FAULT", text("SHOPBOT_FAULT"), "a fault point such as K7:kill ("
               + str(exc).removeprefix("SHOPBOT_FAULT: ") + ")")
    if c.errors:
        raise ConfigError(*c.errors)
    return Config(
        db=db,
        capacity=capacity,
        debounce_ms=debounce_ms,
        attempt_cap=attempt_cap,
        worker_concurrency=concurrency,
        lease_s=lease_s,
        model=model,
        model_base_url=model_base_url,
        model_api_key=Secret(env.get("SHOPBOT_MODEL_API_KEY", "")),
        model_max_tokens=model_max_tokens,
        model_timeout_s=float(model_timeout_s),
        history_tokens=history_tokens,
        turn_timeout_s=float(turn_timeout_s),
        shop_file=Path(text("SHOPBOT_SHOP_FILE")),
        supplier_url=supplier_url,
        supplier_token=Secret(env.get("SHOPBOT_SUPPLIER_TOKEN", "")),
        supplier_timeout_s=supplier_timeout_s,
        proposal_expiry_hours=expiry,
        till_tokens=Secret(till_tokens),
        telegram_token=Secret(token),
        telegram_api_base_url=telegram_base,
        owner_ids=owner_ids,
        owner_chat_id=owner_chat_id,
        webhook_url=webhook_url,
        webhook_secret=Secret(webhook_secret),
        retention_days=retention_days,
        http_host=text("SHOPBOT_HTTP_HOST"),
        http_port=http_port,
        http_hosts=http_hosts,
        metrics_token=Secret(metrics_token),
        ops_token=Secret(ops_token),
        chat_pace_ms=chat_pace,
        chat_burst=chat_burst,
        global_pace_per_s=global_pace,
        global_burst=global_burst,
        receipt_reaction=reaction,
        progress_after_ms=progress_after_ms,
        log_level=level,
        log_file=log_file,
        log_format=log_format,
        clock=clock,
        test_mode=test_mode,
        fault=text("SHOPBOT_FAULT"),
        db_max_pages=int(max_pages) if max_pages else None,
    )
