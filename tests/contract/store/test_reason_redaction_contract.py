"""The store keeps outside error text redacted whatever its caller did (store/shared/moves.py): a delivery's reason
that names a secret is stored masked, on every store. The relays redact what they pass too; this is the store's own
line, so a caller that forgets cannot put a credential in the database (docs/contracts.md, secrets)."""
from __future__ import annotations

from store import Store

from .test_outbox_contract import finished_report


async def test_a_delivery_reason_naming_a_secret_is_stored_masked(store: Store):
    report_id = await finished_report(store)
    [part] = await store.due_deliveries()
    await store.mark_sending(part.delivery_id)
    await store.mark_failed(part.delivery_id, "Unauthorized: api_key=abcd1234secret was refused")
    [view] = [r for r in await store.reports() if r.report == report_id]
    [reason] = [d.reason for d in view.deliveries]
    assert reason is not None and "abcd1234secret" not in reason and "Unauthorized" in reason, reason
