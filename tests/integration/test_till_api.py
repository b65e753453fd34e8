"""The till HTTP API through a real HTTP client against the product's server (uvicorn on 127.0.0.1): C1, C2, C3."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from bot.http import Health, HttpServer, health_route
from producers.till import TillApi, parse_till_tokens
from producers.till_request import MAX_BODY_BYTES
from store import ItemSpec, Occurrence
from worker.models.offline import OfflineModel
from worker.worker import Worker

TOKENS = {"1": "till-one-secret-token-0001", "2": "till-two-secret-token-0002"}
ITEMS = (ItemSpec("vanilla", "tubs", 10, 8, 12, 300, 20), ItemSpec("chocolate", "tubs", 12, 6, 12, 250, 20))


def auth(till: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[till]}"}


@pytest.fixture
async def till(store):
    """The till routes (and /healthz) on a real uvicorn server on a free port; yields an httpx client for it."""
    await store.seed_shop(ITEMS, "test")
    server = HttpServer(TillApi(store, TOKENS, retry_after_s=7).routes() + [health_route(store, Health())],
                        "127.0.0.1", 0)
    task = asyncio.create_task(server.serve())
    await asyncio.wait_for(server.started.wait(), 10)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
        yield client
    server.stop()
    await asyncio.wait_for(task, 10)


def work_rows(raw) -> list[tuple]:
    return [tuple(r) for r in raw.execute(
        "SELECT source, session, kind, payload, destination, state FROM work ORDER BY work_id")]


def error_shape(response: httpx.Response, status: int, error: str, field: str | None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) >= {"error", "detail", "field"} and isinstance(body["detail"], str) and body["detail"]
    assert (body["error"], body["field"]) == (error, field), body
    return body


async def test_a_post_is_admitted_then_answered_and_a_repeat_is_a_duplicate(till, store, raw):
    sent = {"request_id": "r-1", "counts": {"vanilla": 3, "chocolate": 11}, "note": "evening count"}
    first = await till.post("/till/counts", json=sent, headers=auth("1"))
    assert first.status_code == 202 and first.json() == {"outcome": "accepted", "work": "1"}
    assert work_rows(raw) == [("till:1:r-1", "till:1", "agent",
                               '{"counts":{"chocolate":11,"vanilla":3},"note":"evening count","request_id":"r-1"}',
                               "till:1", "pending")]
    # the same content with other key order and spacing is the same post: a duplicate, nothing new stored
    again = await till.post("/till/counts", content=json.dumps(dict(reversed(sent.items())), indent=2),
                            headers={**auth("1"), "Content-Type": "application/json; charset=utf-8"})
    assert again.status_code == 202 and again.json() == {"outcome": "duplicate", "work": "1"}
    assert len(work_rows(raw)) == 1
    # the token decides the till: the same request id from till 2 is till 2's own request
    other = await till.post("/till/counts", json=sent, headers=auth("2"))
    assert other.status_code == 202 and other.json() == {"outcome": "accepted", "work": "2"}
    assert [r[0] for r in work_rows(raw)] == ["till:1:r-1", "till:2:r-1"]


async def test_null_note_and_no_note_are_the_same_content(till):
    a = await till.post("/till/counts", json={"request_id": "n", "counts": {"vanilla": 1}}, headers=auth("1"))
    b = await till.post("/till/counts", json={"request_id": "n", "counts": {"vanilla": 1}, "note": None},
                        headers=auth("1"))
    assert (a.json()["outcome"], b.json()["outcome"]) == ("accepted", "duplicate")


async def test_a_conflicting_reuse_of_a_request_id_is_409(till, raw):
    await till.post("/till/counts", json={"request_id": "r-1", "counts": {"vanilla": 3}}, headers=auth("1"))
    conflict = await till.post("/till/counts", json={"request_id": "r-1", "counts": {"vanilla": 4}}, headers=auth("1"))
    body = error_shape(conflict, 409, "conflict", "$.request_id")
    assert body["work"] == "1"
    assert [r[3] for r in work_rows(raw)] == ['{"counts":{"vanilla":3},"request_id":"r-1"}']


async def test_a_full_queue_answers_503_with_retry_after(till, store, raw):
    await store.admit_many([Occurrence(f"tg:7:{i}", "tg:7", f"m{i}", destination="tg:7")
                            for i in range(store.capacity)])
    busy = await till.post("/till/counts", json={"request_id": "r-9", "counts": {"vanilla": 3}}, headers=auth("1"))
    error_shape(busy, 503, "busy", None)
    assert busy.headers["Retry-After"] == "7"
    assert not [r for r in work_rows(raw) if r[0].startswith("till:")]
    # once there is room, the same post is taken
    await store.forget("tg:7", "test")
    retry = await till.post("/till/counts", json={"request_id": "r-9", "counts": {"vanilla": 3}}, headers=auth("1"))
    assert retry.status_code == 202 and retry.json()["outcome"] == "accepted"


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer not-a-till-token-at-all"},
    {"Authorization": f"Basic {TOKENS['1']}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {TOKENS['1']}x"},
])
async def test_a_wrong_or_missing_token_is_401_and_changes_nothing(till, store, raw, headers):
    before = raw.execute("SELECT count(*) FROM work").fetchone()[0]
    commits = store.db.commits
    post = await till.post("/till/counts", json={"request_id": "r-1", "counts": {"vanilla": 3}}, headers=headers)
    error_shape(post, 401, "unauthorized", None)
    assert post.headers["WWW-Authenticate"] == "Bearer"
    got = await till.get("/till/counts/r-1", headers=headers)
    error_shape(got, 401, "unauthorized", None)
    assert raw.execute("SELECT count(*) FROM work").fetchone()[0] == before == 0
    assert store.db.commits == commits                     # nothing durable: counted in memory (C1)
    assert (await store.status()).counters["till_unauthorized"] == 2
    await store.flush_counts()
    assert raw.execute("SELECT sum(count) FROM counters WHERE kind = 'till_unauthorized'").fetchone()[0] == 2


@pytest.mark.parametrize("body,error,field", [
    (b"{not json", "invalid_json", None),
    (b'{"request_id": "r", "counts": {"pistachio": 3}}', "unknown_item", "$.counts.pistachio"),
    (b'{"request_id": "r", "counts": {"vanilla": -1}}', "invalid_count", "$.counts.vanilla"),
    (b'{"request_id": "r", "counts": {"vanilla": 2.5}}', "invalid_count", "$.counts.vanilla"),
    (b'{"request_id": "r", "counts": {"vanilla": "3"}}', "invalid_count", "$.counts.vanilla"),
    (b'{"request_id": "r", "counts": {"vanilla": 3}, "till": "2"}', "unknown_field", "$.till"),
    (b'{"request_id": "a b", "counts": {"vanilla": 3}}', "invalid_request_id", "$.request_id"),
    (b'{"counts": {"vanilla": 3}}', "missing_field", "$.request_id"),
])
async def test_a_malformed_body_is_400_naming_the_field(till, raw, body, error, field):
    response = await till.post("/till/counts", content=body,
                               headers={**auth("1"), "Content-Type": "application/json"})
    error_shape(response, 400, error, field)
    assert work_rows(raw) == []


async def test_a_body_over_64_kib_is_413(till, raw):
    big = b'{"request_id": "r", "counts": {"vanilla": 3}, "note": "' + b"x" * MAX_BODY_BYTES + b'"}'
    sized = await till.post("/till/counts", content=big, headers={**auth("1"), "Content-Type": "application/json"})
    error_shape(sized, 413, "too_large", None)

    async def chunks():   # no Content-Length: the server stops reading past the limit
        for start in range(0, len(big), 8192):
            yield big[start:start + 8192]
    streamed = await till.post("/till/counts", content=chunks(),
                               headers={**auth("1"), "Content-Type": "application/json"})
    error_shape(streamed, 413, "too_large", None)
    assert work_rows(raw) == []


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "application/json; charset=latin-1"])
async def test_a_non_json_content_type_is_415(till, raw, content_type):
    headers = {**auth("1"), **({"Content-Type": content_type} if content_type else {})}
    response = await till.post("/till/counts", content=b'{"request_id": "r", "counts": {"vanilla": 3}}',
                               headers=headers)
    error_shape(response, 415, "unsupported_media_type", None)
    assert work_rows(raw) == []


async def test_get_returns_the_state_then_the_report_and_counts_reach_the_stock(till, store, raw):
    post = await till.post("/till/counts", json={"request_id": "r-7", "counts": {"vanilla": 3}}, headers=auth("1"))
    assert post.status_code == 202
    pending = await till.get("/till/counts/r-7", headers=auth("1"))
    assert pending.status_code == 200
    assert pending.json() == {"request_id": "r-7", "work": "1", "state": "pending", "report": None}
    assert (await store.shop_item("vanilla")).on_hand == 10     # not applied before the worker's turn
    await Worker(store, OfflineModel()).drain()
    assert (await store.shop_item("vanilla")).on_hand == 3      # applied without a model, with a count event
    assert [tuple(r) for r in raw.execute(
        "SELECT item, old_on_hand, new_on_hand, source FROM stock_events WHERE kind = 'count'")] == [
        ("vanilla", 10, 3, "till:1:r-7")]
    done = (await till.get("/till/counts/r-7", headers=auth("1"))).json()
    assert done["state"] == "finished" and done["work"] == "1"
    assert done["report"]["id"] == "r1.1" and done["report"]["is_error"] is False
    assert "vanilla: 3 (was 10)" in done["report"]["body"]
    # the till's report goes back to the till only: no Telegram delivery
    assert raw.execute("SELECT count(*) FROM deliveries").fetchone()[0] == 0


async def test_a_till_cannot_read_another_tills_results(till):
    await till.post("/till/counts", json={"request_id": "mine", "counts": {"vanilla": 3}}, headers=auth("1"))
    theirs = await till.get("/till/counts/mine", headers=auth("2"))
    unknown = await till.get("/till/counts/never-sent", headers=auth("2"))
    error_shape(theirs, 404, "not_found", None)
    error_shape(unknown, 404, "not_found", None)
    assert theirs.json()["detail"].replace("mine", "?") == unknown.json()["detail"].replace("never-sent", "?")
    assert (await till.get("/till/counts/mine", headers=auth("1"))).status_code == 200


async def test_a_bad_request_id_in_the_path_is_400(till):
    error_shape(await till.get("/till/counts/" + "x" * 65, headers=auth("1")), 400, "invalid_request_id", None)
    error_shape(await till.get("/till/counts/a%20b", headers=auth("1")), 400, "invalid_request_id", None)


@pytest.mark.parametrize("request_id", [".", "..", "..."])
async def test_formerly_bug_a_request_id_made_only_of_dots_is_refused_in_the_body(till, raw, request_id):
    response = await till.post("/till/counts", json={"request_id": request_id, "counts": {"vanilla": 3}},
                               headers=auth("1"))
    error_shape(response, 400, "invalid_request_id", "$.request_id")
    assert "not only dots" in response.json()["detail"]
    assert work_rows(raw) == []


async def test_healthz_beside_the_till(till):
    body = (await till.get("/healthz")).json()
    assert body["ok"] is True and body["database"] == "writable"


def test_till_tokens_are_pairs_and_each_till_has_its_own():
    assert parse_till_tokens("1:till-one-secret-token-0001, front:till-two-secret-token-0002") == {
        "1": "till-one-secret-token-0001", "front": "till-two-secret-token-0002"}
    assert parse_till_tokens("") == {}
    for text, message in (("1", "pair 1"), ("1:short", "at least 16"), ("a b:till-one-secret-token-0001", "pair 1"),
                          ("1:till-one-secret-token-0001,1:till-two-secret-token-0002", "listed twice"),
                          ("1:till-one-secret-token-0001,2:till-one-secret-token-0001", "another till")):
        with pytest.raises(ValueError, match=message) as caught:
            parse_till_tokens(text)
        assert "till-one-secret" not in str(caught.value) and "SHOPBOT_TILL_TOKENS" in str(caught.value)


async def test_a_failed_commit_is_500_and_the_retry_is_taken(till, store, raw):
    sent = {"request_id": "r-5", "counts": {"vanilla": 3}}
    await store.db.raw(lambda conn: conn.execute("PRAGMA query_only = ON"))     # every write now fails
    failed = await till.post("/till/counts", json=sent, headers=auth("1"))
    error_shape(failed, 500, "not_stored", None)
    assert work_rows(raw) == []
    await store.db.raw(lambda conn: conn.execute("PRAGMA query_only = OFF"))
    retry = await till.post("/till/counts", json=sent, headers=auth("1"))
    assert retry.status_code == 202 and retry.json() == {"outcome": "accepted", "work": "1"}
