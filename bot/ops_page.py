"""`/ops`: a read-only operator page rendered by the server itself (no build step, no script, no external asset).

Only when `SHOPBOT_OPS_TOKEN` is set (at least 24 characters, a secret: redacted from every log line). The token never
travels in a URL: `GET /ops` without a valid session answers 401 with a login form, the form POSTs the token to
`/ops/login`, which compares it in constant time and sets a random session cookie (HttpOnly, SameSite=Strict,
Path=/ops, Secure when the request came over HTTPS; 12 hours; the sessions live in this process, so a restart logs
everyone out). Every response carries `Content-Security-Policy: default-src 'self'; frame-ancestors 'none'`, `X-Frame-
Options: DENY`, `Cache-Control: no-store`, `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. A
wrong token is counted and logged at most once a second (producers/refusals.py); each address that sent one must then
wait before its next try is even compared (0.5 s, doubling per failure up to 60 s: 429 with Retry-After), so guessing
runs at a few tries a minute, not hundreds a second. A form that is not one small `token` field answers 400 (with the
same headers). Every value taken from the records (report bodies, sources, reasons, item names) is HTML-escaped.

The page shows the status figures, the unknown deliveries and failed items, the open and quarantined actions, the
stock, the last reports, and an inline SVG chart of λ, W and L per hour over the last day.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections.abc import Sequence
from html import escape
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from producers.refusals import Refusals
from store import DeliveryCounts, SeriesPoint, ShopItem, StateTallies, Store, WorkCounts, to_text

log = logging.getLogger("shopbot.http")

COOKIE = "shopbot_ops"
FIRST_WAIT_S = 0.5        # after an address's first wrong token; doubled per further failure
MAX_WAIT_S = 60.0
MAX_ADDRESSES = 10_000    # failing addresses remembered (the oldest forgotten first)
SESSION_S = 12 * 3600
MIN_TOKEN = 24
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; background: #fff; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } .bad { color: #a00; font-weight: 600; } .none { color: #777; }
pre { white-space: pre-wrap; margin: 0; max-width: 60em; } svg { background: #fff; border: 1px solid #ddd; }
.l { stroke: #1f77b4; } .w { stroke: #d62728; } .lam { stroke: #2ca02c; } polyline { fill: none; stroke-width: 2; }
"""


def _page(title: str, body: str, status: int = 200, extra: dict[str, str] | None = None) -> Response:
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<link rel="stylesheet" href="/ops/style.css"></head><body>{body}</body></html>')
    return Response(html, status_code=status, media_type="text/html; charset=utf-8",
                    headers={**HEADERS, **(extra or {})})


def _login_form(message: str = "") -> str:
    note = f'<p class="bad">{escape(message)}</p>' if message else ""
    return ('<h1>shopbot operator page</h1>' + note +
            '<form method="post" action="/ops/login"><label>Operator token '
            '<input type="password" name="token" autocomplete="current-password" required></label> '
            '<button type="submit">Log in</button></form>')


def _table(headers: list[str], rows: list[list[object]], empty: str) -> str:
    if not rows:
        return f'<p class="none">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def chart(series: Sequence[SeriesPoint]) -> str:
    """λ, W and L per hour as three polylines, each scaled to its own maximum (written beside its name)."""
    width, height, pad = 720, 180, 24
    lines, legend = [], []
    for key, css, name in (("lam", "lam", "λ (arrivals/s)"), ("w", "w", "W (s)"), ("l", "l", "L")):
        values = [float(getattr(point, key)) for point in series] or [0.0]
        top = max(values) or 1.0
        step = (width - 2 * pad) / max(1, len(values) - 1)
        points = " ".join(f"{pad + i * step:.1f},{height - pad - (v / top) * (height - 2 * pad):.1f}"
                          for i, v in enumerate(values))
        lines.append(f'<polyline class="{css}" points="{points}"/>')
        legend.append(f"{name} max {max(values):.4g}")
    labels = "".join(
        f'<text x="{pad + i * (width - 2 * pad) / 2:.0f}" y="{height - 6}" font-size="11">{escape(label)}</text>'
        for i, label in enumerate(("24 h ago", "12 h ago", "now")))
    text = "".join(f'<text x="{pad + 8}" y="{16 + 14 * i}" font-size="11" class="{css}" fill="currentColor">'
                   f"{escape(item)}</text>" for i, (item, css) in enumerate(zip(legend, ("lam", "w", "l"))))
    return (f'<svg role="img" aria-label="λ, W and L per hour over the last day" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">{"".join(lines)}{text}{labels}</svg>')


class OpsPage:
    def __init__(self, store: Store, token: str) -> None:
        if len(token) < MIN_TOKEN:
            raise ValueError(f"the operator token must be at least {MIN_TOKEN} characters")
        self.store = store
        self._token = token.encode("utf-8")
        self._sessions: dict[str, float] = {}
        self._tallies: StateTallies = {}      # the store's counts of ended rows, advanced at each view (as /metrics)
        self._tallying = asyncio.Lock()       # one view at a time advances them (two at once counted rows twice)
        self._failed: dict[str, tuple[int, float]] = {}   # address -> (wrong tokens in a row, not before)
        self._refusals = Refusals()

    def routes(self) -> list[Route]:
        return [Route("/ops", self.page, methods=["GET"]), Route("/ops/login", self.login, methods=["POST"]),
                Route("/ops/logout", self.logout, methods=["POST"]),
                Route("/ops/style.css", self.style, methods=["GET"])]

    def _valid(self, request: Request) -> bool:
        session = request.cookies.get(COOKIE, "")
        expires = self._sessions.get(session)
        if expires is None:
            return False
        if expires < time.monotonic():
            self._sessions.pop(session, None)
            return False
        return True

    async def style(self, request: Request) -> Response:
        return Response(STYLE, media_type="text/css", headers=HEADERS)

    async def login(self, request: Request) -> Response:
        body = b""
        async for chunk in request.stream():       # a login form is tiny: read at most 4 KiB, never more
            body += chunk
            if len(body) > 4096:
                return _page("shopbot: log in", _login_form("That request is too large."), 413)
        address = request.client.host if request.client else "?"
        now = time.monotonic()
        failures, not_before = self._failed.get(address, (0, 0.0))
        if now < not_before:                       # this address guessed wrong: it waits before the next try
            wait = max(1, round(not_before - now + 0.5))
            return _page("shopbot: log in", _login_form("Too many wrong tokens: wait a moment and try again."), 429,
                         {"Retry-After": str(wait)})
        try:
            form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=5, strict_parsing=True)
        except ValueError:                          # more fields than a login form has, or no form at all
            return _page("shopbot: log in", _login_form("That is not a login form."), 400)
        given = (form.get("token") or [""])[0].encode("utf-8")
        if not hmac.compare_digest(given, self._token):
            if (more := self._refusals.refused()) is not None:
                log.warning("operator page: login refused from %s%s", address, more)
            self.store.tally("ops_login_refused")  # in memory: a flood of guesses costs no commit
            if len(self._failed) >= MAX_ADDRESSES and address not in self._failed:
                self._failed.pop(next(iter(self._failed)))
            self._failed[address] = (failures + 1, now + min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** failures))
            return _page("shopbot: log in", _login_form("That token is not the operator token."), 401)
        self._failed.pop(address, None)
        self._sessions = {s: t for s, t in self._sessions.items() if t > now}
        session = secrets.token_urlsafe(32)
        self._sessions[session] = now + SESSION_S
        response = RedirectResponse("/ops", status_code=303, headers=HEADERS)
        secure = request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"
        response.set_cookie(COOKIE, session, max_age=SESSION_S, path="/ops", httponly=True, samesite="strict",
                            secure=secure)
        return response

    async def logout(self, request: Request) -> Response:
        self._sessions.pop(request.cookies.get(COOKIE, ""), None)
        response = RedirectResponse("/ops", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path="/ops")
        return response

    async def page(self, request: Request) -> Response:
        if not self._valid(request):
            return _page("shopbot: log in", _login_form(), 401)
        async with self._tallying:
            status = await self.store.ops_view(self._tallies)
        reports = await self.store.reports(10)
        items = await self.store.shop_items()
        series = await self.store.day_series(24)
        law = series[-1] if series else SeriesPoint(self.store.clock.now(), 0.0, 0.0, 0.0)
        oldest = status.oldest_pending_seconds
        parts = [
            "<h1>shopbot operator page</h1>",
            '<form method="post" action="/ops/logout"><button type="submit">Log out</button></form>',
            "<h2>Status</h2>",
            _counts_table("work", [("all", status.work), ("agent", status.agent_work)]),
            "<p></p>",
            _counts_table("deliveries", [("parts", status.deliveries)]),
            f"<p>Open agent work {status.open_agent_work}; oldest pending "
            f"{escape(f'{oldest:.0f} s' if oldest is not None else 'none')}; last hour λ {law.lam:.4f}/s, "
            f"W {law.w:.2f} s, L {law.l:.3f}; counted in the last hour "
            f"{escape(', '.join(f'{k} {n}' for k, n in status.counters_last_hour.items()) or 'nothing')}</p>",
            "<h2>λ, W and L over the day</h2>", chart(series),
            "<h2>Unknown deliveries (waiting for a decision)</h2>",
            _table(["report", "part", "chat", "reason", "since", "decide with"],
                   [[u.report_id, f"{u.part}/{u.parts}", u.chat_id, u.reason, to_text(u.updated_at),
                     f"shopbot resolve {u.report_id} --resend | --delivered"] for u in status.unknown],
                   "none"),
            "<h2>Failed work</h2>",
            _table(["work", "source", "report"], [[f.work_id, f.source, f.report_id] for f in status.failed_work],
                   "none"),
            "<h2>Failed deliveries</h2>",
            _table(["report", "part", "chat", "reason"], [[f.report_id, f.part, f.chat_id, f.reason]
                                                          for f in status.failed_deliveries], "none"),
            "<h2>Open actions and quarantine</h2>",
            _table(["action", "proposal", "state", "item", "quantity", "total (cents)", "reason"],
                   [[a.action_id, a.proposal_id, a.state, a.item, a.quantity, a.total_cents, a.reason]
                    for a in status.open_actions], "none"),
            "<h2>Stock</h2>",
            _table(["item", "on hand", "unit", "reorder point", "target", "applied (shop file's values)"],
                   [[i.item, i.on_hand, i.unit, i.reorder_point, i.target, _applied(i)] for i in items],
                   "none"),
            "<h2>Last reports</h2>",
            _table(["report", "work", "to", "delivery", "body"],
                   [[r.report, ", ".join(map(str, r.work)), r.destination,
                     ", ".join(f"{d.part}:{d.state.value}" for d in r.deliveries), r.body] for r in reports],
                   "none"),
        ]
        return _page("shopbot operator page", "".join(parts))


def _counts_table(title: str, rows: Sequence[tuple[str, WorkCounts | DeliveryCounts]]) -> str:
    """Counts by state, one row per label, every state a column."""
    states = [state for state, _ in rows[0][1].items()]
    return _table([title, *states], [[label, *(n for _, n in counts.items())] for label, counts in rows], "")


def _applied(item: ShopItem) -> str:
    """An applied reorder point and target (the owner's Apply) with the shop file's values beside them."""
    if item.applied_at is None:
        return "no (the shop file's)"
    return (f"by {item.applied_by} at {to_text(item.applied_at)} (shop file: {item.file_reorder_point} and "
            f"{item.file_target})")
