"""No text the owner (or the model) reads is written in cents: no string the owner-facing code holds says "cents",
except SQL (the `spending.cents` column) and the patterns that find cents to turn them into money. The store keeps
minor units in records and typed outcomes; the renderer writes money (worker/money.py)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER_FACING = ("worker", "producers", "bot/relays", "store")
CENTS = re.compile(r"\bcents?\b")
SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b")
PATTERN = re.compile(r"\\[bsd]|\(\?")          # a regular expression's text


def cents_texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string constant saying "cents" that is neither a docstring, SQL nor a pattern."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and CENTS.search(node.value) and not SQL.match(node.value) and not PATTERN.search(node.value)]


def test_no_product_text_says_cents():
    found = [(str(path.relative_to(ROOT)), line, text) for part in OWNER_FACING
             for path in sorted((ROOT / part).rglob("*.py")) for line, text in cents_texts(path.read_text())]
    assert found == []


def test_the_check_finds_the_words_the_store_used_to_write():
    """Negative control: the store's former refusal, planted, is found (an f-string's parts are constants too)."""
    planted = 'def reason(total, limit):\n    """Money in cents here is a docstring, not text."""\n' \
              '    return f"the total of {total} cents is over the limit of {limit} cents per order"\n'
    assert [line for line, _ in cents_texts(planted)] == [3, 3]
    assert cents_texts('conn.execute("SELECT sum(cents) FROM spending")') == []
