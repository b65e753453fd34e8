"""One guarded state move, shared by deliveries and actions: the row must be in the expected state (so two movers
never both win), and the database's triggers refuse any move the contracts do not list."""
from __future__ import annotations

from .. import redaction
from ..errors import IllegalTransition
from .connection import Connection


def move(conn: Connection, table: str, key: str, row_id: int, expect: str, new: str, now: str,
         **columns: object) -> None:
    reason = columns.get("reason")
    if isinstance(reason, str):    # outside error text: no secret is stored (store/redaction.py)
        columns["reason"] = redaction.error_detail(reason)
    sets = "".join(f", {name} = ${n}" for n, name in enumerate(columns, start=5))
    cursor = conn.execute(f"UPDATE {table} SET state = $1, updated_at = $2{sets} WHERE {key} = $3 AND state = $4",
                          (new, now, row_id, expect, *columns.values()))
    if cursor.rowcount != 1:
        row = conn.execute(f"SELECT state FROM {table} WHERE {key} = $1", (row_id,)).fetchone()
        raise IllegalTransition(f"{table[:-1]} {row_id} is not {expect}; cannot move it to {new}",
                                table=table, row=row_id, expected=expect, found=row[0] if row else None)
