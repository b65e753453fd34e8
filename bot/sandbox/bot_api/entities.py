"""Telegram's HTML parse mode, as strict as the real server: a text is parsed into its visible text and its
entities, or refused with Telegram's own "can't parse entities" error.

Supported, as documented for the Bot API: the tags b, strong, i, em, u, ins, s, strike, del, span (class
tg-spoiler), tg-spoiler, a (href), tg-emoji (emoji-id), code, pre, blockquote (`<blockquote expandable>` gives an
`expandable_blockquote` entity, as Telegram's); the named entities
&lt; &gt; &amp; &quot; and every numeric entity. Refused: an unknown tag, an end tag that does not close the open
tag, a tag left open, an unknown named entity or a bare `&` that starts none, a `<` that starts no tag. Offsets and
lengths of entities count UTF-16 code units, as Telegram's do.
"""
from __future__ import annotations

import re
from typing import Any

_TAGS = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
         "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "span": "spoiler",
         "tg-spoiler": "spoiler", "a": "text_link", "tg-emoji": "custom_emoji", "code": "code", "pre": "pre",
         "blockquote": "blockquote"}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_START = re.compile(r"<([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>]+))?)*)\s*>")
_END = re.compile(r"</([a-zA-Z][a-zA-Z0-9-]*)\s*>")
_ENTITY = re.compile(r"&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z][a-zA-Z0-9]*));")


class HtmlRefused(ValueError):
    """The text is not valid Telegram HTML; the message is Telegram's description after "can't parse entities: "."""


def _offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8", "surrogatepass"))


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(visible text, entities) of an HTML-mode message, or HtmlRefused."""
    out: list[str] = []
    units = 0
    stack: list[tuple[str, int, str]] = []
    entities: list[dict[str, Any]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            end = _END.match(text, i)
            if end:
                name = end.group(1).lower()
                if not stack or stack[-1][0] != name:
                    expected = f'expected "</{stack[-1][0]}>"' if stack else "no tag is open"
                    raise HtmlRefused(f'Unmatched end tag at byte offset {_offset(text, i)}, {expected}, found '
                                      f'"</{name}>"')
                tag, start, kind = stack.pop()
                if units > start:
                    entities.append({"type": kind, "offset": start, "length": units - start})
                i = end.end()
                continue
            start_tag = _START.match(text, i)
            if not start_tag or start_tag.group(1).lower() not in _TAGS:
                name = start_tag.group(1) if start_tag else text[i + 1:i + 11].split(">")[0]
                raise HtmlRefused(f'Unsupported start tag "{name}" at byte offset {_offset(text, i)}')
            name = start_tag.group(1).lower()
            expandable = name == "blockquote" and "expandable" in start_tag.group(2).lower().split()
            stack.append((name, units, "expandable_blockquote" if expandable else _TAGS[name]))
            i = start_tag.end()
            continue
        if ch == "&":
            entity = _ENTITY.match(text, i)
            if entity is None or (entity.group(3) and entity.group(3) not in _NAMED):
                raise HtmlRefused(f"Unsupported HTML entity at byte offset {_offset(text, i)}"
                                  if entity else f"Character '&' is reserved and must be escaped at byte offset "
                                                 f"{_offset(text, i)}")
            if entity.group(3):
                ch = _NAMED[entity.group(3)]
            else:
                code = int(entity.group(1)) if entity.group(1) else int(entity.group(2), 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise HtmlRefused(f"Unsupported HTML entity at byte offset {_offset(text, i)}")
                ch = chr(code)
            i = entity.end()
        else:
            i += 1
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise HtmlRefused("Strings must be encoded in UTF-8")
        out.append(ch)
        units += 2 if ord(ch) > 0xFFFF else 1
    if stack:
        raise HtmlRefused(f'Can\'t find end tag corresponding to start tag "{stack[-1][0]}"')
    return "".join(out), sorted(entities, key=lambda e: (e["offset"], -e["length"]))
