"""Validation of the till's `POST /till/counts` body and of the `GET /till/counts/<request_id>` path segment.

This is a public interface for a till vendor: every refusal is a `TillError` with an HTTP status, a stable error code,
a sentence a vendor can act on, and the JSON path of the offending field (or null). Parsing never raises: any bytes
give either a `TillCounts` or a `TillError`.

Body: `{"request_id": "<1-64 of A-Za-z0-9._-, not only dots>", "counts": {"<item>": <int 0..1000000>, ...},
"note": "<optional>"}`.
Decisions: a JSON object with a repeated key is refused (`invalid_json`), because the last value silently winning
would hide a till bug; `NaN`/`Infinity` are refused (not JSON); `"note": null` is the same as no note; a
`charset` parameter other than UTF-8 is refused with 415 (JSON is UTF-8, RFC 8259); a byte order mark is refused.
"""
from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_COUNT",
    "MAX_ITEMS",
    "MAX_NOTE_CHARS",
    "TillCounts",
    "TillError",
    "parse_counts_body",
    "request_id_error",
    "valid_request_id",
]

MAX_BODY_BYTES = 65536
MAX_ITEMS = 1000
MAX_COUNT = 1_000_000
MAX_NOTE_CHARS = 500

_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SIMPLE_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")
_FIELDS = ("request_id", "counts", "note")
_REQUIRED = ("request_id", "counts")
_SHOWN_CHARS = 80  # how much of a foreign name or value an error repeats


@dataclass(frozen=True)
class TillError:
    status: int
    error: str
    detail: str
    field: str | None

    def body(self) -> dict[str, str | None]:
        return {"error": self.error, "detail": self.detail, "field": self.field}


@dataclass(frozen=True)
class TillCounts:
    request_id: str
    counts: dict[str, int]
    note: str | None

    def canonical_payload(self) -> str:
        """Canonical JSON (sorted keys, no spaces, UTF-8 text): equal for equal content, whatever the key order.

        `note` is left out when there is none, so `"note": null` and no note are the same content.
        """
        payload: dict[str, Any] = {"request_id": self.request_id, "counts": self.counts}
        if self.note is not None:
            payload["note"] = self.note
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def valid_request_id(text: str) -> bool:
    """1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', not made only of dots (for the body field and the GET
    path segment alike): `.` and `..` are URL dot-segments that clients and proxies rewrite, so
    `GET /till/counts/..` could never reach its request."""
    return isinstance(text, str) and _REQUEST_ID_RE.fullmatch(text) is not None and text.strip(".") != ""


def request_id_error(text: str) -> TillError | None:
    """The 400 for a bad `GET /till/counts/<request_id>` segment (field null: it is not in a body), or None."""
    if valid_request_id(text):
        return None
    return TillError(400, "invalid_request_id",
                     f"the request id in the path must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', "
                     f"not only dots, got {_show(text)}", None)


# --------------------------------------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _show(value: Any) -> str:
    """A short, ASCII-safe rendering of a foreign value for an error sentence."""
    try:
        text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an int too long to render
            text = "a value too long to show"
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return text


def _member(parent: str, name: str) -> str:
    """JSON path of a member: `$.counts.vanilla` for a name of A-Z, a-z, 0-9, '_' and '-', else the bracket form
    `$.counts["mint choc"]` (names with spaces, dots, quotes, non-ASCII letters, or the empty name).

    The bracket form is ASCII-only (JSON string escapes) and cut after 80 characters of name, so it is always safe
    to echo; a cut path ends in `..."]`.
    """
    if _SIMPLE_NAME_RE.fullmatch(name) and len(name) <= _SHOWN_CHARS:
        return f"{parent}.{name}"
    shown = name if len(name) <= _SHOWN_CHARS else name[:_SHOWN_CHARS] + "..."
    return f"{parent}[{json.dumps(shown, ensure_ascii=True)}]"


def _label(path: str) -> str:
    return path[2:] if path.startswith("$.") else path


def _is_text(value: str) -> bool:
    """True unless the string holds a lone surrogate (possible through a JSON \\ud800 escape), which is not text."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _content_type_error(content_type: str | None) -> TillError | None:
    wrong = TillError(415, "unsupported_media_type",
                      f"the body must be sent as Content-Type: application/json, got {_show(content_type)}", None)
    if not content_type:
        return wrong
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "application/json":
        return wrong
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return TillError(415, "unsupported_media_type",
                             f"JSON must be sent as UTF-8, got charset {_show(value.strip())}", None)
    return None


def _invalid_json(detail: str) -> TillError:
    return TillError(400, "invalid_json", detail, None)


def _decode(raw: bytes) -> Any | TillError:
    if raw.startswith(b"\xef\xbb\xbf"):
        return _invalid_json("the body starts with a byte order mark; send UTF-8 JSON without one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _invalid_json(f"the body is not valid UTF-8 (bad byte at offset {exc.start})")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _DuplicateKey as exc:
        return _invalid_json(f"the key {_show(exc.key)} appears twice in one object; send each key once")
    except json.JSONDecodeError as exc:
        return _invalid_json(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        return _invalid_json("the body is not valid JSON for this interface: it is nested too deeply")
    except ValueError as exc:  # NaN/Infinity, or an integer literal too long to convert
        return _invalid_json(f"the body is not valid JSON for this interface: {exc}")


def _count_error(path: str, value: Any) -> TillError | None:
    label = _label(path)
    if isinstance(value, bool) or not isinstance(value, int):
        return TillError(400, "invalid_count",
                         f"{label} must be a whole number of 0 or more, got {_show(value)}", path)
    if value < 0:
        return TillError(400, "invalid_count",
                         f"{label} must be a whole number of 0 or more, got {_show(value)}", path)
    if value > MAX_COUNT:
        return TillError(400, "invalid_count", f"{label} must be at most {MAX_COUNT}, got {_show(value)}", path)
    return None


def parse_counts_body(raw: bytes, content_type: str | None, known_items: Collection[str], *,
                      max_bytes: int = MAX_BODY_BYTES) -> TillCounts | TillError:
    """Validate a `POST /till/counts` body. Never raises for any input bytes; the first fault found is returned.

    Order: content type (415), size (413), UTF-8 and JSON syntax (invalid_json), unknown top-level fields,
    missing fields, request_id, counts (shape, then each item in document order: known item, then its count), note.
    """
    wrong_type = _content_type_error(content_type)
    if wrong_type is not None:
        return wrong_type
    raw = bytes(raw)
    if len(raw) > max_bytes:
        return TillError(413, "too_large", f"the body is {len(raw)} bytes, at most {max_bytes} are accepted", None)

    body = _decode(raw)
    if isinstance(body, TillError):
        return body
    if not isinstance(body, dict):
        return _invalid_json(f"the body must be a JSON object, got {_json_type(body)}")

    for name in body:
        if name not in _FIELDS:
            return TillError(400, "unknown_field",
                             f"unknown field {_show(name)}; the accepted fields are request_id, counts and note",
                             _member("$", name))
    for name in _REQUIRED:
        if name not in body:
            return TillError(400, "missing_field", f"the field {name} is required", f"$.{name}")

    request_id = body["request_id"]
    if not valid_request_id(request_id):
        return TillError(400, "invalid_request_id",
                         f"request_id must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-', "
                         f"not only dots, got {_show(request_id)}", "$.request_id")

    counts = body["counts"]
    if not isinstance(counts, dict) or not counts:
        return TillError(400, "invalid_counts",
                         f"counts must be a non-empty object of item names to whole numbers, got "
                         f"{'an empty object' if counts == {} else _json_type(counts)}", "$.counts")
    if len(counts) > MAX_ITEMS:
        return TillError(400, "invalid_counts",
                         f"counts has {len(counts)} items, at most {MAX_ITEMS} are accepted in one request",
                         "$.counts")
    for item, value in counts.items():
        path = _member("$.counts", item)
        if not _is_text(item) or item not in known_items:
            return TillError(400, "unknown_item",
                             f"{_show(item)} is not an item of this shop; send counts only for known items", path)
        fault = _count_error(path, value)
        if fault is not None:
            return fault

    note = body.get("note")
    if note is not None:
        if not isinstance(note, str):
            return TillError(400, "invalid_note", f"note must be a string or null, got {_json_type(note)}", "$.note")
        if len(note) > MAX_NOTE_CHARS:
            return TillError(400, "invalid_note",
                             f"note must be at most {MAX_NOTE_CHARS} characters, got {len(note)}", "$.note")
        if not _is_text(note):
            return TillError(400, "invalid_note", "note holds an unpaired surrogate escape, which is not text",
                             "$.note")

    return TillCounts(request_id=request_id, counts=dict(counts), note=note)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {_show(value)}"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__  # pragma: no cover - json.loads gives only the types above
