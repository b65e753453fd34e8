"""Mutation check: break each contract's enforcing code in turn, run the tests that should notice, print which
mutations survived (a survivor is a rule the suite cannot see broken). Not part of the suite.

Each mutation is (contract, file, original snippet, mutated snippet, test selection). The original must occur exactly
once in the file (a stale entry fails loudly instead of silently testing nothing). Every mutation runs in a fresh
copy of the repository's tracked files (`git ls-files`), with PYTHONPATH pointing at the copy so the tests' own
subprocesses (`python -m bot.cli ...`) run the mutated code too; the working tree is never touched.

    python -m bench.mutations [--only C7,C11] [--jobs 1]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    contract: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    what: str


M = Mutation
MUTATIONS: list[Mutation] = [
    # C1 admission
    M("C1", "store/shared/inbox.py", "if open_count[0] >= capacity:", "if open_count[0] > capacity:",
      ("tests/integration/sqlite/test_inbox.py",), "capacity refuses one item too late"),
    M("C1", "store/sqlite/migrations/0019_open_agent_tally.sql",
      "    UPDATE open_agent_tally SET n = n - 1 WHERE slot = 1 + NEW.work_id % 16;",
      "    UPDATE open_agent_tally SET n = n WHERE slot = 1 + NEW.work_id % 16;",
      ("tests/contract/store/test_inbox_contract.py::"
       "test_capacity_is_exact_under_concurrent_admissions_and_the_kept_count_follows_every_move",),
      "a finished item never gives its place back (the kept open-work count)"),
    M("C1", "store/shared/inbox.py", "        same = existing[\"session\"] == occurrence.session and "
      "retention.payload_matches(existing, occurrence.payload)", "        same = True", ("tests/integration/sqlite/test_inbox.py",), "a conflict is taken for a duplicate"),
    M("C1", "producers/till.py", '        self.store.tally("till_unauthorized")',
      '        await self.store.count("till_unauthorized")', ("tests/integration/test_refusal_counts.py",),
      "a refused till request is a commit again"),
    M("C1", "store/shared/tallies.py",
      "                self._in_flight[(minute, kind)] = self._in_flight.get((minute, kind), 0) + n",
      "                pass", ("tests/integration/test_refusal_counts.py",), "flushed counts are never marked written"),
    # C2 acknowledge only after commit
    M("C2", "producers/till.py", "            return self._not_stored(till_id, exc)\n        log.info(",
      "            return JSONResponse({'outcome': 'accepted', 'work': '?'}, status_code=202)\n        log.info(",
      ("tests/integration/test_till_api.py",), "the till gets 202 for a commit that failed"),
    M("C2", "producers/telegram/webhook.py", '            return JSONResponse({"ok": False, "error": "not stored"}, '
      'status_code=500)', '            return JSONResponse({"ok": True})', ("tests/integration/test_telegram_edge.py::"
      "test_webhook_secret_and_commit_failure",), "the webhook answers 200 for a commit that failed"),
    # C3 authentication
    M("C3", "producers/telegram/routing.py", "        elif user.id not in self.owner_ids():",
      "        elif False:", ("tests/integration/test_telegram_edge.py::test_strangers_groups_bots_and_malformed_updates_create_no"
                             "_work",), "strangers are let in"),
    M("C3", "producers/till.py", "            if hmac.compare_digest(candidate, token):",
      "            if True:", ("tests/integration/test_till_api.py",), "any till token is accepted"),
    # C4 work state machine (the trigger; the code path is also guarded)
    # (finished and failed are terminal under two triggers, work_terminal_fixed and work_state_machine: breaking
    # one alone is not visible by design, the other refuses the same move; the mutation below breaks the one rule
    # only work_state_machine holds)
    M("C4", "store/sqlite/migrations/0001_core.sql", "       (OLD.state = 'pending' AND NEW.state IN ('running', 'failed'))",
      "       (OLD.state = 'pending' AND NEW.state IN ('running', 'failed', 'finished'))", ("tests/integration/sqlite/test_inbox.py",),
      "pending work may become finished without running"),
    # C5 claim
    M("C5", "store/shared/inbox.py", 'DUE = ("(w.admitted_at <= $1 OR w.admitted_at > $2)',
      'DUE = ("(w.admitted_at <= $2 OR w.admitted_at > $2)', ("tests/integration/sqlite/test_inbox.py", "tests/integration/test_clock_steps.py"),
      "the debounce window is ignored"),
    M("C5", "store/shared/inbox.py", "    if held != len(ids):", "    if held < 0:", ("tests/integration/sqlite/test_inbox.py",),
      "a worker ends work it does not hold"),
    M("C5", "store/shared/inbox.py", 'DUE = ("(w.admitted_at <= $1 OR w.admitted_at > $2)',
      'DUE = ("(w.admitted_at <= $1)', ("tests/integration/test_clock_steps.py",),
      "a backward clock step holds admitted work (issue 21)"),
    # C6 finish and report together
    M("C6", "store/shared/outbox.py", "[(report_id, work_id) for work_id in sorted(set(work_ids))]",
      "[(report_id, work_id) for work_id in sorted(set(work_ids))[:1]]",
      ("tests/integration/sqlite/test_inbox.py", "tests/integration/sqlite/test_invariants.py", "tests/integration/test_worker.py"),
      "a report is linked to the first item of its turn only"),
    # C7 delivery
    M("C7", "store/shared/outbox.py", "PART_LIMIT = 4000 ", "PART_LIMIT = 5000 ",
      ("tests/integration/test_rules_caught.py::test_every_part_that_reaches_telegram_holds_at_most_4000_characters",
       "tests/integration/sqlite/test_outbox.py"), "parts over 4,000 characters"),
    M("C7", "store/shared/outbox.py", "    rows = conn.execute(\"UPDATE deliveries SET state = 'unknown', updated_at = $1, \"",
      "    rows = conn.execute(\"UPDATE deliveries SET state = 'pending', updated_at = $1, \"",
      ("tests/integration/sqlite/test_recovery_and_stats.py",), "a delivery found sending at start is resent"),
    # C8 resolving unknowns
    M("C8", "store/sqlite/migrations/0001_core.sql", "WHEN OLD.state = 'unknown' AND NEW.state = 'pending' AND (",
      "WHEN OLD.state = 'unknown' AND NEW.state = 'pending' AND 0 AND (", ("tests/integration/sqlite/test_outbox.py",),
      "an unknown delivery is resent without a recorded decision"),
    # C9 attempts
    M("C9", "store/shared/inbox.py", "    if not refund and claim.attempt >= attempt_cap:",
      "    if not refund and claim.attempt > attempt_cap:", ("tests/integration/test_worker.py", "tests/integration/sqlite/test_inbox.py"),
      "one attempt more than the cap"),
    # C10 recovery and the instance lock
    M("C10", "store/sqlite/lock.py", "            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", "            pass",
      ("tests/integration/sqlite/test_schema.py",), "two processes own one database"),
    M("C10", "store/shared/recovery.py", "    if acted is not None:", "    if False:",
      ("tests/integration/sqlite/test_recovery_and_stats.py",), "a turn that acted outside is rerun after a crash"),
    # C11 external effects
    M("C11", "store/shared/actions.py", "(proposal_id, secrets.token_hex(16), supplier_destination,",
      "(proposal_id, f'{proposal_id:032x}', supplier_destination,",
      ("tests/integration/test_rules_caught.py::test_the_idempotency_key_is_random_and_not_reused_when_row_ids_repeat_after_a_"
       "restore",), "the idempotency key is derived from a row id"),
    M("C11", "store/shared/shop.py", "    if spec.open_proposal is not None:", "    if False:",
      ("tests/integration/test_rules_caught.py::test_the_store_refuses_a_second_open_proposal_for_an_item",),
      "the store's check of one open proposal per item"),
    M("C11", "store/sqlite/migrations/0004_actions.sql",
      "CREATE UNIQUE INDEX proposals_one_open_per_item ON proposals (item) WHERE state IN ('proposed', "
      "'awaiting_approval');", "CREATE INDEX proposals_one_open_per_item ON proposals (item) WHERE state IN "
      "('proposed', 'awaiting_approval');", ("tests/integration/test_rules_caught.py::test_the_database_refuses_a_second_open_"
                                            "proposal_from_another_connection",),
      "the database's unique index of one open proposal per item"),
    # C12 forget
    M("C12", "store/shared/inbox.py", '    deleted = conn.execute("DELETE FROM history WHERE session = $1", (session,))'
      '.rowcount', '    deleted = conn.execute("DELETE FROM history WHERE session = $1 AND 0", (session,)).rowcount',
      ("tests/integration/sqlite/test_inbox.py", "tests/integration/test_cli.py::test_forget_cancels_waiting_work",
       "tests/integration/test_rules_caught.py::test_forget_deletes_the_history_the_conversation_had"), "history is kept"),
    # C13 numbers from records
    M("C13", "worker/figures.py", '        if not found:\n            counts["blanked"] += 1',
      '        if False:\n            counts["blanked"] += 1', ("tests/integration/test_worker.py", "tests/unit/test_figures.py"), "a narrated number is kept"),
    # C14 Little's law
    M("C14", "store/shared/stats.py", "            time_in_system += (ended - admitted).total_seconds()",
      "            time_in_system += (ended - max(admitted, t0)).total_seconds() * 1.2",
      ("tests/integration/test_rules_caught.py::test_littles_law_holds_on_a_real_run_of_the_queue",
       "tests/integration/sqlite/test_recovery_and_stats.py"), "W is measured wrong"),
    M("C14", "store/shared/stats.py", "        area += max(0.0, (ended - max(admitted, t0)).total_seconds())",
      "        area += max(0.0, (ended - max(admitted, t0)).total_seconds()) * 1.2",
      ("tests/integration/test_rules_caught.py::test_littles_law_holds_on_a_real_run_of_the_queue",),
      "L is measured wrong (the independent sample sees it)"),
    # the edges of issue 21
    M("config", "bot/config.py", '        parts = [part.strip() for part in raw.split(",")]',
      '        parts = [part.strip() for part in raw.replace(" ", "").split(",")]',
      ("tests/edge/test_config_edges.py",), '"1001 1002" becomes one owner id'),
    M("config", "bot/config.py", "    if chat and (len(chat) != 1 or chat[0] not in owner_ids):",
      "    if chat and len(chat) != 1:", ("tests/edge/test_config_edges.py",), "an owner chat outside the owners"),
    M("secrets", "store/shared/outbox.py", "    body = redaction.error_detail(draft.body) if draft.is_error else "
      "redaction.secrets_only(draft.body)", "    body = draft.body", ("tests/integration/test_secrets.py",),
      "reports are stored unredacted"),
    M("secrets", "store/shared/moves.py", '        columns["reason"] = redaction.error_detail(reason)',
      "        pass", ("tests/contract/store/test_reason_redaction_contract.py", "tests/integration/test_secrets.py"),
      "reasons are stored unredacted"),
    M("database", "store/sqlite/connection.py", "            await _close_quietly(conn)\n            if isinstance",
      "            if isinstance", ("tests/integration/sqlite/test_damaged_databases.py::test_formerly_bug_a_bad_database_file_makes_every"
                                   "_command_fail_with_one_line",), "a failed open leaves the driver thread running"),
    # C21 nothing from outside stops a part (issue 25)
    M("C21", "bot/relays/supplier_client.py", "    if _DIGITS.fullmatch(value):", "    if value.isdigit():",
      ("tests/integration/test_hostile_supplier.py::test_retry_after_accepts_only_ascii_digits_or_an_http_date",
       "tests/integration/test_hostile_supplier.py::test_retry_after_in_non_ascii_digits_fails_the_order_with_a_reason"), "Retry-After read by isdigit()"),
    M("C21", "bot/relays/supplier_client.py", "        return min(float(int(value)), RETRY_AFTER_CAP_S)",
      "        return float(int(value))", ("tests/integration/test_hostile_supplier.py::test_a_30_digit_retry_after_is_capped_and_the_order_waits",),
      "Retry-After not capped"),
    M("C21", "bot/relays/supplier_client.py", "                    if size > self.body_cap:",
      "                    if False:", ("tests/integration/test_hostile_supplier.py::test_a_400_mb_body_is_cut_at_the_cap_and_the_order_held_for_the_operator",),
      "the body read whole"),
    M("C21", "bot/relays/supplier_client.py", "        async with asyncio.timeout(self.deadline):",
      "        async with asyncio.timeout(None):",
      ("tests/integration/test_hostile_supplier.py::test_a_dripping_answer_trips_the_total_deadline_and_is_reconciled_by_key",), "no total deadline"),
    M("C21", "bot/relays/supplier_client.py",
      "    if not isinstance(value, str) or not ORDER_ID.fullmatch(value):", "    if not isinstance(value, str):",
      ("tests/integration/test_hostile_supplier.py::test_an_order_id_is_1_to_64_safe_characters", "tests/integration/test_hostile_supplier.py::test_a_long_order_id_is_never_stored_logged_or_sent"),
      "the order id stored unchecked"),
    M("C21", "bot/relays/supplier.py", "            self._inflight.cancel()                # a supplier call in flight ends now (K21)",
      "            pass", ("tests/acceptance/test_stop_deadline.py",), "stop() waits on a dripping supplier"),
    M("C21", "bot/relays/supplier.py", "        except Exception as exc:\n            self._failures",
      "        except ZeroDivisionError as exc:\n            self._failures",
      ("tests/integration/test_action_supervision.py",), "one action's exception ends the relay"),
    M("C21", "bot/supervision.py", "        except Exception as exc:\n            crashes += 1",
      "        except ZeroDivisionError as exc:\n            crashes += 1",
      ("tests/integration/test_action_supervision.py",), "a crashed part ends the process"),
    M("C21", "bot/config.py", "    if url and len(c.errors) == before and (why",
      "    if False and (why", ("tests/edge/test_config_edges.py",), "an http supplier URL accepted"),
    M("C21", "store/redaction.py", '(re.compile(r"://[^/\\s@:]+:[^/\\s@]*@"), "://" + MASK + "@")',
      '(re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\\s@:]+:[^/\\s@]*@"), "://" + MASK + "@")',
      ("tests/unit/test_redaction.py",), "the quadratic userinfo pattern"),
    M("C21", "store/redaction.py", '    return _CONTROL.sub(" ", text)', "    return text",
      ("tests/unit/test_redaction.py",), "control characters kept"),
    M("C21", "bot/relays/sender.py", "NO_PREVIEW = LinkPreviewOptions(is_disabled=True)", "NO_PREVIEW = None",
      ("tests/integration/test_hostile_supplier.py::test_a_refusal_with_forged_lines_and_a_link_reaches_the_owner_stripped_and_without_preview",),
      "link previews on"),
    M("C21", "bot/http.py",
      "        if self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency:",
      "        if False:", ("tests/integration/test_http_edges.py",), "no 503 past the connection cap"),
    M("C21", "bot/http.py", "        if self.cycle is None and not self.transport.is_closing():", "        if False:",
      ("tests/integration/test_http_edges.py",), "no header deadline"),
    M("C21", "bot/http.py", "middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]",
      "middleware=[]", ("tests/integration/test_http_edges.py",), "any Host answered"),
    M("C21", "bot/metrics.py", "        if token and not hmac.compare_digest(", "        if False and not hmac.compare_digest(",
      ("tests/integration/test_http_edges.py",), "/metrics open with a token set"),
    M("C21", "bot/ops_page.py", "        if now < not_before:", "        if False:",
      ("tests/integration/test_ops_page.py::test_wrong_logins_slow_down_per_address_and_a_malformed_form_is_400",),
      "wrong /ops tokens not slowed"),
    M("C21", "bot/ops_page.py", '            return _page("shopbot: log in", _login_form("That is not a login form."), 400)',
      "            raise", ("tests/integration/test_ops_page.py::test_wrong_logins_slow_down_per_address_and_a_malformed_form_is_400",),
      "a malformed login form is 500"),
    M("C21", "bot/logs.py", "        if record.created - self._last < self.every_s:", "        if False:",
      ("tests/unit/test_throttled_logs.py",), "every accept-flood line written"),
    M("C21", "producers/refusals.py", "        if now - self._logged_at < self.every_s:", "        if False:",
      ("tests/unit/test_throttled_logs.py",), "every refusal logged"),
    M("C21", "bot/cli/commands.py", "    os.umask(0o077)", "    pass", ("tests/acceptance/test_file_modes.py",),
      "files take the process umask"),
    M("restore", "store/sqlite/backup.py", '        if problems != ["ok"]:', "        if False:",
      ("tests/integration/sqlite/test_restore.py",), "a backup failing integrity_check is restored"),
    M("restore", "store/sqlite/backup.py", "                old.rename(Path(str(replaced) + suffix))",
      "                old.unlink()", ("tests/integration/sqlite/test_restore.py",), "the replaced database is deleted"),
    M("till-ids", "producers/till_request.py", ' and text.strip(".") != ""', "",
      ("tests/unit/test_till_request.py", "tests/integration/test_till_api.py"), "a request id of dots is valid"),
    M("DST", "producers/schedule.py", "    gaps = [t for t in _gap_fires(schedule, after, until) if t not in result]",
      "    gaps = []", ("tests/unit/test_schedule.py",), "a time in the spring gap does not fire"),
]


def tracked_copy(target: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            dest = target / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)


def run_one(mutation: Mutation, timeout: float) -> tuple[str, float, str]:
    with tempfile.TemporaryDirectory(prefix="shopbot-mutant-") as tmp:
        copy = Path(tmp)
        tracked_copy(copy)
        path = copy / mutation.file
        text = path.read_text()
        found = text.count(mutation.original)
        if found != 1:
            return "stale", 0.0, f"the original snippet occurs {found} times in {mutation.file}"
        path.write_text(text.replace(mutation.original, mutation.mutated))
        env = {**os.environ, "PYTHONPATH": str(copy)}
        start = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                   *mutation.tests], cwd=copy, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return "caught (timeout)", time.monotonic() - start, ""
        elapsed = time.monotonic() - start
        last = [line for line in done.stdout.splitlines() if line.strip()][-1:] or [""]
        failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")][:1]
        return ("survived" if done.returncode == 0 else "caught"), elapsed, (failed or last)[0][:150]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated contracts (C7,C11,config,...)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.contract in args.only.split(",")]
    survivors = 0
    for m in chosen:
        outcome, elapsed, detail = run_one(m, args.timeout)
        survivors += outcome in ("survived", "stale")
        print(f"{outcome:16} {m.contract:8} {m.file}: {m.what} ({elapsed:.0f} s) {detail}", flush=True)
    contracts = sorted({m.contract for m in chosen})
    print(f"{len(chosen)} mutations over {len(contracts)} rules ({', '.join(contracts)}): "
          f"{len(chosen) - survivors} caught, {survivors} survived or stale")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
