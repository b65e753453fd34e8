"""What the shared SQL needs of a connection: the small DB-API slice both dialects' connections give.

SQLite's is `sqlite3.Connection` itself (store/sqlite/connection.py); PostgreSQL's is `PgConnection`
(store/postgres/connection.py). The shared modules are written against this Protocol, never against a driver.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
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
    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> Any: ...


T = TypeVar("T")


class Database(Protocol):
    """A dialect's database handle: each transaction one synchronous function run whole in the driver's thread."""

    hooks: Any

    async def write(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def read(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def raw(self, fn: Callable[[Any], T]) -> T: ...

    async def close(self) -> None: ...
