"""The ways out: outbox -> outside world, each with honest outcomes.

`telegram` is the report relay (C7) with its `sender` (python-telegram-bot, errors mapped to outcomes) and the
`notices` it writes about replies that may not have arrived (C8); `supplier` is the action relay (C11) with its
HTTP client in `supplier_client`.
"""
