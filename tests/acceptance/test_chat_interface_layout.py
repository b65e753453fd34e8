"""The owner's chat interface has one home: the worker and the producers ask (store/asks.py `Ask`, made by
`Transaction.ask`) and know no buttons; bot/relays/render.py alone builds keyboards and spells the buttons' words.

Read from the code (the AST of every module of worker/ and producers/): no Telegram keyboard class is named (imported,
or reached as an attribute), and the grammar's words (`asks.CHOICES`) are never read there.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

KEYBOARD_CLASSES = {"InlineKeyboardMarkup", "InlineKeyboardButton", "ReplyKeyboardMarkup", "KeyboardButton",
                    "ReplyKeyboardRemove", "ForceReply"}
WORDS = "CHOICES"                     # store/asks.py: the words on the buttons, for the renderer only
ASKERS = ("worker", "producers")


def names(path: Path) -> list[tuple[int, str]]:
    """(line, name) for every identifier a module imports, reads or reaches as an attribute."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom | ast.Import):
            found += [(node.lineno, alias.name.rsplit(".", 1)[-1]) for alias in node.names]
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
    return found


def button_makers(root: Path) -> list[str]:
    """Every place in worker/ or producers/ that names keyboard code or the buttons' words, as `path:line: name`."""
    return [f"{path.relative_to(root).as_posix()}:{line}: {name}"
            for package in ASKERS for path in sorted((root / package).rglob("*.py"))
            for line, name in sorted(names(path)) if name in KEYBOARD_CLASSES or name == WORDS]


def test_the_worker_and_the_producers_build_no_buttons():
    assert button_makers(ROOT) == []


def test_the_renderer_is_where_keyboards_are_built():
    """The check reads what it should: the renderer itself names both (else the check would look for nothing)."""
    found = {name for _, name in names(ROOT / "bot" / "relays" / "render.py")}
    assert {"InlineKeyboardMarkup", "InlineKeyboardButton", "ReplyKeyboardMarkup", WORDS} <= found


def test_planted_keyboard_code_is_caught(tmp_path):
    """Negative control: a copy of the layout with each way of building buttons planted once."""
    for package in ASKERS:
        (tmp_path / package).mkdir()
    (tmp_path / "worker" / "planted.py").write_text(
        "from telegram import InlineKeyboardMarkup as Markup\nimport telegram\nrow = telegram.InlineKeyboardButton\n")
    (tmp_path / "producers" / "planted.py").write_text(
        "from store import asks\nwords = dict(asks.CHOICES['proposal'])\nfrom telegram._replykeyboardmarkup import "
        "ReplyKeyboardMarkup\n")
    assert button_makers(tmp_path) == [
        "worker/planted.py:1: InlineKeyboardMarkup",
        "worker/planted.py:3: InlineKeyboardButton",
        "producers/planted.py:2: CHOICES",
        "producers/planted.py:3: ReplyKeyboardMarkup",
    ]
