"""The destination grammar in one place (store/destination.py): a Telegram chat is `tg:<chat id>` as rows already
stored spell it; anything else is stored only; nothing else in the code cuts the prefix."""
from __future__ import annotations

import ast

import pytest

from store import Destination, telegram_chat
from tests.support import ROOT


def test_a_telegram_destination_is_the_text_rows_already_hold():
    chat = Destination.telegram(1001)
    assert chat == "tg:1001" and isinstance(chat, str)       # stored as before: no migration
    assert chat.chat_id == 1001 and telegram_chat("tg:1001") == 1001
    assert Destination.telegram(-100123).chat_id == -100123  # a group's id is negative


@pytest.mark.parametrize("text", [None, "supplier:acme", "notice:busy", "tg:", "tg:12a", "tg:-", "tg: 12",
                                  "tg:\uff11\uff12", "TG:12", "tg:1:2"])
def test_anything_but_a_telegram_chat_has_no_chat(text):
    assert telegram_chat(text) is None


@pytest.mark.parametrize("chat_id", ["1001", 1001.0, True, None])
def test_a_telegram_destination_is_made_from_an_int_only(chat_id):
    with pytest.raises(TypeError):
        Destination.telegram(chat_id)


def _prefix_cuts(path):
    """`x[3:]` on a name, the old way of reading a `tg:` destination."""
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Slice) and isinstance(node.slice.lower, ast.Constant)
            and node.slice.lower.value == 3 and node.slice.upper is None]


def test_no_module_above_the_store_cuts_the_tg_prefix():
    cuts = {str(p.relative_to(ROOT)): lines for package in ("bot", "producers", "worker")
            for p in sorted((ROOT / package).rglob("*.py")) if (lines := _prefix_cuts(p))}
    assert cuts == {}


def test_the_prefix_check_finds_a_planted_cut(tmp_path):
    """Negative control for the check above."""
    planted = tmp_path / "planted.py"
    planted.write_text('def chat(destination):\n    return int(destination[3:])\n')
    assert _prefix_cuts(planted) == [2]
