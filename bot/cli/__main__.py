"""`python -m bot.cli` runs the operator CLI (the tests and the drills start processes this way)."""
import sys

from bot.cli.commands import main

sys.exit(main())
