"""Every state enum names exactly the values its column's CHECK list allows, in both dialects' schema.sql and as the
migrations leave it (a CHECK widened by a migration, e.g. 0004's proposals, counts as its last form). Read from the
SQL text, so a value added on one side only, or to the enum only, fails here before any database is opened."""
from __future__ import annotations

import enum
import re

import pytest

from store import (
    ActionState,
    DeliveryState,
    LimitKind,
    MissedReason,
    OrderState,
    ProposalState,
    WorkKind,
    WorkState,
)
from tests.support import ROOT

STATES: list[tuple[type[enum.Enum], str, str]] = [
    (WorkState, "work", "state"), (WorkKind, "work", "kind"), (DeliveryState, "deliveries", "state"),
    (ProposalState, "proposals", "state"), (LimitKind, "proposals", "refusal"), (ActionState, "actions", "state"),
    (OrderState, "orders", "state"), (MissedReason, "missed_occurrences", "reason"),
]

# in file order: a table's definition or change (whose CHECKs follow), a rename, a column's CHECK list
_EVENT = re.compile(r"ALTER TABLE (\w+) RENAME TO (\w+)|(?:CREATE|ALTER) TABLE (\w+)"
                    r"|CHECK \((?:\w+ IS NULL OR )?(\w+) IN \(([^)]*)\)", re.IGNORECASE)


def check_lists(sql: str) -> dict[tuple[str, str], set[str]]:
    """(table, column) -> the values of its last CHECK (column IN (...)), renames followed."""
    sql = re.sub(r"--[^\n]*", "", sql)
    found: dict[tuple[str, str], set[str]] = {}
    table = ""
    for m in _EVENT.finditer(sql):
        old, new, named, column, values = m.groups()
        if old:
            found.update({(new, c): v for (t, c), v in list(found.items()) if t == old})
        elif named:
            table = named
        else:
            found[(table, column)] = set(re.findall(r"'([^']*)'", values))
    return found


def mismatch(states: type[enum.Enum], allowed: set[str] | None) -> str:
    """'' when the enum's values are exactly the CHECK list's, else what differs."""
    if allowed is None:
        return f"{states.__name__}: no CHECK list found"
    values = {member.value for member in states}
    extra, missing = sorted(values - allowed), sorted(allowed - values)
    return f"{states.__name__}: not allowed by the schema {extra}, missing {missing}" if extra or missing else ""


def sources() -> dict[str, str]:
    found = {}
    for dialect in ("sqlite", "postgres"):
        found[f"{dialect}/schema.sql"] = (ROOT / "store" / dialect / "schema.sql").read_text()
        migrations = sorted((ROOT / "store" / dialect / "migrations").glob("*.sql"))
        found[f"{dialect}/migrations"] = "\n".join(path.read_text() for path in migrations)
    return found


@pytest.mark.parametrize("source", sorted(sources()))
def test_every_state_enum_is_its_columns_check_list(source: str):
    lists = check_lists(sources()[source])
    assert [m for states, table, column in STATES if (m := mismatch(states, lists.get((table, column))))] == []


def test_a_widened_check_counts_in_its_last_form():
    lists = check_lists("CREATE TABLE p (state TEXT CHECK (state IN ('a', 'b')));\n"
                        "ALTER TABLE p DROP CONSTRAINT c, ADD CONSTRAINT c CHECK (state IN ('a', 'b', 'c'));\n"
                        "CREATE TABLE q_new (state TEXT CHECK (state IN ('x')));  -- CHECK (state IN ('no'))\n"
                        "ALTER TABLE q_new RENAME TO q;")
    assert lists[("p", "state")] == {"a", "b", "c"} and lists[("q", "state")] == {"x"}


def test_an_enum_with_a_value_too_many_or_too_few_is_caught():
    """Negative control: the same comparison fails for an enum that gained or lost a value."""
    lists = check_lists(sources()["sqlite/schema.sql"])
    allowed = lists[("orders", "state")]
    assert mismatch(OrderState, allowed) == ""
    extra = enum.Enum("OrderState", {m.name: m.value for m in OrderState} | {"LOST": "lost"})
    fewer = enum.Enum("OrderState", {m.name: m.value for m in OrderState if m is not OrderState.CANCELLED})
    assert mismatch(extra, allowed) == "OrderState: not allowed by the schema ['lost'], missing []"
    assert mismatch(fewer, allowed) == "OrderState: not allowed by the schema [], missing ['cancelled']"
    assert mismatch(OrderState, None) == "OrderState: no CHECK list found"
