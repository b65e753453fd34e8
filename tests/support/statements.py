"""Every SQL statement written in store/, read from the source (tests cannot miss one that no other test runs).

`statements()` yields every string passed to `execute`/`executemany` (in the dialect folders and their migrations
packages), every module-level SQL constant, the dialects' named SQL (store/shared/dialect.py) and the invariant rules.
A statement put together at run time from pieces (an f-string over a list of marks) is resolved where its pieces are
module constants; the few built from call arguments are skipped here and run by the contract suite on both stores.

`sql_strings(source)` yields every string piece of a module that reads as SQL (statements, and the fragments they are
assembled from), for the guard that no statement holds another driver's marks (tests/integration/test_no_rewriting.py).
"""
from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from store.postgres.dialect import POSTGRES
from store.shared.dialect import DialectSQL
from store.shared.invariants import RULES
from store.sqlite.dialect import SQLITE
from tests.support import ROOT

SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
DIALECT_DIRS = {"shared": ("sqlite", "postgres"), "sqlite": ("sqlite",), "postgres": ("postgres",)}
# SQL's words as store/ writes them (upper case): a string holding one is read as SQL or a fragment of it
SQL_WORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|VALUES|SET|AND|OR|LIMIT|FROM|JOIN|ORDER BY|IN)\b")
# the marks of other paramstyles: qmark `?`, named `:name` (not a `::type` cast), format `%s` and pyformat `%(name)s`
FOREIGN_MARK = re.compile(r"\?|(?<![:\w]):[A-Za-z_]\w*|%s|%\(\w+\)s")
NUMBERED_MARK = re.compile(r"\$(\d+)")
# a fragment with no SQL word that still holds a qmark where a value goes (`f", {name} = ?"`)
QMARK_FRAGMENT = re.compile(r"[=(,<>]\s*\?(?=\s|[,)]|$)")


class _Unresolved(Exception):
    pass


def _text(node: ast.expr, module: object) -> str:
    """The statement's text where it is made of literals and module constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, module) + _text(node.right, module)
    if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), str):
        return str(getattr(module, node.id))
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(_text(value.value, module))
        return "".join(parts)
    raise _Unresolved(ast.dump(node)[:80])


def source_files(folder: str) -> list[Path]:
    """The modules of a dialect folder of store/, its migrations package included."""
    return sorted((ROOT / "store" / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def statements() -> Iterator[tuple[str, str, str]]:
    """(dialect folder, where, sql) for every statement of store/."""
    for folder in DIALECT_DIRS:
        for path in source_files(folder):
            name = module_name(path)
            module = importlib.import_module(name)
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("execute", "executemany") and node.args):
                    try:
                        sql = _text(node.args[0], module)
                    except _Unresolved:
                        continue            # built from call arguments: run by the contract suite
                    if SQL_START.match(sql):
                        yield folder, f"{path.relative_to(ROOT)}:{node.lineno}", sql
            for attr, value in vars(module).items():
                if isinstance(value, str) and SQL_START.match(value) and attr.isupper() and not attr.startswith("_"):
                    yield folder, f"{name}.{attr}", value
    for rule, (_, queries) in RULES.items():
        for query in queries:
            yield "shared", f"invariant {rule}", query
    for dialect, named in (("sqlite", SQLITE), ("postgres", POSTGRES)):
        for field in fields(DialectSQL):
            value = getattr(named, field.name)
            if value is None:           # a statement this dialect does not need (DialectSQL.settled on SQLite)
                continue
            for key, sql in (value.items() if isinstance(value, dict) else [("", value)]):
                text = sql if SQL_START.match(sql) else f"SELECT {sql} FROM deliveries d"
                yield dialect, f"{dialect} {field.name} {key}".strip(), text


def parameters(sql: str) -> int:
    """How many parameters a statement takes: its highest `$n`."""
    return max((int(n) for n in NUMBERED_MARK.findall(unquoted(sql))), default=0)


def unquoted(sql: str) -> str:
    """The statement without its string literals ('...'), where a mark is only text."""
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def sql_strings(source: str, filename: str = "<planted>") -> Iterator[tuple[int, str]]:
    """(line, text) of every string piece of a module that reads as SQL: a statement or a fragment of one. A
    docstring is prose, not SQL."""
    tree = ast.parse(source, filename)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                and (SQL_WORD.search(node.value) or QMARK_FRAGMENT.search(node.value))):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.Constant) and SQL_WORD.search(str(v.value)) for v in node.values):
            # an f-string of SQL: the strings its pieces are made of too (`','.join('?' * n)`, `f':skip{i}'`)
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    for inner in ast.walk(value):
                        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                            yield inner.lineno, inner.value


def foreign_marks(sql: str) -> list[str]:
    """The marks of another paramstyle in a statement or fragment (outside its string literals)."""
    return FOREIGN_MARK.findall(unquoted(sql))
