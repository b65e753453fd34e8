"""The operator's commands (`shopbot ...`): `commands` parses and runs them, `render` prints their results."""
from bot.cli.commands import main

__all__ = ["main"]
