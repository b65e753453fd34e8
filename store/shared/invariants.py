"""Invariant queries, run on an independent read-only connection (`shopbot check`, the drills, the tests).

Each rule is one or more queries (their rows are united in Python: SQLite would unite an integer subject with a text
one, PostgreSQL refuses) that return the violating rows, in SQL both dialects speak (`IS DISTINCT FROM`, SQLite
3.39+); a check that has never failed has not shown it can, so
tests/integration/sqlite/test_invariants.py plants each violation and sees it caught.
"""
from __future__ import annotations

from ..records import Violation
from .connection import Connection

RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "R1": ("every finished item has a report", (
            "SELECT w.work_id, 'finished work ' || w.work_id || ' has no report' FROM work w WHERE w.state = "
            "'finished' AND NOT EXISTS (SELECT 1 FROM report_items i WHERE i.work_id = w.work_id)",
    )),
    "R2": ("every report belongs to finished or failed work", (
            "SELECT r.report_id, 'report ' || r.report_id || ' answers no work' FROM reports r WHERE NOT EXISTS "
            "(SELECT 1 FROM report_items i WHERE i.report_id = r.report_id)",
            "SELECT i.report_id, 'report ' || i.report_id || ' answers work ' || w.work_id || ' which is ' || "
            "w.state FROM report_items i JOIN work w USING (work_id) WHERE w.state NOT IN ('finished', 'failed')",
    )),
    "R3": ("every failed item has an error report", (
            "SELECT w.work_id, 'failed work ' || w.work_id || ' has no error report' FROM work w WHERE w.state = "
            "'failed' AND NOT EXISTS (SELECT 1 FROM report_items i JOIN reports r USING (report_id) WHERE i.work_id "
            "= w.work_id AND r.is_error = 1)",
    )),
    "T1": ("a turn never mixes sessions", (
            "SELECT i.report_id, 'report ' || i.report_id || ' answers ' || count(DISTINCT w.session) || ' sessions' "
            "FROM report_items i JOIN work w USING (work_id) GROUP BY i.report_id HAVING count(DISTINCT w.session) > "
            "1",
    )),
    "T2": ("one running turn per session", (
            "SELECT session, 'session ' || session || ' runs ' || count(DISTINCT run_id) || ' turns at once' FROM "
            "work WHERE state = 'running' AND kind = 'agent' GROUP BY session HAVING count(DISTINCT run_id) > 1",
    )),
    "T3": ("running agent work is held by an open run", (
            "SELECT w.work_id, 'running work ' || w.work_id || ' has no open run' FROM work w LEFT JOIN runs r ON "
            "r.run_id = w.run_id WHERE w.state = 'running' AND w.kind = 'agent' AND (r.run_id IS NULL OR r.ended_at "
            "IS NOT NULL)",
    )),
    "T4": ("control and notice items finish inside their admission", (
            "SELECT work_id, w.kind || ' item ' || work_id || ' is ' || state FROM work w WHERE kind IN ('control', "
            "'notice') AND state IN ('pending', 'running')",
    )),
    "D1": ("a confirmed delivery has a receipt or a recorded 'delivered' decision", (
            "SELECT d.delivery_id, 'delivery ' || d.delivery_id || ' of ' || d.report_id || ' confirmed with no "
            "receipt' FROM deliveries d WHERE d.state = 'confirmed' AND d.receipt IS NULL AND NOT EXISTS (SELECT 1 "
            "FROM resolutions r WHERE r.delivery_id = d.delivery_id AND r.decision = 'delivered')",
    )),
    "D2": ("every resend has a recorded decision", (
            "SELECT d.delivery_id, 'delivery ' || d.delivery_id || ' resent ' || d.resends || ' times with fewer "
            "decisions' FROM deliveries d WHERE d.resends > (SELECT count(*) FROM resolutions r WHERE r.delivery_id "
            "= d.delivery_id AND r.decision = 'resend')",
    )),
    "D3": ("a report to a Telegram chat has all its parts", (
            "SELECT r.report_id, 'report ' || r.report_id || ' to ' || r.destination || ' has ' || (SELECT count(*) "
            "FROM deliveries d WHERE d.report_id = r.report_id) || ' parts queued' FROM reports r WHERE "
            "r.destination LIKE 'tg:%' AND (SELECT count(*) FROM deliveries d WHERE d.report_id = r.report_id) != "
            "coalesce((SELECT max(parts) FROM deliveries d WHERE d.report_id = r.report_id), -1)",
    )),
    "D4": ("a part is sent only after every earlier part was confirmed", (
            "SELECT d.delivery_id, 'part ' || d.part || ' of ' || d.report_id || ' was sent before part ' || e.part "
            "|| ' (' || e.state || ')' FROM deliveries d JOIN deliveries e ON e.report_id = d.report_id AND e.part < "
            "d.part WHERE d.attempts > 0 AND e.state != 'confirmed'",
    )),
    "A1": ("an approved proposal has exactly one action, and every action an approved proposal", (
            "SELECT p.proposal_id, 'approved proposal ' || p.proposal_id || ' has ' || (SELECT count(*) FROM actions "
            "a WHERE a.proposal_id = p.proposal_id) || ' actions' FROM proposals p WHERE p.state = 'approved' AND "
            "(SELECT count(*) FROM actions a WHERE a.proposal_id = p.proposal_id) != 1",
            "SELECT a.action_id, 'action ' || a.action_id || ' belongs to a proposal that is ' || coalesce(p.state, "
            "'missing') FROM actions a LEFT JOIN proposals p USING (proposal_id) WHERE p.state IS DISTINCT FROM "
            "'approved'",
    )),
    "A2": ("a delivered action has the supplier's receipt", (
            "SELECT action_id, 'delivered action ' || action_id || ' has no receipt' FROM actions WHERE state = "
            "'delivered' AND (receipt IS NULL OR receipt = '')",
    )),
    "A3": ("spending is reserved once per approved proposal, and released when its action failed or was voided", (
            "SELECT p.proposal_id, 'approved proposal ' || p.proposal_id || ' has no spending record' FROM proposals "
            "p WHERE p.state = 'approved' AND NOT EXISTS (SELECT 1 FROM spending s WHERE s.proposal_id = "
            "p.proposal_id)",
            "SELECT s.proposal_id, 'spending for proposal ' || s.proposal_id || ' is ' || s.state || ' but its "
            "action is ' || coalesce(a.state, 'missing') FROM spending s LEFT JOIN actions a USING (proposal_id) "
            "WHERE (s.state = 'reserved') = (coalesce(a.state, 'failed') IN ('failed', 'voided'))",
    )),
    "O1": ("an approved proposal has its order, and every order an approved proposal", (
            "SELECT p.proposal_id, 'approved proposal ' || p.proposal_id || ' has no order' FROM proposals p WHERE "
            "p.state = 'approved' AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.proposal_id = p.proposal_id)",
            "SELECT o.proposal_id, 'order ' || o.proposal_id || ' belongs to a proposal that is ' || "
            "coalesce(p.state, 'missing') FROM orders o LEFT JOIN proposals p USING (proposal_id) WHERE p.state IS "
            "DISTINCT FROM 'approved'",
    )),
    "O2": ("an order is on order only while its action is live (a failed or voided order is not on order)", (
            "SELECT o.proposal_id, 'order ' || o.proposal_id || ' is on order but its action is ' || "
            "coalesce(a.state, 'missing') FROM orders o LEFT JOIN actions a USING (proposal_id) WHERE o.state = "
            "'on_order' AND coalesce(a.state, 'failed') IN ('failed', 'voided')",
            "SELECT o.proposal_id, 'order ' || o.proposal_id || ' is cancelled but its action is ' || "
            "coalesce(a.state, 'missing') FROM orders o LEFT JOIN actions a USING (proposal_id) WHERE o.state = "
            "'cancelled' AND coalesce(a.state, 'failed') NOT IN ('failed', 'voided')",
    )),
    "O3": ("a received order has the stock event that received it", (
            "SELECT o.proposal_id, 'received order ' || o.proposal_id || ' has no received or restock event' FROM "
            "orders o LEFT JOIN stock_events e USING (event_id) WHERE o.state = 'received' AND "
            "coalesce(o.settled_by, '') NOT LIKE 'system:%' AND (e.event_id IS NULL OR e.item != o.item OR e.kind "
            "NOT IN ('received', 'restock'))",
    )),
    "W1": ("the kept open agent work (C1's capacity check reads it) equals the open agent work counted", (
            "SELECT 'open_agent_tally', 'kept open agent work is ' || kept.n || ' but ' || counted.n || "
            "' agent items are pending or running' "
            "FROM (SELECT coalesce(sum(n), 0) AS n FROM open_agent_tally) AS kept, "
            "(SELECT count(*) AS n FROM work WHERE kind = 'agent' AND state IN ('pending', 'running')) AS counted "
            "WHERE kept.n != counted.n",
    )),
    "P1": ("a pruned row is a whole tombstone: emptied, with its hash, and ended", (
            "SELECT work_id, 'pruned work ' || work_id || ' is ' || state || ' or lost its payload hash' FROM work "
            "WHERE pruned_at IS NOT NULL AND (payload != '' OR length(payload_sha256) IS DISTINCT FROM 64 OR state "
            "NOT IN ('finished', 'failed'))",
            "SELECT report_id, 'pruned report ' || report_id || ' kept its body or lost its hash' FROM reports WHERE "
            "pruned_at IS NOT NULL AND (body != '' OR length(body_sha256) IS DISTINCT FROM 64)",
            "SELECT delivery_id, 'pruned delivery ' || delivery_id || ' is ' || state FROM deliveries WHERE "
            "pruned_at IS NOT NULL AND (text != '' OR state NOT IN ('confirmed', 'failed', 'denied'))",
    )),
    "P2": ("a pruned report has every part ended and pruned", (
            "SELECT d.delivery_id, 'part ' || d.part || ' of pruned report ' || d.report_id || ' is ' || d.state || "
            "CASE WHEN d.pruned_at IS NULL THEN ' and kept its text' ELSE '' END FROM reports r JOIN deliveries d "
            "USING (report_id) WHERE r.pruned_at IS NOT NULL AND (d.state NOT IN ('confirmed', 'failed', 'denied') "
            "OR d.pruned_at IS NULL)",
    )),
}


def check_connection(conn: Connection) -> list[Violation]:
    violations = []
    for rule, (_, queries) in RULES.items():
        for query in queries:
            for subject, detail in conn.execute(query).fetchall():
                violations.append(Violation(rule, str(subject), detail))
    return violations
