"""The shop records' Enums (store/shop_records.py, store/records.py) hold exactly the values of their column's CHECK
list, in both dialects' schemas: a value the store may write is never unreadable, and an Enum member the store would
refuse is never offered. The last CHECK of a column in a schema file is the one in force (PostgreSQL alters them in
place)."""
from __future__ import annotations

import enum
import re
from pathlib import Path

import pytest

from store import ActionState, MissedReason, RunOutcome, StockEventKind

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {"sqlite": ROOT / "store/sqlite/schema.sql", "postgres": ROOT / "store/postgres/schema.sql"}
CHECKED: list[tuple[type[enum.Enum], str, str]] = [
    (StockEventKind, "stock_events", "kind"),
    (MissedReason, "missed_occurrences", "reason"),
    (RunOutcome, "runs", "outcome"),
    (ActionState, "actions", "state"),
]


def check_list(schema: str, table: str, column: str) -> set[str]:
    """The values of the last `CHECK (column IN (...))` in a CREATE TABLE or ALTER TABLE statement of `table`."""
    text = re.sub(r"--[^\n]*", "", schema)
    found: list[str] = []
    for statement in text.split(";"):
        if re.match(rf"\s*(CREATE|ALTER)\s+TABLE\s+{table}\b", statement, re.IGNORECASE):
            found += re.findall(rf"CHECK\s*\(\s*{column}\s+IN\s*\(([^)]*)\)", statement, re.IGNORECASE)
    if not found:
        raise AssertionError(f"no CHECK list for {table}.{column}")
    return set(re.findall(r"'([^']*)'", found[-1]))


def values(kind: type[enum.Enum]) -> set[str]:
    return {str(member.value) for member in kind}


@pytest.mark.parametrize("dialect", sorted(SCHEMAS))
@pytest.mark.parametrize(("kind", "table", "column"), CHECKED, ids=[k.__name__ for k, _, _ in CHECKED])
def test_each_enum_is_exactly_its_columns_check_list(dialect: str, kind: type[enum.Enum], table: str,
                                                     column: str) -> None:
    assert values(kind) == check_list(SCHEMAS[dialect].read_text(), table, column)


def test_a_planted_extra_value_is_caught() -> None:
    """Negative control: an Enum with one value more than the CHECK list (or a CHECK list with one more) differs."""
    planted = enum.StrEnum("Planted", {**{m.name: m.value for m in StockEventKind}, "GIFT": "gift"})
    schema = SCHEMAS["postgres"].read_text()
    assert values(planted) != check_list(schema, "stock_events", "kind")
    widened = schema.replace("'restock', 'received'));", "'restock', 'received', 'gift'));")
    assert widened != schema and values(StockEventKind) != check_list(widened, "stock_events", "kind")
    # the last CHECK is the one in force: PostgreSQL's first stock_events list lacks 'restock' and 'received'
    first = re.sub(r"ALTER TABLE stock_events[^;]*;", "", schema)
    assert check_list(first, "stock_events", "kind") == {"seed", "count", "sync"}
