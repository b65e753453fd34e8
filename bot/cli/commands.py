"""The operator's command line: `shopbot <command>`. Every command has help, a line in the README's table and its
full description in docs/running.md (tests/unit/test_docs.py)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot import config as config_module
from bot.cli.render import print_status
from bot.shop_file import ShopFileError
from store import (
    Admission,
    InstanceLock,
    Occurrence,
    RestoreRefused,
    Store,
    StoreError,
    WorkKind,
    backup_before_migration,
    describe_location,
    open_store,
    parse_clock,
    restore,
    telegram_chat,
    units,
)
from store.sqlite.invariants import check as check_invariants

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = fn
        return fn
    return register


def load_config(args: argparse.Namespace) -> config_module.Config:
    overrides = {"SHOPBOT_DB": str(args.db)} if getattr(args, "db", None) else {}
    return config_module.load(overrides=overrides)


async def open_configured(cfg: config_module.Config, *, create: bool = True, migrate: bool = False) -> Store:
    return await open_store(cfg.db, parse_clock(cfg.clock, test_mode=cfg.test_mode), capacity=cfg.capacity,
                            debounce_ms=cfg.debounce_ms, attempt_cap=cfg.attempt_cap, create=create,
                            migrate=migrate, max_pages=cfg.db_max_pages, secrets=cfg.secrets())


def with_store(args: argparse.Namespace, fn: Callable[[Store], Any], *, create: bool = False) -> Any:
    cfg = load_config(args)
    if not create and isinstance(cfg.db, Path) and not cfg.db.exists():
        raise StoreError(f"no database at {cfg.db.resolve()} (set SHOPBOT_DB or --db; `shopbot migrate` creates one)")

    async def main() -> Any:
        store = await open_configured(cfg, create=create)
        try:
            return await fn(store)
        finally:
            await store.close()
    return asyncio.run(main())


@command("admit")
def cmd_admit(args: argparse.Namespace) -> int:
    destination = args.destination or (args.session if telegram_chat(args.session) is not None else None)
    result = with_store(args, lambda s: s.admit(Occurrence(args.source, args.session, args.text, WorkKind.AGENT,
                                                           destination)), create=True)
    print(result.outcome.value)
    return 0 if result.outcome in (Admission.ACCEPTED, Admission.DUPLICATE) else 1


@command("status")
def cmd_status(args: argparse.Namespace) -> int:
    status = with_store(args, lambda s: s.status())
    if args.json:
        print(json.dumps(status.to_json(), indent=2, sort_keys=True))
    else:
        print_status(status, sys.stdout)
        for setting in status.applied:        # the owner's applied values, with the shop file's beside them
            print(f"applied:    {setting.item} reorder point {setting.reorder_point} (shop file "
                  f"{setting.shop_file_reorder_point}), target {setting.target} (shop file "
                  f"{setting.shop_file_target}), by {setting.decided_by}")
    return 0


@command("check")
def cmd_check(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    try:
        if isinstance(cfg.db, Path):
            violations = check_invariants(cfg.db)
        else:   # PostgreSQL: the rules in one READ ONLY, REPEATABLE READ transaction (one snapshot)
            violations = with_store(args, lambda s: s.check())
    except (FileNotFoundError, OSError) as exc:
        print(f"cannot check: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a corrupt or foreign file: we could not check, which is not "all hold"
        print(f"cannot check {cfg.db}: {exc}", file=sys.stderr)
        return 2
    for v in violations:
        print(f"{v.rule}: {v.detail}")
    if violations:
        print(f"{len(violations)} violation(s)")
        return 1
    from store.sqlite.invariants import RULES
    print(f"all {len(RULES)} invariants hold ({', '.join(RULES)})")
    return 0


@command("reports")
def cmd_reports(args: argparse.Namespace) -> int:
    rows = with_store(args, lambda s: s.reports(args.limit))
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    for row in rows:
        states = ", ".join(f"{d.part}:{d.state.value}" + (f"#{d.receipt}" if d.receipt else "")
                           for d in row.deliveries) or "not sent to a chat"
        print(f"{row.report}  work {','.join(map(str, row.work))}  {row.destination or '-'}  [{states}]"
              + ("  ERROR" if row.is_error else ""))
        for line in row.body.splitlines() or ["(body emptied by retention: shopbot prune)"]:
            print(f"    {line}")
    return 0


@command("migrate")
def cmd_migrate(args: argparse.Namespace) -> int:
    cfg = load_config(args)

    async def main() -> tuple[str, int]:
        store = await open_configured(cfg, create=True, migrate=True)
        try:
            return store.location, await store.schema_version()
        finally:
            await store.close()
    if isinstance(cfg.db, Path):
        with InstanceLock(cfg.db.resolve()):
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            taken = backup_before_migration(cfg.db.resolve(), stamp)   # an online backup before anything changes
            if taken:
                print(f"backed up schema version {taken[0]} to {taken[1]} before migrating")
            location, version = asyncio.run(main())
    else:       # PostgreSQL: migrations serialise on an advisory lock in the database itself (back up with pg_dump)
        location, version = asyncio.run(main())
    print(f"{location} is at schema version {version}")
    return 0


@command("backup")
def cmd_backup(args: argparse.Namespace) -> int:
    with_store(args, lambda s: s.backup(str(Path(args.path))))
    print(f"backed up to {Path(args.path).resolve()}")
    return 0


@command("prune")
def cmd_prune(args: argparse.Namespace) -> int:
    async def prune(store: Store) -> tuple[dict[str, int], int, int]:
        done = await store.prune(args.older_than)
        before = after = 0
        if args.vacuum:
            before, after = await store.vacuum()
        return done, before, after
    done, before, after = with_store(args, prune)
    counts = ", ".join(f"{kind.replace('_', ' ')} {n}" for kind, n in done.items())
    print(f"pruned (ended more than {args.older_than:g} days ago): {counts}")
    if args.vacuum:
        print(f"vacuumed: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


@command("restore")
def cmd_restore(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if not isinstance(cfg.db, Path):
        raise StoreError("a PostgreSQL store is restored with pg_restore into an empty database, then `shopbot "
                         "migrate`; `shopbot restore` restores a SQLite backup file")
    with InstanceLock(cfg.db.resolve()):
        try:
            done = restore(Path(args.path), cfg.db, parse_clock(cfg.clock, test_mode=cfg.test_mode))
        except RestoreRefused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    kept = f"; the replaced database is kept as {done.replaced}" if done.replaced else ""
    print(f"restored {args.path} into {cfg.db.resolve()}{kept}; {done.unknown} delivery(ies) not known to be sent "
          "are now unknown (see `shopbot status`; resolve each with `shopbot resolve`)")
    return 0


@command("resolve")
def cmd_resolve(args: argparse.Namespace) -> int:
    decision = "resend" if args.resend else "delivered"
    import getpass
    moved = with_store(args, lambda s: s.resolve(args.report, decision, f"operator:{getpass.getuser()}"))
    print(f"{args.report}: recorded '{decision}' for {len(moved)} part(s)"
          + ("; it will be sent once more" if decision == "resend" else ""))
    return 0


@command("forget")
def cmd_forget(args: argparse.Namespace) -> int:
    import getpass
    deleted, cancelled = with_store(args, lambda s: s.forget(args.session, f"operator:{getpass.getuser()}"))
    print(f"forgot {args.session}: {deleted} history entries deleted, {cancelled} pending item(s) cancelled")
    return 0


@command("actions")
def cmd_actions(args: argparse.Namespace) -> int:
    import getpass
    if args.decision:
        if args.action_id is None:
            raise StoreError("give the action id: shopbot actions release|void|delivered|resend ID")
        state = with_store(args, lambda s: s.decide_action(args.action_id, args.decision,
                                                           f"operator:{getpass.getuser()}"))
        print(f"action {args.action_id}: recorded '{args.decision}', now {state}")
        return 0
    rows = with_store(args, lambda s: s.actions(args.quarantined))
    for row in rows:
        print(f"action {row.action_id}  proposal #{row.proposal_id}  {row.state:<11} {row.quantity} "
              f"{row.item} ({row.total_cents} cents)  attempts {row.attempts}"
              + (f"  order {row.receipt}" if row.receipt else "")
              + (f"  ({row.reason})" if row.reason else ""))
    if not rows:
        print("no quarantined actions" if args.quarantined else "no actions")
    return 0


def setup_logs(cfg: config_module.Config) -> None:
    from bot.logs import setup_logging
    setup_logging(cfg.log_level, cfg.secrets(), cfg.log_file, cfg.log_format)


def dump_stacks_on_request() -> None:
    """`kill -USR1 <pid>` prints the stack of every thread of `shopbot run` on stderr and the process goes on: how
    an operator (and the tests) sees where a process hangs that does not stop after SIGTERM. The dump is written by
    faulthandler from the signal itself, so it comes even while the event loop or a thread is stuck."""
    import faulthandler
    import signal
    if hasattr(signal, "SIGUSR1"):       # not on Windows
        faulthandler.register(signal.SIGUSR1, all_threads=True)


@command("run")
def cmd_run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    setup_logs(cfg)
    dump_stacks_on_request()
    import logging

    from bot.app import App
    log = logging.getLogger("shopbot")

    async def main() -> int:
        async with App(cfg) as app:
            if args.drain:
                from bot.cli.render import print_status
                status = await app.drain()
                if cfg.log_format == "json":     # every line of `shopbot run` is JSON in this format
                    log.info("drained; left (not yet due): %s", json.dumps(status.to_json(), sort_keys=True))
                else:
                    print("drained; left (not yet due):")
                    print_status(status, sys.stdout)
            else:
                await app.run()
        return 0

    from telegram.error import InvalidToken
    log.info("starting with database %s", describe_location(cfg.db))
    from bot.supervision import StartAborted
    try:
        return asyncio.run(main())
    except StartAborted:
        if cfg.log_format == "json":
            log.warning("stopped before the start completed; nothing was in flight")
        else:
            print("stopped before the start completed; nothing was in flight", file=sys.stderr)
        return 0
    except InvalidToken:
        if cfg.log_format == "json":
            log.error("configuration error: Telegram refused the bot token: check TELEGRAM_BOT_TOKEN "
                      "(and TELEGRAM_API_BASE_URL)")
        else:
            print("configuration error: Telegram refused the bot token: check TELEGRAM_BOT_TOKEN "
                  "(and TELEGRAM_API_BASE_URL)", file=sys.stderr)
        return 2
    except BaseException as exc:
        if cfg.log_format != "json" or isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        log.critical("shopbot run stopped on an error: %s", type(exc).__name__, exc_info=True)
        return 1


def local_config() -> config_module.Config:
    """The demo and chat print a conversation: their log stays at WARNING unless SHOPBOT_LOG_LEVEL says otherwise."""
    from bot.sandbox.local_setup import OWNER_ID
    env = config_module.environment()
    env.setdefault("SHOPBOT_LOG_LEVEL", "WARNING")
    env["SHOPBOT_OWNER_IDS"] = str(OWNER_ID)     # the local setup's owner, whatever the real .env says
    env.pop("SHOPBOT_OWNER_CHAT_ID", None)
    return config_module.load(env)


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    cfg = local_config()
    setup_logs(cfg)
    from bot.sandbox.demo import main as demo_main
    return demo_main()


@command("chat")
def cmd_chat(args: argparse.Namespace) -> int:
    cfg = local_config()
    setup_logs(cfg)
    from bot.sandbox.chat import main as chat_main
    return chat_main()


@command("local-api")
def cmd_local_api(args: argparse.Namespace) -> int:
    from bot.sandbox.bot_api import main as local_api_main
    argv = ["--token", args.token, "--port", str(args.port), "--host", args.host]
    if args.state:
        argv += ["--state", str(args.state)]
    return local_api_main(argv)


@command("shop")
def cmd_shop(args: argparse.Namespace) -> int:
    from bot.shop_file import load_shop
    cfg = load_config(args)
    shop = load_shop(cfg.shop_file)
    changes = with_store(args, lambda s: s.sync_shop(shop.items, str(cfg.shop_file), args.reset_stock), create=True)
    for change in changes:
        print(change)
    print(f"synced {len(shop.items)} item(s) from {cfg.shop_file}: {len(changes)} change(s)")
    return 0


def _names(shop: Any) -> dict[str, str]:
    """Every item name and alias of the shop file -> its item."""
    names = {spec.item: spec.item for spec in shop.items}
    for item, aliases in shop.aliases:
        names.update({alias: item for alias in aliases})
    return names


@command("import-sales")
def cmd_import_sales(args: argparse.Namespace) -> int:
    from bot.sales_import import describe, parse_sales
    from bot.shop_file import load_shop
    cfg = load_config(args)
    shop = load_shop(cfg.shop_file)
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {args.file}: {exc}") from None

    async def run(store: Store) -> Any:
        await store.seed_shop(shop.items, str(cfg.shop_file))      # a new database knows the shop's items first
        today = store.clock.now().astimezone(ZoneInfo(shop.timezone)).date()     # shop time: today is not over
        lines, problems = parse_sales(text, _names(shop), today)
        if problems:
            return problems
        return await store.import_sales(lines, shop.timezone, f"import:{Path(args.file).name}")
    done = with_store(args, run, create=True)
    problems = done if isinstance(done, list) else list(done.problems)
    if problems:
        for line in describe(problems):
            print(f"{args.file}: {line}", file=sys.stderr)
        print(f"nothing imported: {len(problems)} bad line(s)", file=sys.stderr)
        return 1
    print(f"imported {args.file}: {done.added} day(s) added, {done.unchanged} already recorded (unchanged)")
    return 0


@command("reorder-suggestions")
def cmd_reorder_suggestions(args: argparse.Namespace) -> int:
    from bot.shop_file import load_shop
    from worker.suggestions import suggestions
    cfg = load_config(args)
    shop = load_shop(cfg.shop_file)
    rows = with_store(args, lambda s: suggestions(s, now=s.clock.now(), timezone=shop.timezone,
                                                  lead_days=shop.lead_time_days, settings=shop.ordering))
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    for row in rows:
        if row.reorder_point is None:
            print(f"{row.item}: no suggestion ({row.reason}); reorder point {row.current_reorder_point}, "
                  f"target {row.current_target}")
        else:
            print(f"{row.item}: reorder point {row.current_reorder_point} -> {row.reorder_point}, target "
                  f"{row.current_target} -> {row.target} ({row.reason})")
    return 0


@command("settings")
def cmd_settings(args: argparse.Namespace) -> int:
    from bot.shop_file import load_shop
    cfg = load_config(args)
    shop = load_shop(cfg.shop_file)
    spec = next((i for i in shop.items if i.item == args.item), None)
    if spec is None:
        raise ValueError(f"unknown item {args.item!r} (the shop file has: {', '.join(i.item for i in shop.items)})")
    from bot.app import stock_watcher

    async def reset(store: Store) -> tuple[bool, tuple[str, ...]]:
        if not await store.reset_setting(args.item):
            return False, ()
        # the stock watcher checks at once, here, as the worker does after a till count (its writes are idempotent
        # by identity, so a running app's own check admits nothing twice): not at the next scheduled check
        units.use(shop.unit_words)
        return True, (await stock_watcher(store, cfg, shop).check()).admitted
    done, admitted = with_store(args, reset)
    print(f"{args.item}: " + (f"back to the shop file's reorder point {spec.reorder_point} and target {spec.target}"
                              if done else "no applied values; the shop file's are in force"))
    if admitted:
        print("the stock watcher checked at once: reorder check(s) queued for "
              + ", ".join(source.split(":")[1] for source in admitted))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shopbot", description="A durable Telegram agent bot for a small shop.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--db", help="database path or postgresql:// URL (default: SHOPBOT_DB or ./shopbot.sqlite3)")
        return p

    p = add("admit", "admit one occurrence; prints accepted, duplicate, conflict or refused")
    p.add_argument("--source", required=True, help="the occurrence's full identity, e.g. till:1:abc")
    p.add_argument("--session", required=True, help="the conversation, e.g. tg:42 or till:1")
    p.add_argument("--text", required=True, help="the work's text")
    p.add_argument("--destination", help="where the report goes (default: the session when it is tg:<chat>)")
    p = add("status", "counts per work and delivery state, unknown and failed items, L, λ and W")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add("check", "run every invariant on an independent connection; exit 0 all hold, 1 violations, 2 cannot check")
    p = add("reports", "the latest reports with their work items, delivery states, receipts and bodies")
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=int, default=20)
    add("migrate", "create the database or bring it to this version's schema (an older one is backed up first)")
    p = add("backup", "online backup of the live database to PATH")
    p.add_argument("path")
    p = add("prune", "remove or empty what ended more than DAYS ago (history, bodies, used nonces, counters); "
                     "identities, open work, unknown deliveries and actions stay")
    p.add_argument("--older-than", type=float, required=True, metavar="DAYS", help="age in days (at least 1)")
    p.add_argument("--vacuum", action="store_true",
                   help="then VACUUM to shrink the file (holds the write lock meanwhile; best with the bot stopped)")
    p = add("restore", "copy a backup in (the bot must be stopped); unsent deliveries become unknown")
    p.add_argument("path")
    p = add("resolve", "decide about a report that may not have arrived: resend it or mark it delivered")
    p.add_argument("report", help="report identity, e.g. r12.1")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--resend", action="store_true", help="send it once more")
    group.add_argument("--delivered", action="store_true", help="the owner has it: record it as delivered")
    p = add("forget", "delete a conversation's agent history and cancel its waiting work")
    p.add_argument("--session", required=True, help="e.g. tg:42")
    p = add("actions", "list supplier actions with their state; release or void a quarantined one")
    p.add_argument("decision", nargs="?", choices=["release", "void", "delivered", "resend"],
                   help="a recorded operator decision: release or void a quarantined action; an unknown one the "
                        "supplier has is delivered, one it does not have is sent again with its key (resend)")
    p.add_argument("action_id", nargs="?", type=int)
    p.add_argument("--quarantined", action="store_true", help="only the quarantined ones")
    p = add("run", "run the whole product: Telegram ingress, worker, relay, HTTP server, producers")
    p.add_argument("--drain", action="store_true",
                   help="recover, process every due item and delivery, then exit 0 and print what is left")
    sub.add_parser("demo", help="a scripted day against a local Telegram Bot API (no token, no key)",
                   description="a scripted day against a local Telegram Bot API (no token, no key)")
    sub.add_parser("chat", help="type as the owner in the terminal, against a local Telegram Bot API",
                   description="type as the owner in the terminal, against a local Telegram Bot API")
    p = sub.add_parser("local-api", help="run the local fake Telegram Bot API server as its own process",
                       description="run the local fake Telegram Bot API server as its own process")
    p.add_argument("--token", required=True)
    p.add_argument("--port", type=int, default=8081)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--state", type=Path, help="SQLite file keeping updates, offsets and sent messages")
    p = add("shop", "apply the shop file explicitly (`shop sync`); counted stock is kept")
    p.add_argument("action", choices=["sync"])
    p.add_argument("--reset-stock", action="store_true", help="also set stock on hand to the file's values")
    p = add("import-sales", "import a till's sales history (CSV: date,item,quantity with a header); all or nothing, "
                            "every bad line reported; importing the same file again changes nothing")
    p.add_argument("file", help="the CSV file")
    p = add("reorder-suggestions", "reorder points and targets suggested from each item's sales, lead time and "
                                   "service level ([ordering] in the shop file)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = add("settings", "`settings reset ITEM`: the item's reorder point and target go back to the shop file's")
    p.add_argument("action", choices=["reset"])
    p.add_argument("item")
    return parser


def _refused(args: argparse.Namespace, text: str) -> None:
    """A command's refusal on stderr; for `shopbot run` with SHOPBOT_LOG_FORMAT=json, as one JSON log line (every
    line `shopbot run` writes is JSON in that format, the refusal to start included)."""
    if args.command == "run" and config_module.environment().get("SHOPBOT_LOG_FORMAT", "").lower() == "json":
        import logging

        from bot.logs import setup_logging
        setup_logging("INFO", [], fmt="json")
        logging.getLogger("shopbot").error("shopbot run refused to start: %s", text)
    else:
        print(text, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    # Private files (C21): the database, its WAL, the log file and backups hold the shop's records and messages;
    # whatever umask the process was started with (outside systemd: often 022, world-readable), they are 0600.
    os.umask(0o077)
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except config_module.ConfigError as exc:
        for line in exc.lines:
            _refused(args, f"configuration error: {line}")
        return 2
    except ShopFileError as exc:
        for line in str(exc).splitlines():
            _refused(args, f"configuration error: {line}")
        return 2
    except StoreError as exc:
        _refused(args, f"error: {exc}")
        return 1
    except (FileExistsError, ValueError) as exc:   # shop file and other input errors carry a clear message
        _refused(args, f"error: {exc}")
        return 1

