"""A PostgreSQL server for the tests: SHOPBOT_TEST_PG_DSN, else postgresql://postgres@127.0.0.1:5432/postgres.

One template database is migrated once per test session (per pytest-xdist worker). Each worker copies it once into
its own database (CREATE DATABASE ... TEMPLATE), which every test asking for `pg_url` shares, emptied between tests
back to exactly what a freshly migrated database holds (`WorkerDatabase`): one TRUNCATE is tens of milliseconds, a
copied database one or more seconds. A test that needs a database of its own (the bot's processes, a changed
schema, an empty one for migrations) gets a fresh copy (`fresh_database`), dropped afterwards. Without a server the
PostgreSQL tests are skipped with one line saying how to get one, except when CI=true, where a missing server fails
the run (a skipped backend on CI would make a green run hide a missing setup)."""
from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

# Read at import: every test starts with SHOPBOT_* cleared (tests/conftest.py).
DSN = os.environ.get("SHOPBOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
HOW = ("set SHOPBOT_TEST_PG_DSN to a server's URL, or install one (Debian: apt-get install postgresql, then "
       "pg_ctlcluster --skip-systemctl-redirect <version> main start)")
_numbers = itertools.count(1)
_probe: str | None = None


def url_of(database: str) -> str:
    parts = urlsplit(DSN)
    return urlunsplit(parts._replace(path=f"/{database}"))


def server_or_skip() -> None:
    """Skip (or, on CI, fail) when no server answers at DSN."""
    global _probe
    if _probe is None:
        try:
            import psycopg
            with psycopg.connect(DSN, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            _probe = ""
        except Exception as exc:   # no driver, no server, refused: all mean "no PostgreSQL here"
            _probe = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if _probe:
        message = f"PostgreSQL tests skipped: no server at {DSN} ({_probe}); {HOW}"
        if os.environ.get("CI") == "true":
            pytest.fail(message.replace("skipped", "cannot run on CI"), pytrace=False)
        pytest.skip(message)


def admin(sql: str) -> None:
    import psycopg
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def make_template() -> Iterator[str]:
    """A migrated template database for the whole test session (a session fixture's body)."""
    from store.clock import to_text
    from store.postgres import migrations
    from store.postgres.connection import PgConnection, configure

    server_or_skip()
    import psycopg
    name = f"shopbot_template_{os.getpid()}"
    admin(f"DROP DATABASE IF EXISTS {name}")
    admin(f"CREATE DATABASE {name}")
    with psycopg.connect(url_of(name), autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        configure(conn)
        migrations.migrate(PgConnection(conn), name, to_text(__import__("datetime").datetime.now(
            __import__("datetime").UTC)))
    try:
        yield name
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _no_flush_wait(name: str) -> None:
    """Commits in a test database do not wait for the server's WAL flush (synchronous_commit=off): what a commit
    makes visible, which locks it takes and releases, and when, are the same; only the server's own crash could lose
    the last commits, and no test crashes the server (the bot's processes are what the tests kill). The flush is
    most of a small commit's time on a disk with slow fsync. Per database, since CREATE DATABASE ... TEMPLATE does
    not copy a database's settings."""
    admin(f"ALTER DATABASE {name} SET synchronous_commit = off")


def copy_template(template: str, name: str) -> None:
    admin(f"CREATE DATABASE {name} TEMPLATE {template}")
    _no_flush_wait(name)


def fresh_database(template: str) -> Iterator[str]:
    """A database copied from the template, for one test that needs a database of its own; its URL."""
    name = f"shopbot_test_{os.getpid()}_{next(_numbers)}"
    copy_template(template, name)
    try:
        yield url_of(name)
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def empty_database() -> Iterator[str]:
    """An empty database (no schema), for the migration tests."""
    server_or_skip()
    name = f"shopbot_empty_{os.getpid()}_{next(_numbers)}"
    admin(f"CREATE DATABASE {name}")
    _no_flush_wait(name)
    try:
        yield url_of(name)
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
