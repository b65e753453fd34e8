"""What the shared SQL needs of a connection: the small DB-API slice both dialects' connections give.

SQLite's is `SqliteConnection` (store/sqlite/connection.py); PostgreSQL's is `PgConnection`
(store/postgres/connection.py). The shared modules are written against this Protocol, never against a driver.

Every statement of store/ marks its parameters as PostgreSQL does, `$1` .. `$n` (numbered across the whole
statement; a number may be used twice), and passes them as a sequence: both connections hand the text to their
driver unchanged and bind the sequence natively (tests/integration/test_no_rewriting.py holds them to it).
PostgreSQL infers a parameter's type from its first use: where that use gives none, it is cast there, as in
`(CAST($2 AS text) IS NULL OR item = $2)` (tests/integration/test_every_query_prepares.py parses every statement so).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar


class Row(Protocol):
    """A row readable by column name and by position."""

    def __getitem__(self, key: Any) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> Any: ...


T = TypeVar("T")


def marks(count: int, first: int = 1) -> str:
    """The numbered marks `$first, ..., $(first + count - 1)` of a list of `count` values (an IN list), bound from
    parameter `first` on."""
    return ", ".join(f"${n}" for n in range(first, first + count))


class Database(Protocol):
    """A dialect's database handle: each transaction one synchronous function run whole in the driver's thread."""

    hooks: Any

    async def write(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def read(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def raw(self, fn: Callable[[Any], T]) -> T: ...

    async def close(self) -> None: ...
