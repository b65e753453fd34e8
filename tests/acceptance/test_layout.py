"""The layout keeps its promises: the dependency direction between the packages (read from the imports), the
packaged shop file, and an install that holds exactly the four packages.

Rules (docs/architecture.md): `bot` may import everything; `producers` and `worker` import the store's public
interface only (the names of `store/__init__.py`), never `bot` and never each other; `bot.sandbox` is used only by
itself, the CLI's demo/chat/local-api commands and the tests; `store` imports nothing of the project above it.
Inside the store the two dialects are siblings: store/sqlite and store/postgres never import each other, and the
shared base (store/shared) imports neither.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGES = ("bot", "producers", "store", "worker")
DIALECTS = ("store.sqlite", "store.postgres")
SANDBOX_USERS = {"bot/cli/commands.py"}         # demo, chat and local-api start the sandbox


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import of a project package in `path`, relative imports resolved."""
    module = path.relative_to(root).with_suffix("").parts
    package = module[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ((base,) if base else ()))
            # `from . import x` names a module; `from a.b import x` is counted as an import of a.b
            found += [(node.lineno, f"{base}.{alias.name}" if not node.module else base) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def violations(root: Path) -> list[str]:
    """Every import that breaks the dependency rules, as `path:line: reason`."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for line, name in imports(path, root):
                top = name.split(".")[0]
                reason = None
                module = ".".join(path.relative_to(root).with_suffix("").parts)
                own = next((d for d in DIALECTS if module == d or module.startswith(d + ".")), None)
                other = next((d for d in DIALECTS if name == d or name.startswith(d + ".")), None)
                if package == "store" and top != "store":
                    reason = f"store imports {name}: it imports nothing of the project above it"
                elif other is not None and own is not None and other != own:
                    reason = f"{own} imports {name}: the dialects never import each other"
                elif other is not None and module.startswith("store.shared"):
                    reason = f"the shared store imports {name}: the base knows no dialect"
                elif package in ("producers", "worker") and top == "bot":
                    reason = f"{package} imports {name}: only bot imports bot"
                elif {package, top} == {"producers", "worker"}:
                    reason = f"{package} imports {name}: producers and worker never import each other"
                elif package in ("producers", "worker") and top == "store" and name not in public_store(root):
                    reason = f"{package} imports {name}: only the store's public interface (store/__init__.py)"
                elif (name.startswith("bot.sandbox") and not rel.startswith("bot/sandbox/")
                      and rel not in SANDBOX_USERS):
                    reason = f"{rel} imports {name}: the sandbox is for the local setup, demo/chat and tests"
                if reason:
                    found.append(f"{rel}:{line}: {reason}")
    return found


def public_store(root: Path) -> set[str]:
    tree = ast.parse((root / "store" / "__init__.py").read_text())
    names = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets))
    return {"store"} | {f"store.{ast.literal_eval(e)}" for e in names.elts}   # type: ignore[attr-defined]


def test_the_packages_keep_the_dependency_direction():
    assert violations(ROOT) == []


def test_a_planted_import_that_breaks_the_rule_is_caught(tmp_path):
    """Negative control: a copy of the tree with one forbidden import of each kind."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "store" / "__init__.py").write_text('from .api import Store\n__all__ = ["Store"]\n')
    (tmp_path / "producers" / "planted.py").write_text("from bot.app import App\nfrom worker import worker\n")
    (tmp_path / "worker" / "planted.py").write_text("from store.shop import Policy\nfrom store import Store\n")
    (tmp_path / "store" / "planted.py").write_text("import bot.config\n")
    (tmp_path / "bot" / "planted.py").write_text("from .sandbox import demo\nfrom store.shop import Policy\n")
    for sub in ("sqlite", "postgres", "shared"):
        (tmp_path / "store" / sub).mkdir()
        (tmp_path / "store" / sub / "__init__.py").write_text("")
    (tmp_path / "store" / "postgres" / "planted.py").write_text("from ..sqlite import inbox\n")
    (tmp_path / "store" / "sqlite" / "planted.py").write_text("from store.postgres.guards import claim\n")
    (tmp_path / "store" / "shared" / "planted.py").write_text("from ..sqlite.connection import Database\n")
    found = violations(tmp_path)
    assert found == [
        "bot/planted.py:1: bot/planted.py imports bot.sandbox: the sandbox is for the local setup, demo/chat "
        "and tests",
        "producers/planted.py:1: producers imports bot.app: only bot imports bot",
        "producers/planted.py:2: producers imports worker: producers and worker never import each other",
        "store/planted.py:1: store imports bot.config: it imports nothing of the project above it",
        "store/postgres/planted.py:1: store.postgres imports store.sqlite: the dialects never import each other",
        "store/shared/planted.py:1: the shared store imports store.sqlite.connection: the base knows no dialect",
        "store/sqlite/planted.py:1: store.sqlite imports store.postgres.guards: the dialects never import each other",
        "worker/planted.py:1: worker imports store.shop: only the store's public interface (store/__init__.py)",
    ]


def test_the_demo_uses_a_packaged_copy_of_the_example_shop_file():
    assert (ROOT / "bot" / "sandbox" / "shop.example.toml").read_text() == (ROOT / "shop.example.toml").read_text()


def symlinks(listing: str) -> list[str]:
    """Paths of `git ls-files --stage` output whose mode is a symbolic link's (120000)."""
    return [line.split("\t", 1)[1] for line in listing.splitlines() if line.startswith("120000 ")]


def test_no_tracked_file_is_a_symlink():
    """Formerly a `.venv` symlink into one machine's folder was committed (`.venv/` in .gitignore matches only a
    folder): a fresh clone held a dangling link and `make` could not create its virtualenv."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listing = subprocess.run(["git", "ls-files", "--stage"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert symlinks(listing.stdout) == []
    planted = listing.stdout + "120000 0123456789abcdef0123456789abcdef01234567 0\t.venv\n"
    assert symlinks(planted) == [".venv"]          # the negative control: a tracked link is named


def built_wheel(tmp_path: Path) -> Path:
    """The wheel built from a clean copy of the sources (a stale build/ folder could add removed modules)."""
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "__pycache__", "*.egg-info", ".hypothesis", ".pytest_cache", "*.sqlite3*"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "--wheel-dir", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("shopbot-*.whl"))


def demo(python_path: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_", "PYTHONPATH"))}
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    return subprocess.run([sys.executable, "-c", "import bot, sys; print(bot.__file__, file=sys.stderr); "
                           "from bot.cli import main; sys.exit(main(['demo']))"],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_the_installed_package_holds_the_four_packages_and_runs_the_demo_from_an_empty_folder(tmp_path):
    """The wheel alone (no checkout on the path, run from an empty folder) plays the same conversation."""
    wheel = built_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {name.split("/")[0] for name in names if not name.startswith("shopbot-")} == set(PACKAGES)
    for needed in ("store/sqlite/schema.sql", "store/sqlite/migrations/0001_core.sql", "bot/sandbox/shop.example.toml",
                   "worker/models/offline.py", "bot/cli/__main__.py"):
        assert needed in names, needed
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
                    str(wheel)], check=True, timeout=300)
    empty = tmp_path / "empty"
    empty.mkdir()
    installed = demo(target, empty)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert installed.stderr.splitlines()[0].startswith(str(target)), "the demo did not run from the installed copy"
    checkout = demo(None, tmp_path)
    assert checkout.returncode == 0, checkout.stderr[-3000:]

    def owner_side(out: str) -> list[str]:
        return [line for line in out.splitlines() if "Lucy  >" in line]
    assert owner_side(installed.stdout) == owner_side(checkout.stdout) and owner_side(installed.stdout)
    for expected in ("vanilla on hand: 2 tubs", "Approved #", "the local supplier holds 1 order(s)"):
        assert expected in installed.stdout, expected
