"""Local stand-ins over real HTTP on 127.0.0.1, used by `shopbot demo|chat|local-api`, the tests and the drills.

`bot_api` is a fake Telegram Bot API server that python-telegram-bot talks to for real; `supplier` a local supplier
that drops repeated idempotency keys; `local_setup` wires the product to both; `demo` and `chat` run on it.
Nothing in the product's own run path imports this package.
"""
