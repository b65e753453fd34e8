"""A report's photo part (the weekly review's chart) on every store: stored with the report, first, its caption
ending with its identity, the same states as a text part; the text parts wait behind it (C7)."""
from __future__ import annotations

from store import Ask, Occurrence, ReportDraft, Store, WorkKind

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 40          # the store keeps bytes; it does not look inside
SETTING = Ask("setting", "n", "x:7:15", ("apply", "keep"), named=True)


async def finished_with_photo(store: Store) -> str:
    await store.admit(Occurrence("clock:weekly_review:2027-03-01", "clock:weekly_review", "Weekly review",
                                 WorkKind.AGENT, "tg:7"))
    claim = await store.claim("w1")
    assert claim is not None
    draft = ReportDraft("The review.\nLine two.", destination="tg:7", asks=[SETTING],
                        photo=PNG, caption="Daily sales per item")
    return (await store.finish(claim, draft)).report_id


async def test_a_photo_part_goes_first_with_its_caption_and_the_text_waits_behind_it(store: Store):
    report_id = await finished_with_photo(store)
    (first,) = await store.due_deliveries()             # part 2 waits until part 1 is confirmed
    assert (first.part, first.parts, first.photo) == (1, 2, PNG)
    assert first.text == f"Daily sales per item\n\n{report_id} (1/2)" and first.asks == ()
    await store.mark_sending(first.delivery_id)
    await store.mark_unknown(first.delivery_id, "read timeout")
    assert await store.due_deliveries() == []           # an unknown photo holds the text back (C7)
    await store.resolve(report_id, "resend", "owner:7")
    (again,) = await store.due_deliveries()
    await store.mark_sending(again.delivery_id)
    await store.mark_confirmed(again.delivery_id, "11")
    (text,) = await store.due_deliveries()
    assert (text.part, text.photo, text.asks) == (2, None, (SETTING,))
    assert text.text == f"The review.\nLine two.\n\n{report_id} (2/2)"
