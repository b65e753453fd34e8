"""The docs stay honest: every CLI command has help and is in the README; .env.example lists every config key; every
source or test path (and test name) the docs give exists."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bot import config, config_docs
from bot.cli.commands import COMMANDS, build_parser
from tests.support import ROOT


def test_every_command_is_documented_with_help():
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in COMMANDS:
        assert f"`shopbot {name}" in readme, f"shopbot {name} is not in the README"
        assert sub.choices[name].description, f"shopbot {name} has no help"


def test_env_example_matches_the_config_keys():
    text = (ROOT / ".env.example").read_text()
    keys = re.findall(r"^([A-Z_]+)=", text, flags=re.M)
    assert keys == list(config.KEYS)


def test_env_example_and_configuration_md_are_generated_from_the_declarations():
    assert config_docs.stale() == [], "run python -m bot.config_docs"
    assert config_docs.main(["--check"]) == 0
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key, (default, _) in config.KEYS.items():       # every declared key, with its default, on the page
        assert f"| `{key}` |" in page and (f"`{default}`" in page if default else True)


def test_a_generated_file_out_of_step_is_reported(tmp_path, monkeypatch, capsys):
    """The negative control: a hand edit of .env.example (a key the declarations do not have) is caught."""
    planted = tmp_path / ".env.example"
    planted.write_text(config_docs.env_example() + "SHOPBOT_HAND_EDITED=1\n")
    monkeypatch.setattr(config_docs, "ENV_EXAMPLE", planted)
    monkeypatch.setattr(config_docs, "ROOT", tmp_path)
    monkeypatch.setattr(config_docs, "CONFIGURATION_MD", tmp_path / "configuration.md")   # missing: stale too
    assert config_docs.stale() == [planted, tmp_path / "configuration.md"]
    assert config_docs.main(["--check"]) == 1
    assert ".env.example is out of step" in capsys.readouterr().err


def test_a_secret_setting_is_never_shown_and_always_redacted():
    """Declared once with secret=True, a setting is a Secret, shown as **** and handed to log redaction."""
    secret_keys = [s.key for _, s in config.SETTINGS if s.secret]
    assert "TELEGRAM_BOT_TOKEN" in secret_keys and "SHOPBOT_SUPPLIER_TOKEN" in secret_keys
    env = {"TELEGRAM_BOT_TOKEN": "123:abcdef", "SHOPBOT_OWNER_IDS": "1001",
           "SHOPBOT_SUPPLIER_TOKEN": "supplier-token-value", "SHOPBOT_MODEL_API_KEY": "model-key-value"}
    cfg = config.load(env)
    assert {"123:abcdef", "supplier-token-value", "model-key-value"} <= set(cfg.secrets())
    shown = cfg.redacted()
    assert "supplier-token-value" not in repr(cfg) and shown["supplier_token"] == "****"


def test_unknown_keys_and_bad_values_are_refused():
    with pytest.raises(config.ConfigError, match="SHOPBOT_CAPACTY"):
        config.load({"SHOPBOT_CAPACTY": "5"})
    with pytest.raises(config.ConfigError, match="SHOPBOT_CAPACITY"):
        config.load({"SHOPBOT_CAPACITY": "lots"})
    with pytest.raises(config.ConfigError, match="WEBHOOK_SECRET"):
        config.load({"SHOPBOT_WEBHOOK_URL": "https://x/telegram/webhook"})
    with pytest.raises(config.ConfigError, match="TEST_MODE"):
        config.load({"SHOPBOT_CLOCK": "accelerated:2027-01-01T00:00:00Z:60"})
    with pytest.raises(config.ConfigError, match="fault point"):
        config.load({"SHOPBOT_FAULT": "K99:kill"})


def test_secrets_never_show(tmp_path):
    cfg = config.load({"TELEGRAM_BOT_TOKEN": "123:abcdef", "SHOPBOT_MODEL_API_KEY": "sk-secret",
                       "SHOPBOT_OWNER_IDS": "1"})
    assert "abcdef" not in repr(cfg) and "sk-secret" not in repr(cfg)
    assert cfg.redacted()["telegram_token"] == "****"


def test_dotenv_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("SHOPBOT_CAPACITY=7\nSHOPBOT_ATTEMPT_CAP='4'\n# a comment\n")
    monkeypatch.setenv("SHOPBOT_CAPACITY", "9")
    env = config.environment(tmp_path)
    cfg = config.load(env)
    assert cfg.capacity == 9 and cfg.attempt_cap == 4


# The docs name where a rule is enforced and which test shows it (docs/contracts.md, docs/reliability.md) and where
# things live (the rest): every path they name must exist, and every `path::test` (or a bare `::test`, in the file
# named just before it) must name a test defined in that file.
REFERENCE_DOCS = ("README.md", "bench/RESULTS.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").glob("*.md")))
_REFERENCE = re.compile(
    r"(?<![\w/.<-])(?P<path>(?:bench|bot|deploy|docs|producers|store|tests|worker)/[\w./-]*[\w/])"
    r"(?:::(?P<test>\w+(?:::\w+)*))?|(?<![\w:])::(?P<name>\w+(?:::\w+)*)")


def _defined_names(path: Path) -> set[str]:
    """The module's functions, classes (and `Class::method`) and assigned names (a hypothesis `TestCase`)."""
    found: set[str] = set()

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, ast.Assign) and not prefix:
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    walk(ast.parse(path.read_text(), str(path)).body, "")
    return found


def stale_references(text: str, root: Path, doc: str = "doc") -> list[str]:
    """Every path or test named in `text` that is not in the tree at `root`, as `doc:line: what`."""
    stale, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        for match in _REFERENCE.finditer(line):
            if match["path"]:
                current = match["path"]
                if not (root / current).exists():
                    stale.append(f"{doc}:{number}: no such path {current}")
                    continue
            name = match["test"] or match["name"]
            if name is None:
                continue
            if current is None or not current.endswith(".py") or not (root / current).is_file():
                stale.append(f"{doc}:{number}: ::{name} does not follow an existing Python file")
            elif name not in _defined_names(root / current):
                stale.append(f"{doc}:{number}: {current} defines no {name}")
    return stale


@pytest.mark.parametrize("doc", REFERENCE_DOCS)
def test_every_path_and_test_the_docs_name_exists(doc):
    assert "docs/contracts.md" in REFERENCE_DOCS and "docs/reliability.md" in REFERENCE_DOCS
    assert stale_references((ROOT / doc).read_text(), ROOT, doc) == []


def test_a_planted_wrong_path_or_test_name_is_caught():
    """Negative control: a stale file, a stale test in a real file, a bare `::test` after it, a bare `::test` with no
    file before it, and a planted line that is right (so the check does not just flag everything)."""
    text = ("Shown by: `tests/test_kill_points.py::test_killed_before_the_reply_then_one_reply_after_restart`;\n"
            "`store/inbox.py` (`admit`).\n"
            "`tests/unit/test_docs.py::test_no_such_test`, `::test_a_planted_wrong_path_or_test_name_is_caught`, "
            "`::test_also_missing`; `docs/contracts.md`, `store/shared/inbox.py` and `bot/sandbox/bot_api/`.\n")
    assert stale_references("::test_orphan", ROOT) == ["doc:1: ::test_orphan does not follow an existing Python file"]
    assert stale_references(text, ROOT) == [
        "doc:1: no such path tests/test_kill_points.py",
        "doc:2: no such path store/inbox.py",
        "doc:3: tests/unit/test_docs.py defines no test_no_such_test",
        "doc:3: tests/unit/test_docs.py defines no test_also_missing",
    ]
