"""Every implementation offers every member of every port (a cheap structural check beside the behaviour suite)."""
from __future__ import annotations

import inspect
import re
from typing import Any, Protocol

from store import (
    AdmissionTx,
    ConversationTx,
    InTransaction,
    OrderTx,
    ProducerRecords,
    PromptTx,
    Store,
    Transaction,
)
from store.ports import PORTS


def members(port: type) -> set[str]:
    """A Protocol's own methods, properties and annotated attributes (its bases' members come with them)."""
    names: set[str] = set()
    for klass in inspect.getmro(port):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")} | set(getattr(klass, "__annotations__", {}))
    return names


def loose(port: type) -> list[str]:
    """The members of `port` (and its bases) whose signature names `Any`: a row as a dict, or an untyped value. A
    port method returns a frozen dataclass, an Enum or a scalar (issue 29)."""
    found = []
    for klass in inspect.getmro(port):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            fn = value.fget if isinstance(value, property) else value
            if not name.startswith("_") and inspect.isfunction(fn) and any(
                    re.search(r"\bAny\b", str(a)) for a in fn.__annotations__.values()):
                found.append(f"{klass.__name__}.{name}")
    return found


def missing(obj: object, port: type) -> list[str]:
    """The members of `port` that `obj` lacks, or has with another kind (a coroutine where the port has a plain
    method, or the reverse)."""
    gaps = []
    for name in sorted(members(port)):
        if not hasattr(obj, name):
            gaps.append(name)
            continue
        wanted = inspect.getattr_static(port, name, None)
        if inspect.isfunction(wanted) and inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(
                getattr(obj, name)):
            gaps.append(f"{name} (sync/async)")
    return gaps


async def test_every_store_has_every_port(store: Store):
    assert {port.__name__ for port in PORTS} <= {b.__name__ for b in inspect.getmro(Store)}
    for port in (*PORTS, Store):
        assert missing(store, port) == [], port.__name__


async def test_every_transaction_has_every_transaction_member(store: Store):
    def check(tx: Transaction) -> tuple[list[str], list[str]]:
        return missing(tx, Transaction), missing(tx.producers, ProducerRecords)
    assert await store.atomic(check) == ([], [])


def test_the_transaction_is_its_roles_each_member_in_one():
    """A consumer names the role it needs (`AdmissionTx`, `PromptTx`, `ConversationTx`, `OrderTx`); `Transaction`
    adds nothing of its own, and no member sits in two roles."""
    shared = members(InTransaction)
    roles = [members(role) - shared for role in (AdmissionTx, PromptTx, ConversationTx, OrderTx)]
    assert sum(len(r) for r in roles) == len(set().union(*roles))
    assert set().union(*roles) | shared == members(Transaction)
    assert {n for n in vars(Transaction) if not n.startswith("_")} == set()


async def test_a_removed_method_is_caught(store: Store):
    """Negative control: an implementation without `claim` (and one with a sync `finish`) fails the check."""
    class WithoutClaim:
        def __getattr__(self, name: str) -> object:
            if name == "claim":
                raise AttributeError(name)
            return getattr(store, name)

    class SyncFinish(WithoutClaim):
        def finish(self) -> None: ...

        async def claim(self) -> None: ...

    assert missing(WithoutClaim(), Store) == ["claim"]
    assert missing(SyncFinish(), Store) == ["finish (sync/async)"]


def test_no_port_member_is_typed_any():
    assert [gap for port in (*PORTS, Store, Transaction, ProducerRecords) for gap in loose(port)] == []


def test_a_port_method_returning_a_loose_dict_is_caught():
    """Negative control: a port method returning `dict[str, Any]` (or taking `Any`) is named."""
    class Loose(Protocol):
        def rows(self) -> dict[str, Any]: ...

        def put(self, value: Any) -> None: ...

        def typed(self, value: int) -> str: ...

    assert loose(Loose) == ["Loose.rows", "Loose.put"]
