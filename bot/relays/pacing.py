"""Pacing of the relay's sends within Telegram's flood limits: a token bucket per chat and one over all chats.

Telegram asks a bot for about one message a second per chat and allows short bursts, at most 20 messages a minute
in a group, and about 30 messages a second over all chats; above that it answers 429 with `retry_after`. So:

- every chat has a bucket of `chat_burst` tokens (default 3) refilled one token per `chat_interval_s` (default 1 s):
  a 3-part reply, or a reply right after another one, goes out at once; a long run of messages to one chat goes
  at the chat's rate once the burst is spent. A group chat (negative id) never gets more than 20 in any minute:
  its burst is at most 10 and it refills one token per 60 / (20 - burst) s (3.5 s with the default burst of 3).
- one global bucket of `global_burst` tokens (default 30) refilled at `global_per_s` (default 30) a second paces
  the sends over all chats, as python-telegram-bot's own rate limiter does.
- a 429 holds the chat and the global bucket until its `retry_after` has passed (Telegram does not say which limit
  was hit, so, like python-telegram-bot, everything waits), and the relay gives the part a not-before time.

Every decision is a pure function of the monotonic time passed in: nothing here sleeps, so the relay decides when
to wait and tests drive the buckets with a manual clock. A bucket that has refilled completely is forgotten, so
the map of chats stays as small as the set of chats written to within the last few seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

GROUP_PER_MINUTE = 20      # Telegram: at most 20 messages a minute to one group
GROUP_MAX_BURST = 10
_EPSILON = 1e-9             # float slack: a wait this small is no wait


class TokenBucket:
    """Holds at most `burst` tokens, refilled one per `interval` seconds; a send takes one token.

    Kept as the time at which the bucket is full again (`full_at`, the "theoretical arrival time" of the generic
    cell rate algorithm): a token is available at `now` when `full_at - now <= (burst - 1) * interval`.
    """

    __slots__ = ("burst", "full_at", "interval")

    def __init__(self, interval: float, burst: int, now: float = float("-inf")) -> None:
        if interval < 0 or burst < 1:
            raise ValueError(f"a token bucket needs interval >= 0 and burst >= 1, got {interval}, {burst}")
        self.interval = interval
        self.burst = burst
        self.full_at = now           # full at `now`; the default: full whatever the clock reads

    def wait(self, now: float) -> float:
        """Seconds from `now` until a token is available; 0.0 when one is available now."""
        wait = self.full_at - (self.burst - 1) * self.interval - now
        return wait if wait > _EPSILON else 0.0

    def take(self, now: float) -> None:
        """Take one token at `now` (the caller checked `wait(now) == 0`)."""
        self.full_at = max(self.full_at, now) + self.interval

    def available(self, now: float) -> int:
        """Tokens that may be taken at `now`, one after another (0 when `wait(now)` is not 0)."""
        if self.interval == 0:
            return self.burst
        ahead = (max(self.full_at, now) - now) / self.interval     # tokens already spent and not yet refilled
        return max(0, min(self.burst, int(self.burst - ahead + _EPSILON)))

    def hold(self, until: float) -> None:
        """No token before `until`, then one token, refilling from there (a 429's retry_after)."""
        self.full_at = max(self.full_at, until + (self.burst - 1) * self.interval)

    def full(self, now: float) -> bool:
        return self.full_at <= now + _EPSILON


@dataclass(frozen=True)
class PacingSettings:
    chat_interval_s: float = 1.0    # one token per chat per this long; 0: no per-chat pacing (groups neither)
    chat_burst: int = 3             # tokens a chat's bucket holds
    global_per_s: float = 30.0      # tokens per second over all chats; 0: no global pacing
    global_burst: int = 30          # tokens the global bucket holds

    def __post_init__(self) -> None:
        if self.chat_interval_s < 0 or self.global_per_s < 0:
            raise ValueError("pacing intervals and rates cannot be negative")
        if self.chat_burst < 1 or self.global_burst < 1:
            raise ValueError("a burst is at least 1 message")


class Pacer:
    """The relay's pacing decisions: may chat X be sent to now, and when should the relay look again."""

    def __init__(self, settings: PacingSettings) -> None:
        self.settings = settings
        self._chats: dict[int, TokenBucket] = {}     # only chats whose bucket is not full
        self._global = TokenBucket(1.0 / settings.global_per_s, settings.global_burst) \
            if settings.global_per_s else None

    def shape(self, chat_id: int) -> tuple[float, int]:
        """(refill interval, burst) of a chat's bucket. A bucket lets at most burst + w / interval messages through
        in any w seconds, so a group's (negative id) is cut to 20 in any 60 s."""
        interval, burst = self.settings.chat_interval_s, self.settings.chat_burst
        if interval and chat_id < 0:
            burst = min(burst, GROUP_MAX_BURST)
            interval = max(interval, 60.0 / (GROUP_PER_MINUTE - burst))
        return interval, burst

    def _bucket(self, chat_id: int) -> TokenBucket:
        bucket = self._chats.get(chat_id)
        if bucket is None:
            bucket = self._chats[chat_id] = TokenBucket(*self.shape(chat_id))
        return bucket

    def global_wait(self, now: float) -> float:
        """Seconds until the global bucket has a token (0.0: now)."""
        return self._global.wait(now) if self._global else 0.0

    def global_room(self, now: float) -> int | None:
        """Sends the global bucket lets go at `now` (None: no global pacing)."""
        return self._global.available(now) if self._global else None

    def chat_wait(self, chat_id: int, now: float) -> float:
        """Seconds until `chat_id`'s bucket has a token (0.0: now)."""
        bucket = self._chats.get(chat_id)
        return bucket.wait(now) if bucket else 0.0

    def wait(self, chat_id: int, now: float) -> float:
        """Seconds until a message to `chat_id` may go (0.0: now)."""
        return max(self.chat_wait(chat_id, now), self.global_wait(now))

    def take(self, chat_id: int, now: float) -> None:
        """Record a send to `chat_id` at `now`: one token from its bucket and one from the global bucket."""
        if self.settings.chat_interval_s or chat_id in self._chats:
            self._bucket(chat_id).take(now)
        if self._global is not None:
            self._global.take(now)

    def flood(self, chat_id: int, retry_after: float, now: float) -> None:
        """Telegram answered 429: nothing goes to the chat, nor (like python-telegram-bot) anywhere, for
        `retry_after` seconds."""
        until = now + max(0.0, retry_after)
        self._bucket(chat_id).hold(until)
        if self._global is not None:
            self._global.hold(until)

    def blocked_chats(self, now: float) -> list[int]:
        """Chats with no token now (to leave out of the next query); full buckets are forgotten."""
        for chat in [chat for chat, bucket in self._chats.items() if bucket.full(now)]:
            del self._chats[chat]
        return [chat for chat, bucket in self._chats.items() if bucket.wait(now) > 0]

    def next_ready(self, now: float) -> float | None:
        """Seconds until the soonest blocked chat or the empty global bucket has a token again; None when nothing
        is blocked."""
        waits = [w for w in (bucket.wait(now) for bucket in self._chats.values()) if w > 0]
        if self.global_wait(now) > 0:
            waits.append(self.global_wait(now))
        return min(waits) if waits else None
