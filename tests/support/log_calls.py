"""Every logging call of the product's code, found by reading the source (tests/integration/test_logs.py checks the
event catalogue of bot/log_events.py against it): {(logger name, message template): "file:line"}."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "producers", "store", "worker")
LEVELS = {"debug", "info", "warning", "error", "critical", "exception"}


def _logger_name(call: ast.expr, module: str) -> str | None:
    """`logging.getLogger("x")` -> "x"; `logging.getLogger(__name__)` -> the module's dotted name."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "getLogger"):
        return None
    if not call.args:
        return ""
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name) and arg.id == "__name__":
        return module
    return None


def log_calls() -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "sandbox" in rel.parts:        # the local stand-ins are not part of `shopbot run`
                continue
            module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            loggers = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = _logger_name(node.value, module)
                    if name is not None:
                        loggers[node.targets[0].id] = name
            default = next(iter(loggers.values()), None)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                func, logger = node.func, None
                if isinstance(func, ast.Attribute) and func.attr in LEVELS:
                    if isinstance(func.value, ast.Name) and func.value.id in loggers:
                        logger = loggers[func.value.id]
                    else:
                        logger = _logger_name(func.value, module)
                elif isinstance(func, ast.Name) and func.id == "log" and "log" not in loggers and default:
                    logger = default            # `log = _log.error if ... else _log.info; log("...")`
                if logger is not None:
                    found[(logger, first.value)] = f"{rel}:{node.lineno}"
    return found
