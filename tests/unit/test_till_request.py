"""The till's public interface: POST /till/counts body validation and the GET path segment."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producers.till_request import (
    MAX_BODY_BYTES,
    TillCounts,
    TillError,
    parse_counts_body,
    request_id_error,
    valid_request_id,
)

ITEMS = frozenset({"vanilla", "chocolate", "mint-choc", "cone_small", "crème brûlée", "a.b"})
JSON = "application/json"


def parse(body, content_type: str | None = JSON, items=ITEMS, **kw) -> TillCounts | TillError:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_counts_body(raw, content_type, items, **kw)


def error_of(body, content_type: str | None = JSON, **kw) -> TillError:
    result = parse(body, content_type, **kw)
    assert isinstance(result, TillError), result
    # every error body is JSON-safe, also when encoded as UTF-8 by the HTTP layer
    json.dumps(result.body(), ensure_ascii=False).encode("utf-8")
    return result


GOOD = {"request_id": "t1-2027.06.02_0001", "counts": {"vanilla": 12, "chocolate": 0}}


# --------------------------------------------------------------------------------------------------------------
# accepted bodies
# --------------------------------------------------------------------------------------------------------------

def test_good_body():
    result = parse({**GOOD, "note": "after close"})
    assert result == TillCounts(request_id="t1-2027.06.02_0001", counts={"vanilla": 12, "chocolate": 0},
                                note="after close")


def test_note_is_optional_and_null_means_none():
    assert parse(GOOD).note is None
    assert parse({**GOOD, "note": None}).note is None
    assert parse({**GOOD, "note": None}).canonical_payload() == parse(GOOD).canonical_payload()
    assert parse({**GOOD, "note": ""}).note == ""
    assert parse({**GOOD, "note": "n" * 500}).note == "n" * 500


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8",
    'application/json; charset="utf-8"', "application/json;charset=utf8", " application/json ",
])
def test_accepted_content_types(content_type):
    assert isinstance(parse(GOOD, content_type), TillCounts)


def test_boundaries_are_accepted():
    assert parse({"request_id": "x" * 64, "counts": {"vanilla": 1_000_000}}).counts == {"vanilla": 1_000_000}
    assert parse({"request_id": "A", "counts": {"vanilla": 0}}).request_id == "A"
    many = {f"item{i}": i for i in range(1000)}
    assert isinstance(parse({"request_id": "r", "counts": many}, items=set(many)), TillCounts)


def test_body_of_exactly_max_bytes_is_accepted():
    raw = json.dumps(GOOD).encode()
    raw = raw + b" " * (MAX_BODY_BYTES - len(raw))
    assert len(raw) == 65536
    assert isinstance(parse_counts_body(raw, JSON, ITEMS), TillCounts)


def test_known_items_may_be_any_collection():
    assert isinstance(parse(GOOD, items=["vanilla", "chocolate"]), TillCounts)
    assert isinstance(parse(GOOD, items={"vanilla": 1, "chocolate": 2}.keys()), TillCounts)


def test_unicode_item_and_note():
    result = parse({"request_id": "r1", "counts": {"crème brûlée": 3}, "note": "Grüße ☃"})
    assert result.counts == {"crème brûlée": 3}
    assert result.canonical_payload() == '{"counts":{"crème brûlée":3},"note":"Grüße ☃","request_id":"r1"}'


# --------------------------------------------------------------------------------------------------------------
# canonical payload
# --------------------------------------------------------------------------------------------------------------

def test_canonical_payload_ignores_key_order_and_whitespace():
    a = b'{"request_id":"r1","counts":{"vanilla":1,"chocolate":2},"note":"x"}'
    b = b'{ "note" : "x",\n  "counts": {"chocolate": 2, "vanilla": 1},\t"request_id": "r1" }'
    pa, pb = parse_counts_body(a, JSON, ITEMS), parse_counts_body(b, JSON, ITEMS)
    assert pa.canonical_payload() == pb.canonical_payload()
    assert pa.canonical_payload() == '{"counts":{"chocolate":2,"vanilla":1},"note":"x","request_id":"r1"}'


def test_canonical_payload_equal_for_escaped_and_literal_text():
    a = parse_counts_body('{"request_id":"r1","counts":{"vanilla":1},"note":"é"}'.encode(), JSON, ITEMS)
    b = parse_counts_body(b'{"request_id":"r1","counts":{"vanilla":1},"note":"\\u00e9"}', JSON, ITEMS)
    assert a.canonical_payload() == b.canonical_payload()


@pytest.mark.parametrize("change", [
    {"counts": {"vanilla": 12, "chocolate": 1}},
    {"counts": {"vanilla": 12}},
    {"counts": {"vanilla": 12, "chocolate": 0, "mint-choc": 0}},
    {"note": "x"},
    {"request_id": "t2"},
])
def test_canonical_payload_differs_when_content_differs(change):
    assert parse({**GOOD, **change}).canonical_payload() != parse(GOOD).canonical_payload()


# --------------------------------------------------------------------------------------------------------------
# every error code with its field
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonx", "application/json-patch+json", "text/json",
                                          "multipart/form-data; boundary=x"])
def test_unsupported_media_type(content_type):
    err = error_of(GOOD, content_type)
    assert (err.status, err.error, err.field) == (415, "unsupported_media_type", None)
    assert "application/json" in err.detail


def test_other_charset_is_unsupported():
    err = error_of(GOOD, "application/json; charset=latin-1")
    assert (err.status, err.error, err.field) == (415, "unsupported_media_type", None)
    assert "UTF-8" in err.detail


def test_too_large():
    raw = json.dumps(GOOD).encode()
    raw = raw + b" " * (MAX_BODY_BYTES + 1 - len(raw))
    assert len(raw) == 64 * 1024 + 1
    err = error_of(raw)
    assert (err.status, err.error, err.field) == (413, "too_large", None)
    assert err.detail == "the body is 65537 bytes, at most 65536 are accepted"
    assert error_of(b'{"request_id":"r"}', max_bytes=10).error == "too_large"
    assert error_of(b"[" * 100_000 + b"]" * 100_000).error == "too_large"  # judged before parsing


@pytest.mark.parametrize("raw, words", [
    (b"", "not valid JSON"),
    (b"{", "not valid JSON"),
    (b'{"request_id": "r1", "counts": {"vanilla": 1},}', "not valid JSON"),
    (b"{'request_id': 'r1'}", "not valid JSON"),
    (b'{"request_id": "r1", "counts": {"vanilla": NaN}}', "NaN is not a JSON value"),
    (b'{"request_id": "r1", "counts": {"vanilla": Infinity}}', "Infinity is not a JSON value"),
    (b"\xff\xfe{}", "not valid UTF-8 (bad byte at offset 0)"),
    (b'{"request_id": "r\xe91", "counts": {}}', "not valid UTF-8 (bad byte at offset 17)"),
    (b"\xef\xbb\xbf" + json.dumps(GOOD).encode(), "byte order mark"),
    ('{"request_id": "r1"}'.encode("utf-16"), "not valid UTF-8"),
    (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
    (b'{"counts": {"vanilla": ' + b"9" * 5000 + b"}}", "not valid JSON for this interface"),
])
def test_invalid_json(raw, words):
    err = error_of(raw)
    assert (err.status, err.error, err.field) == (400, "invalid_json", None)
    assert words in err.detail


@pytest.mark.parametrize("body, kind", [
    ([GOOD], "an array"), ("r1", "the string \"r1\""), (3, "the number 3"), (None, "null"), (True, "a boolean"),
])
def test_top_level_must_be_an_object(body, kind):
    err = error_of(body)
    assert (err.status, err.error, err.field) == (400, "invalid_json", None)
    assert err.detail == f"the body must be a JSON object, got {kind}"


def test_duplicate_keys_are_refused():
    err = error_of(b'{"request_id": "r1", "counts": {"vanilla": 5, "vanilla": 7}}')
    assert (err.status, err.error, err.field) == (400, "invalid_json", None)
    assert err.detail == 'the key "vanilla" appears twice in one object; send each key once'
    # the same key spelt with an escape is the same key
    assert error_of(b'{"request_id": "r1", "\\u0072equest_id": "r2", "counts": {"vanilla": 1}}').error == \
        "invalid_json"


def test_unknown_field():
    err = error_of({**GOOD, "till": "t1"})
    assert (err.status, err.error, err.field) == (400, "unknown_field", "$.till")
    assert err.detail == 'unknown field "till"; the accepted fields are request_id, counts and note'
    assert error_of({**GOOD, "Note": "x"}).field == "$.Note"
    assert error_of({**GOOD, "a b": 1}).field == '$["a b"]'
    assert error_of({**GOOD, "\ud800": 1}).field == '$["\\ud800"]'
    long = error_of({**GOOD, "k" * 200: 1})
    assert long.field == '$["' + "k" * 80 + '..."]'


@pytest.mark.parametrize("missing", ["request_id", "counts"])
def test_missing_field(missing):
    body = {k: v for k, v in GOOD.items() if k != missing}
    err = error_of(body)
    assert (err.status, err.error, err.field) == (400, "missing_field", f"$.{missing}")
    assert err.detail == f"the field {missing} is required"


@pytest.mark.parametrize("request_id", ["", "x" * 65, "a b", "a/b", "r1\n", "é", 12, None, ["r1"], "r1%2F",
                                        ".", "..", "...."])
def test_invalid_request_id(request_id):
    err = error_of({**GOOD, "request_id": request_id})
    assert (err.status, err.error, err.field) == (400, "invalid_request_id", "$.request_id")
    assert err.detail.startswith("request_id must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', "
                                 "not only dots, got ")


@pytest.mark.parametrize("counts, words", [
    ({}, "got an empty object"), ([], "got an array"), (None, "got null"), ("vanilla=1", "got the string"),
    (5, "got the number 5"),
])
def test_invalid_counts(counts, words):
    err = error_of({**GOOD, "counts": counts})
    assert (err.status, err.error, err.field) == (400, "invalid_counts", "$.counts")
    assert words in err.detail


def test_too_many_counts():
    many = {f"item{i}": 1 for i in range(1001)}
    err = error_of({"request_id": "r", "counts": many}, items=set(many))
    assert (err.status, err.error, err.field) == (400, "invalid_counts", "$.counts")
    assert err.detail == "counts has 1001 items, at most 1000 are accepted in one request"


def test_unknown_item():
    err = error_of({**GOOD, "counts": {"vanilla": 1, "pistachio": 2}})
    assert (err.status, err.error, err.field) == (400, "unknown_item", "$.counts.pistachio")
    assert err.detail == '"pistachio" is not an item of this shop; send counts only for known items'
    assert error_of({**GOOD, "counts": {"Vanilla": 1}}).field == "$.counts.Vanilla"  # names are exact
    assert error_of({**GOOD, "counts": {"rum raisin": 1}}).field == '$.counts["rum raisin"]'
    assert error_of({**GOOD, "counts": {"": 1}}).field == '$.counts[""]'
    assert error_of({**GOOD, "counts": {"\udc80": 1}}, items=ITEMS | {"\udc80"}).error == "unknown_item"


@pytest.mark.parametrize("value, shown", [
    (-1, "-1"), (3.0, "3.0"), (2.5, "2.5"), (True, "true"), (False, "false"), ("3", '"3"'), (None, "null"),
    ([3], "[3]"), ({"n": 3}, '{"n": 3}'), (-0.0, "-0.0"),
])
def test_invalid_count(value, shown):
    err = error_of({**GOOD, "counts": {"chocolate": 1, "vanilla": value}})
    assert (err.status, err.error, err.field) == (400, "invalid_count", "$.counts.vanilla")
    assert err.detail == f"counts.vanilla must be a whole number of 0 or more, got {shown}"


def test_count_over_the_maximum():
    err = error_of({**GOOD, "counts": {"vanilla": 1_000_001}})
    assert (err.status, err.error, err.field) == (400, "invalid_count", "$.counts.vanilla")
    assert err.detail == "counts.vanilla must be at most 1000000, got 1000001"
    huge = error_of(b'{"request_id": "r", "counts": {"vanilla": 1e400}}')
    assert huge.error == "invalid_count"
    big = error_of(b'{"request_id": "r", "counts": {"vanilla": ' + b"9" * 300 + b"}}")
    assert big.error == "invalid_count" and len(big.detail) < 200


def test_invalid_count_field_for_bracketed_item():
    err = error_of({**GOOD, "counts": {"crème brûlée": -1}})
    assert err.field == '$.counts["cr\\u00e8me br\\u00fbl\\u00e9e"]'
    assert err.detail.startswith('counts["cr\\u00e8me br\\u00fbl\\u00e9e"] must be a whole number')


@pytest.mark.parametrize("note, words", [
    ("n" * 501, "at most 500 characters, got 501"), (5, "got the number 5"), (["x"], "got an array"),
    ({"a": 1}, "got an object"), (False, "got a boolean"), ("\ud83d", "unpaired surrogate"),
])
def test_invalid_note(note, words):
    err = error_of({**GOOD, "note": note})
    assert (err.status, err.error, err.field) == (400, "invalid_note", "$.note")
    assert words in err.detail


def test_body_shape_of_an_error():
    err = error_of({**GOOD, "counts": {"vanilla": -1}})
    assert err.body() == {"error": "invalid_count",
                          "detail": "counts.vanilla must be a whole number of 0 or more, got -1",
                          "field": "$.counts.vanilla"}
    assert TillError(415, "unsupported_media_type", "d", None).body()["field"] is None


def test_first_fault_in_documented_order():
    # unknown field before missing field before request id before counts before note
    assert error_of({"x": 1, "counts": "bad", "note": 5}).error == "unknown_field"
    assert error_of({"counts": "bad", "note": 5}).error == "missing_field"
    assert error_of({"request_id": "", "counts": "bad", "note": 5}).error == "invalid_request_id"
    assert error_of({"request_id": "r", "counts": {"vanilla": -1}, "note": 5}).error == "invalid_count"
    assert error_of({"request_id": "r", "counts": {"vanilla": 1}, "note": 5}).error == "invalid_note"
    # the content type is judged before the size
    assert error_of(b"x" * (MAX_BODY_BYTES + 1), "text/plain").error == "unsupported_media_type"


# --------------------------------------------------------------------------------------------------------------
# GET /till/counts/<request_id>
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, ok", [
    ("r1", True), ("A.b_c-9", True), ("x" * 64, True), ("x" * 65, False), ("", False), ("a b", False),
    ("r1\n", False), ("..", False), (".", False), ("." * 64, False),
    (".r.", True), ("r%31", False), ("é", False), ("١٢", False), (None, False), (12, False),
])
def test_valid_request_id(text, ok):
    assert valid_request_id(text) is ok
    err = request_id_error(text)
    if ok:
        assert err is None
    else:
        assert (err.status, err.error, err.field) == (400, "invalid_request_id", None)
        assert "request id in the path" in err.detail


# --------------------------------------------------------------------------------------------------------------
# properties: nothing raises, ever
# --------------------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2_000_000, max_value=2_000_000) | st.floats()
    | st.text(max_size=20) | st.sampled_from(sorted(ITEMS) + ["\ud800", "x\udfff"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["request_id", "counts", "note", "vanilla", "chocolate", "x"]) | st.text(max_size=8),
        children, max_size=4),
    max_leaves=20,
)
content_types = st.sampled_from([JSON, "application/json; charset=utf-8", None, "text/plain"])


def _check_outcome(result: object) -> None:
    assert isinstance(result, (TillCounts, TillError))
    if isinstance(result, TillError):
        assert result.status in (400, 413, 415)
        assert result.error in {"unsupported_media_type", "too_large", "invalid_json", "unknown_field",
                                "missing_field", "invalid_request_id", "invalid_counts", "unknown_item",
                                "invalid_count", "invalid_note"}
        json.dumps(result.body(), ensure_ascii=False).encode("utf-8")
    else:
        payload = result.canonical_payload()
        assert isinstance(payload, str)
        payload.encode("utf-8")
        again = parse_counts_body(payload.encode("utf-8"), JSON, ITEMS)
        assert again == result and again.canonical_payload() == payload


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.binary(max_size=300), content_type=content_types)
def test_random_bytes_never_raise(raw, content_type):
    _check_outcome(parse_counts_body(raw, content_type, ITEMS, max_bytes=200))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, ascii=st.booleans())
def test_random_json_never_raises(value, ascii):
    # ensure_ascii=False writes a lone surrogate as raw (invalid UTF-8) bytes, ensure_ascii=True as a \ud800 escape
    raw = json.dumps(value, ensure_ascii=ascii, allow_nan=True).encode("utf-8", "surrogatepass")
    _check_outcome(parse_counts_body(raw, JSON, ITEMS))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    request_id=st.from_regex(r"\A[A-Za-z0-9._-]{1,64}\Z").filter(lambda text: set(text) != {"."}),
    counts=st.dictionaries(st.sampled_from(sorted(ITEMS)), st.integers(0, 1_000_000), min_size=1),
    note=st.none() | st.text(max_size=500),
    seed=st.integers(0, 2**32),
)
def test_valid_bodies_are_accepted_and_canonical_whatever_the_order(request_id, counts, note, seed):
    body = {"request_id": request_id, "counts": counts}
    if note is not None:
        body["note"] = note
    rng = random.Random(seed)
    shuffled_counts = list(counts.items())
    rng.shuffle(shuffled_counts)
    shuffled = list({**body, "counts": dict(shuffled_counts)}.items())
    rng.shuffle(shuffled)
    first = parse_counts_body(json.dumps(body).encode(), JSON, ITEMS)
    second = parse_counts_body(json.dumps(dict(shuffled), indent=rng.choice([None, 2])).encode(), JSON, ITEMS)
    assert isinstance(first, TillCounts), first
    assert first == second
    assert first.canonical_payload() == second.canonical_payload()
    assert json.loads(first.canonical_payload()) == body
