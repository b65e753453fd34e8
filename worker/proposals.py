"""How a proposal reads to the owner: rendered from its record (C11, C13), never from the model's prose."""
from __future__ import annotations


def proposal_message(proposal: dict) -> tuple[str, list | None]:
    pid, item, quantity = proposal["proposal_id"], proposal["item"], proposal["quantity"]
    line = (f"- {item}: {quantity} × {proposal['unit_cost_cents']} cents = {proposal['total_cents']} cents\n"
            f"Total: {proposal['total_cents']} cents")
    if proposal["state"] == "rejected_by_policy":
        return (f"Order proposal #{pid} to {proposal['supplier']} was rejected by the shop's rules: "
                f"{proposal['reason']}. Nothing will be ordered.\n{line}"), None
    return (f"Order proposal #{pid} to {proposal['supplier']}:\n{line}\n"
            "Approve sends it to the supplier; Reject drops it."), None
