"""All configuration, read in one place from one mapping (the environment over an optional `.env` file).

A missing or malformed value fails naming the key; an unknown SHOPBOT_ key is refused (a typo must not silently
fall back to a default); secrets print as ****. Every key is documented in .env.example (a test keeps both in step).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path


class ConfigError(ValueError):
    pass


class Secret(str):
    """A string that never shows itself in repr or logs."""

    def __repr__(self) -> str:
        return "Secret('****')" if self else "Secret('')"


# key -> (default, help). The order is the order of .env.example.
KEYS: dict[str, tuple[str, str]] = {
    "SHOPBOT_DB": ("./shopbot.sqlite3", "path of the SQLite database, or a postgresql:// URL (the postgres extra)"),
    "SHOPBOT_CAPACITY": ("100", "most open agent work (pending + running) before new work is refused"),
    "SHOPBOT_DEBOUNCE_MS": ("300", "a session is claimed this long after its oldest pending item arrived; 0 disables"),
    "SHOPBOT_ATTEMPT_CAP": ("3", "attempts per work item before it fails with an error report"),
    "SHOPBOT_WORKER_CONCURRENCY": ("1", "sessions the worker runs at once (one turn per session at a time)"),
    "SHOPBOT_MODEL": ("offline", "offline | openai:<model> | anthropic:<model>"),
    "SHOPBOT_MODEL_BASE_URL": ("", "OpenAI-compatible server root (Ollama, vLLM, OpenRouter); empty for the default"),
    "SHOPBOT_MODEL_API_KEY": ("", "the model provider's API key (secret); optional with SHOPBOT_MODEL_BASE_URL"),
    "SHOPBOT_MODEL_MAX_TOKENS": ("1024",
                                 "output cap sent with every model request (max_tokens or max_completion_tokens)"),
    "SHOPBOT_MODEL_TIMEOUT_S": ("60", "seconds one model request may take before the turn is released and retried"),
    "SHOPBOT_HISTORY_TOKENS": ("2000", "conversation history a turn sees, in tokens estimated as characters / 4"),
    "SHOPBOT_SHOP_FILE": ("shop.example.toml", "the shop description (TOML): time zone, items, schedules, limits"),
    "SHOPBOT_SUPPLIER_URL": ("", "supplier API root (POST <url>/orders); empty: approved orders wait, none is sent"),
    "SHOPBOT_SUPPLIER_TOKEN": ("", "bearer token for the supplier API (secret)"),
    "SHOPBOT_PROPOSAL_EXPIRY_HOURS": ("24", "an order proposal not approved within this many hours expires"),
    "SHOPBOT_TILL_TOKENS": ("", "till credentials as till_id:token pairs, comma-separated (secret)"),
    "TELEGRAM_BOT_TOKEN": ("", "the bot token from @BotFather (secret); empty runs without Telegram"),
    "TELEGRAM_API_BASE_URL": ("https://api.telegram.org",
                              "Bot API server root; the bot calls <root>/bot<token>/<method>"),
    "SHOPBOT_OWNER_IDS": ("", "comma-separated Telegram user ids allowed to use the bot"),
    "SHOPBOT_OWNER_CHAT_ID": ("", "chat for briefs, stock checks and notices; default the first owner id"),
    "SHOPBOT_WEBHOOK_URL": ("", "public HTTPS URL of /telegram/webhook; empty uses long polling"),
    "SHOPBOT_WEBHOOK_SECRET": ("", "secret token Telegram sends with each webhook call (secret, 1-256 of A-Za-z0-9_-)"),
    "SHOPBOT_RETENTION_DAYS": ("", "when set, the bot prunes what ended more than this many days ago, once a day "
                                   "(as `shopbot prune --older-than`); empty keeps everything"),
    "SHOPBOT_HTTP_HOST": ("127.0.0.1", "address of the HTTP server (webhook, till, health)"),
    "SHOPBOT_HTTP_PORT": ("8080", "port of the HTTP server; 0 picks a free port; -1 disables the server"),
    "SHOPBOT_OPS_TOKEN": ("", "the operator page /ops is served only when this is set: at least 24 characters "
                              "(secret), typed into the page's login form"),
    "SHOPBOT_CHAT_PACE_MS": ("1000", "least time between two messages to one chat (Telegram allows about 1/s)"),
    "SHOPBOT_GLOBAL_PACE_PER_S": ("30",
                                  "most messages per second over all chats (Telegram allows about 30); 0: no limit"),
    "SHOPBOT_LOG_LEVEL": ("INFO", "DEBUG | INFO | WARNING | ERROR"),
    "SHOPBOT_LOG_FILE": ("", "also write the log to this file (reopened when logrotate moves it)"),
    "SHOPBOT_LOG_FORMAT": ("text", "text | json (one JSON object a line: ts, level, logger, event, ids)"),
    "SHOPBOT_CLOCK": ("system", "system | accelerated:<start ISO-8601>:<factor> (test mode only)"),
    "SHOPBOT_TEST_MODE": ("0", "1 allows test-only settings (accelerated clock, database page cap)"),
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


def _int(env: Mapping[str, str], key: str, minimum: int | None = None) -> int:
    raw = env.get(key, "") or KEYS[key][0]
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key} must be a whole number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key} must be at least {minimum}, got {value}")
    return value


def _ids(env: Mapping[str, str], key: str) -> tuple[int, ...]:
    raw = env.get(key, "")
    try:
        return tuple(int(part) for part in raw.replace(" ", "").split(",") if part)
    except ValueError:
        raise ConfigError(f"{key} must be comma-separated Telegram user ids, got {raw!r}") from None


def _url_password(db: Path | str) -> str:
    """The password inside a postgresql:// URL ('' for a file or a URL without one)."""
    if isinstance(db, Path):
        return ""
    from urllib.parse import urlsplit
    return urlsplit(db).password or ""


def _database(value: str) -> Path | str:
    from store import is_database_url
    return value if is_database_url(value) else Path(value)


@dataclass(frozen=True)
class Config:
    # A SQLite file path, or a postgresql:// URL (kept as text, never a path; out of repr: it may hold a password).
    db: Path | str = field(repr=False)
    capacity: int
    debounce_ms: int
    attempt_cap: int
    worker_concurrency: int
    model: str
    model_base_url: str
    model_api_key: Secret
    model_max_tokens: int
    model_timeout_s: float
    history_tokens: int
    shop_file: Path
    supplier_url: str
    supplier_token: Secret
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
    chat_pace_ms: int
    global_pace_per_s: int
    log_level: str
    log_file: Path | None
    log_format: str
    clock: str
    test_mode: bool
    fault: str
    db_max_pages: int | None
    extra: dict = field(default_factory=dict, repr=False)

    def secrets(self) -> list[str]:
        """Every secret value, for log redaction (each till token on its own)."""
        values = [str(v) for v in (self.model_api_key, self.telegram_token, self.webhook_secret, self.supplier_token,
                                   self.ops_token)]
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


# Read by the test suite and the benchmarks, never by the bot: allowed in the environment, not settings of shopbot.
HARNESS_KEYS = {"SHOPBOT_TEST_PG_DSN": "the PostgreSQL server the tests and bench.store_backends use"}


def load(env: Mapping[str, str] | None = None, *, overrides: Mapping[str, str] | None = None) -> Config:
    env = dict(environment() if env is None else env)
    env.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(k for k in env if k.startswith("SHOPBOT_") and k not in KEYS and k not in HARNESS_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {', '.join(unknown)}: see .env.example for the known keys")

    def text(key: str) -> str:
        return env.get(key, "") or KEYS[key][0]

    test_mode = text("SHOPBOT_TEST_MODE") == "1"
    owner_ids = _ids(env, "SHOPBOT_OWNER_IDS")
    owner_chat = _ids(env, "SHOPBOT_OWNER_CHAT_ID")
    webhook_url, webhook_secret = text("SHOPBOT_WEBHOOK_URL"), env.get("SHOPBOT_WEBHOOK_SECRET", "")
    if webhook_url and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", webhook_secret):
        raise ConfigError("SHOPBOT_WEBHOOK_URL is set, so SHOPBOT_WEBHOOK_SECRET must be 1-256 characters of "
                          "A-Za-z0-9_- (Telegram sends it back with every update)")
    level = text("SHOPBOT_LOG_LEVEL").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"SHOPBOT_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
    ops_token = env.get("SHOPBOT_OPS_TOKEN", "")
    if ops_token and len(ops_token) < 24:
        raise ConfigError("SHOPBOT_OPS_TOKEN must be at least 24 characters (it guards the operator page)")
    log_format = text("SHOPBOT_LOG_FORMAT").lower()
    if log_format not in ("text", "json"):
        raise ConfigError(f"SHOPBOT_LOG_FORMAT must be text or json, got {log_format!r}")
    max_pages = env.get("SHOPBOT_DB_MAX_PAGES", "")
    if max_pages and not test_mode:
        raise ConfigError("SHOPBOT_DB_MAX_PAGES is a test-only setting: it needs SHOPBOT_TEST_MODE=1")
    if text("SHOPBOT_CLOCK") != "system" and not test_mode:
        raise ConfigError("SHOPBOT_CLOCK=accelerated:... is refused unless SHOPBOT_TEST_MODE=1")
    from store import faults
    try:
        faults.parse(text("SHOPBOT_FAULT"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Config(
        db=_database(text("SHOPBOT_DB")),
        capacity=_int(env, "SHOPBOT_CAPACITY", 1),
        debounce_ms=_int(env, "SHOPBOT_DEBOUNCE_MS", 0),
        attempt_cap=_int(env, "SHOPBOT_ATTEMPT_CAP", 1),
        worker_concurrency=_int(env, "SHOPBOT_WORKER_CONCURRENCY", 1),
        model=text("SHOPBOT_MODEL"),
        model_base_url=text("SHOPBOT_MODEL_BASE_URL"),
        model_api_key=Secret(env.get("SHOPBOT_MODEL_API_KEY", "")),
        model_max_tokens=_int(env, "SHOPBOT_MODEL_MAX_TOKENS", 1),
        model_timeout_s=float(_int(env, "SHOPBOT_MODEL_TIMEOUT_S", 1)),
        history_tokens=_int(env, "SHOPBOT_HISTORY_TOKENS", 0),
        shop_file=Path(text("SHOPBOT_SHOP_FILE")),
        supplier_url=text("SHOPBOT_SUPPLIER_URL").rstrip("/"),
        supplier_token=Secret(env.get("SHOPBOT_SUPPLIER_TOKEN", "")),
        proposal_expiry_hours=_int(env, "SHOPBOT_PROPOSAL_EXPIRY_HOURS", 1),
        till_tokens=Secret(env.get("SHOPBOT_TILL_TOKENS", "")),
        telegram_token=Secret(env.get("TELEGRAM_BOT_TOKEN", "")),
        telegram_api_base_url=text("TELEGRAM_API_BASE_URL").rstrip("/"),
        owner_ids=owner_ids,
        owner_chat_id=owner_chat[0] if owner_chat else (owner_ids[0] if owner_ids else None),
        webhook_url=webhook_url,
        webhook_secret=Secret(webhook_secret),
        retention_days=_int(env, "SHOPBOT_RETENTION_DAYS", 1) if env.get("SHOPBOT_RETENTION_DAYS") else None,
        http_host=text("SHOPBOT_HTTP_HOST"),
        http_port=_int(env, "SHOPBOT_HTTP_PORT", -1),
        ops_token=Secret(ops_token),
        chat_pace_ms=_int(env, "SHOPBOT_CHAT_PACE_MS", 0),
        global_pace_per_s=_int(env, "SHOPBOT_GLOBAL_PACE_PER_S", 0),
        log_level=level,
        log_file=Path(env["SHOPBOT_LOG_FILE"]) if env.get("SHOPBOT_LOG_FILE") else None,
        log_format=log_format,
        clock=text("SHOPBOT_CLOCK"),
        test_mode=test_mode,
        fault=text("SHOPBOT_FAULT"),
        db_max_pages=int(max_pages) if max_pages else None,
    )
