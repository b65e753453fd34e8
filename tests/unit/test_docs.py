"""The docs stay honest: the README stays short and keeps its two commands; every CLI command has help and a line
in the README's table with a link to where it is described; every link between the docs resolves (file and
heading) and none points outside the repository; .env.example lists every config key; every source or test path
(and test name) the docs give exists."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from bot import config, config_docs
from bot.cli.commands import COMMANDS, build_parser
from tests.support import ROOT

README_MAX_LINES = 150
README_COMMANDS = ("make demo   # sets up .venv and plays a scripted day end to end: local Telegram Bot API, offline "
                   "model, no token, no key\n"
                   "make test   # sets up .venv, lints (ruff) and runs every test (this is what CI runs: .ci/run)\n")


def test_the_readme_is_short_and_starts_with_its_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, "move detail into a page under docs/"
    assert f"```sh\n{README_COMMANDS}```" in readme


_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
_COMMAND_ROW = re.compile(r"^\| `shopbot (?P<name>[a-z-]+)[^|]*\|.*\|$", flags=re.M)


def command_rows(readme: str) -> dict[str, list[str]]:
    """Each command of the README's table, with the links on its row."""
    rows: dict[str, list[str]] = {}
    for row in _COMMAND_ROW.finditer(readme):
        rows.setdefault(row["name"], []).extend(m["target"] for m in _LINK.finditer(row[0]))
    return rows


def undocumented_commands(readme: str, names: Iterable[str]) -> list[str]:
    """The commands without a row of their own that links to a page under docs/ (links are checked below)."""
    rows = command_rows(readme)
    return [name for name in names
            if not any(target.startswith("docs/") for target in rows.get(name, []))]


def test_every_command_is_documented_with_help():
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert undocumented_commands(readme, COMMANDS) == []
    full = (ROOT / "docs" / "running.md").read_text()       # the commands' full descriptions
    for name in COMMANDS:
        assert f"`shopbot {name}" in full, f"shopbot {name} is not described in docs/running.md"
        assert sub.choices[name].description, f"shopbot {name} has no help"


def test_a_command_without_a_row_or_a_link_is_caught():
    """Negative control: a command missing from the table, one whose row has no link into docs/, and one right."""
    readme = ("| `shopbot run [--drain]` | runs ([running](docs/running.md#operator-commands)) |\n"
              "| `shopbot check` | checks (see running.md) |\n"
              "`shopbot status` is mentioned outside the table.\n")
    assert undocumented_commands(readme, ["run", "check", "status"]) == ["check", "status"]


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (outside code fences): lower case, punctuation dropped, spaces
    as hyphens."""
    anchors, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.*)", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-"))
    return anchors


def broken_links(text: str, page: Path, root: Path) -> list[str]:
    """Every relative link of `page` whose file or heading is missing, or that leaves the repository."""
    broken = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in _LINK.finditer(line):
            target = match["target"]
            if re.match(r"[a-z]+:", target):
                continue                                        # https:, mailto:: not ours to check
            file, _, anchor = target.partition("#")
            where = (page.parent / file).resolve() if file else page.resolve()
            if not where.is_relative_to(root.resolve()):
                broken.append(f"{page.name}:{number}: {target} leaves the repository")
            elif not where.exists():
                broken.append(f"{page.name}:{number}: no such file {target}")
            elif anchor and (where.suffix != ".md" or anchor not in _anchors(where.read_text())):
                broken.append(f"{page.name}:{number}: no heading #{anchor} in {file or page.name}")
    return broken


_TEAM_FOLDER = re.compile(r"(?:\.\./|/work/)shared\b")    # the team's notes beside the clone, not store/shared
LINKED_DOCS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))


@pytest.mark.parametrize("doc", LINKED_DOCS)
def test_every_link_in_the_docs_resolves_inside_the_repository(doc):
    text = (ROOT / doc).read_text()
    assert broken_links(text, ROOT / doc, ROOT) == []
    assert not _TEAM_FOLDER.search(text), f"{doc} points at the team's shared folder, which is not part of the product"


def test_a_planted_broken_link_is_caught():
    """Negative control: a missing file, a missing heading, a link out of the repository, and links that are right
    (a page's heading, a heading of the same page, an outside URL, a file that is not Markdown)."""
    text = ("[a](docs/nothing.md) [b](docs/running.md#no-such-heading) [c](../shared/DESIGN.md)\n"
            "[d](docs/running.md#the-shop-file) [e](#where-to-read-on) [f](https://example.org/x#y) [g](Makefile)\n")
    assert broken_links(text, ROOT / "README.md", ROOT) == [
        "README.md:1: no such file docs/nothing.md",
        "README.md:1: no heading #no-such-heading in docs/running.md",
        "README.md:1: ../shared/DESIGN.md leaves the repository",
    ]
    assert _TEAM_FOLDER.search("see /work/shared/DESIGN.md") and _TEAM_FOLDER.search("`../shared/notes`")
    assert not _TEAM_FOLDER.search("store/shared/inbox.py and `store/shared/`")


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


# The code's docstrings and comments point a reader at other files too ("see store/shared/outbox.py"): modules move
# (store/ split into shared/, sqlite/ and postgres/; the tests into tiers), and a pointer left behind misleads.
CODE_PACKAGES = ("bench", "bot", "producers", "store", "worker")


def stale_paths_in_code(root: Path) -> list[str]:
    """Every path named in a .py or .sql file of the product and the benchmarks that is not in the tree at `root`."""
    stale = []
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".sql") and path.is_file():
                found = stale_references(path.read_text(), root, path.relative_to(root).as_posix())
                stale += [s for s in found if ": no such path " in s]
    return stale


def test_every_path_the_code_names_exists():
    assert stale_paths_in_code(ROOT) == []


def test_a_stale_path_in_a_docstring_is_caught(tmp_path):
    """Negative control: a moved module named in a docstring is reported; a path that exists is not."""
    (tmp_path / "store" / "shared").mkdir(parents=True)
    (tmp_path / "store" / "shared" / "outbox.py").write_text('"""Parts are split as store/shared/outbox.py says."""\n')
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "a.py").write_text('"""See store/outbox.py `split_parts`."""\n')
    assert stale_paths_in_code(tmp_path) == ["worker/a.py:1: no such path store/outbox.py"]


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
