"""Outcomes are enum members compared by identity, and the typed readers make exactly their JSON at the edge."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.relays.sender import OutcomeKind, SendOutcome
from bot.relays.supplier_client import ActionOutcome, ActionOutcomeKind, Lookup, LookupKind
from store import ActionMove, Stats, Status
from store.records import (
    DeliveryCounts,
    DeliveryState,
    Missed,
    PartView,
    ReportView,
    StatusExtra,
    UnknownPart,
    WorkCounts,
)
from store.shared.store import _ACTION_MOVES
from tests.integration.test_public_json import documented, shape_errors
from worker.models import ModelRefused, RefusalReason

AT = datetime(2027, 3, 1, 9, 0, 0, 453883, tzinfo=UTC)


@pytest.mark.parametrize(("make", "text", "member"), [
    (SendOutcome, "retry_later", OutcomeKind.RETRY_LATER),
    (ActionOutcome, "delivered", ActionOutcomeKind.DELIVERED),
    (Lookup, "absent", LookupKind.ABSENT),
])
def test_a_kind_given_as_text_becomes_its_member_and_an_unknown_kind_fails(make, text, member):
    assert make(text).kind is member and make(member).kind is member
    with pytest.raises(ValueError):
        make("sent")                    # negative control: no such outcome can be made


def test_a_refusal_reason_is_a_member():
    assert ModelRefused("too long", reason="context_window").reason is RefusalReason.CONTEXT_WINDOW  # type: ignore[arg-type]
    assert ModelRefused("bad request").reason is None


def test_every_action_move_has_its_store_move():
    assert set(_ACTION_MOVES) == set(ActionMove)
    assert "mark_sending" not in _ACTION_MOVES          # a plain Enum: its name is no key


def status() -> Status:
    return Status(
        work=WorkCounts.of({"pending": 2, "finished": 1}), agent_work=WorkCounts(pending=2, finished=1),
        deliveries=DeliveryCounts(pending=1), open_agent_work=2, oldest_pending_seconds=0.2,
        oldest_pending_ahead_seconds=None,
        unknown=(UnknownPart("r1.1", 1, 1, 1001, "ReadTimeout", AT),), failed_work=(), failed_deliveries=(),
        counters={"stranger": 3}, actions={"delivered": 1}, quarantined_actions=(), unknown_actions=(),
        extra=StatusExtra((Missed("opening_brief", "2027-03-01", "outside grace", None, AT),)),
        littles_law=Stats(3600.0, 3, 0, 0.0008, 0.27, 0.0002))


def test_status_to_json_is_the_documented_shape_with_times_as_store_text():
    out = json.loads(json.dumps(status().to_json()))
    assert shape_errors(documented("status"), out) == []
    assert out["work"] == {"pending": 2, "running": 0, "finished": 1, "failed": 0}
    assert out["unknown"][0]["updated_at"] == "2027-03-01T09:00:00.453883Z"
    assert out["littles_law"]["W_s"] == 0.27 and out["littles_law"]["lambda_W"] == pytest.approx(0.0008 * 0.27)
    assert out["extra"]["missed"][0]["fire_time"] is None


def test_a_report_to_json_is_the_documented_shape():
    row = ReportView("r1.1", (1,), ("tg:1001:5",), False, "tg:1001", AT,
                     (PartView(1, DeliveryState.PENDING, None, None),), "vanilla: 2 tubs")
    out = json.loads(json.dumps([row.to_json()]))
    assert shape_errors(documented("reports"), out) == []
    assert out[0]["deliveries"] == [{"part": 1, "state": "pending", "receipt": None, "reason": None}]
    assert out[0]["created_at"] == "2027-03-01T09:00:00.453883Z"
