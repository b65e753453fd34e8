"""`python -m bot.sandbox.bot_api --token T --port N [--state FILE]`: run the fake Bot API as a process."""
from __future__ import annotations

import sys

from bot.sandbox.bot_api.server import main

if __name__ == "__main__":
    sys.exit(main())
