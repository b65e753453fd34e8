"""The count of tests per store: `python -m pytest -p tests.support.store_count [args]` prints, after the run, how
many tests ran on SQLite, on PostgreSQL, on both, and on neither (works with and without pytest-xdist).

A test runs on SQLite when, in the test's own process, it (its fixtures included) opened an SQLite database
(`sqlite3.connect`), and on PostgreSQL when one of the PostgreSQL database fixtures is set up for it (asked for by
name or through `request.getfixturevalue`, as the contract suite's `location` does): they are the suite's only source
of a PostgreSQL database (a count of connections would also catch the background threads of a pool that a finished
test left closing). "Both" counts the test functions that ran on each store, as parametrised items (the contract
suite's `[sqlite]` and `[postgres]`) or within one item."""
from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Generator
from typing import Any

import pytest

PG_FIXTURES = {"pg_url", "pg_fresh_url", "pg_empty_url"}      # tests/conftest.py's, each set up per test
_opened: set[str] = set()
_ran: dict[str, set[str]] = {}        # controller side: node id -> the stores its test used


def _recording(store: str, connect: Callable[..., Any]) -> Callable[..., Any]:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        _opened.add(store)
        return connect(*args, **kwargs)
    return recorded


def pytest_configure(config: pytest.Config) -> None:
    sqlite3.connect = _recording("sqlite", sqlite3.connect)  # type: ignore[assignment]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _opened.clear()


def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    if fixturedef.argname in PG_FIXTURES:
        _opened.add("postgres")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    if call.when == "teardown":
        item.user_properties.append(("stores", ",".join(sorted(_opened))))
    yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.outcome != "skipped":
        _ran.setdefault(report.nodeid, set())
    if report.when == "teardown" and report.nodeid in _ran:
        stores = dict(report.user_properties).get("stores", "")
        _ran[report.nodeid] = set(filter(None, str(stores).split(",")))


def counts(ran: dict[str, set[str]]) -> tuple[Counter[str], Counter[str]]:
    """(items per store, with 'neither'), (test functions on SQLite only, PostgreSQL only, both)."""
    items: Counter[str] = Counter()
    functions: dict[str, set[str]] = {}
    for nodeid, stores in ran.items():
        for store in stores or {"neither"}:
            items[store] += 1
        functions.setdefault(re.sub(r"\[.*\]$", "", nodeid), set()).update(stores)
    by_function = Counter({"sqlite": 0, "postgres": 0, "both": 0})
    for stores in functions.values():
        if stores >= {"sqlite", "postgres"}:
            by_function["both"] += 1
        elif stores:
            by_function[next(iter(stores))] += 1
    return items, by_function


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _ran or hasattr(terminalreporter.config, "workerinput"):
        return
    items, functions = counts(_ran)
    terminalreporter.write_line(
        f"tests per store: {len(_ran)} tests run; on SQLite {items['sqlite']}, on PostgreSQL {items['postgres']}, "
        f"on no database {items['neither']}; test functions on SQLite only {functions['sqlite']}, on PostgreSQL "
        f"only {functions['postgres']}, on both {functions['both']}")
