"""`GET /till/openapi.json`: the till API described in OpenAPI 3.1 (bot/till_openapi.json, kept in the repository
and shipped in the package), so a till vendor can generate a client. tests/integration/test_till_openapi.py checks it
against what the server answers (every status code and error body) and against the error codes in the code."""
from __future__ import annotations

import json
from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def document() -> dict[str, object]:
    doc: dict[str, object] = json.loads(
        resources.files("bot").joinpath("till_openapi.json").read_text(encoding="utf-8"))
    return doc


def openapi_route() -> Route:
    body = document()

    async def openapi(request: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=3600"})
    return Route("/till/openapi.json", openapi, methods=["GET"])
