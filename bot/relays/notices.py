"""System notices to the owner: work items of kind `notice`, finished with their report inside their admission, so
they go through the outbox like everything else the bot says (docs/contracts.md, Words)."""
from __future__ import annotations

import logging
from functools import partial

from store import Admission, Destination, Occurrence, ReportDraft, Store, Transaction, WorkKind

log = logging.getLogger("shopbot.notices")


def unknown_notice_source(report_id: str, resends: int) -> str:
    """Each unknown is announced once; after a resend that is lost again, once more."""
    return f"notice:unknown:{report_id}" + (f"~{resends}" if resends else "")


def announce_unknowns_tx(tx: Transaction) -> list[str]:
    announced = []
    for row in tx.unknown_reports():
        if row.kind is WorkKind.NOTICE:  # no notice about a notice's own delivery: /pending and status show it
            continue
        report_id, chat_id = row.report_id, row.chat_id
        preview = (row.preview.splitlines() or [""])[0][:60]
        text = (f"I may not have delivered my reply {report_id} (\"{preview}…\"): Telegram did not confirm it. "
                "Did you get it? Resend sends it once more; I have it records that it arrived.")
        result = tx.admit_answered(
            Occurrence(unknown_notice_source(report_id, row.resends), "notice:unknown", text, WorkKind.NOTICE,
                       Destination.telegram(chat_id)),
            partial(_answer, text, report_id, chat_id))
        if result.outcome is Admission.ACCEPTED:
            announced.append(report_id)
    return announced


def _answer(text: str, report_id: str, chat_id: int, tx: Transaction, work_id: int) -> ReportDraft:
    return ReportDraft(text, destination=Destination.telegram(chat_id), asks=[tx.ask("unknown", report_id, chat_id)])


async def announce_unknowns(store: Store) -> list[str]:
    announced = await store.atomic(announce_unknowns_tx)
    for report_id in announced:
        log.info("unknown announced report_id=%s", report_id)
    return announced
