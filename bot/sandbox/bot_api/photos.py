"""Photos for the local Bot API: multipart/form-data bodies read as Telegram reads them, and a sent photo checked as
Telegram checks it (https://core.telegram.org/bots/api#sendphoto): at most 10 MB, an image it can process (here
PNG or JPEG, told by their signatures; anything else is 400 IMAGE_PROCESS_FAILED), width plus height at most
10,000 and a side ratio of at most 20, and a caption of at most 1,024 characters after entities parsing."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP

MAX_PHOTO_BYTES = 10 * 1024 * 1024
MAX_CAPTION = 1024


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart body."""
    filename: str
    content_type: str
    data: bytes


def parse_multipart(content_type: str, body: bytes) -> tuple[list[tuple[str, str]], dict[str, Upload]]:
    """(form fields as (name, text) pairs, uploaded files by field name); ValueError for a malformed body."""
    if "boundary=" not in content_type:
        raise ValueError("multipart body without a boundary")
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    if not message.is_multipart():
        raise ValueError("can't parse multipart body")
    fields: list[tuple[str, str]] = []
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            raise ValueError("a multipart part without a name")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = Upload(filename, part.get_content_type(), data)
        else:
            fields.append((name, data.decode("utf-8", "replace")))
    return fields, files


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG or JPEG, read from its header; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                return None
            marker = data[index + 1]
            length = struct.unpack(">H", data[index + 2:index + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                height, width = struct.unpack(">HH", data[index + 5:index + 9])
                return width, height
            index += 2 + length
    return None


def photo_problem(photo: object) -> str | None:
    """Telegram's answer to a photo it would refuse, or None when it takes it."""
    if not isinstance(photo, Upload):
        return "Bad Request: there is no photo in the request"
    if len(photo.data) > MAX_PHOTO_BYTES:
        return "Bad Request: PHOTO_INVALID: the photo is over 10 MB"
    size = image_size(photo.data)
    if size is None:
        return "Bad Request: IMAGE_PROCESS_FAILED"
    width, height = size
    if width < 1 or height < 1 or width + height > 10_000 or max(width, height) > 20 * min(width, height):
        return "Bad Request: PHOTO_INVALID_DIMENSIONS"
    return None
