"""What the commands print: human text, or ``--json`` documents; progress lines on stderr.

With ``--json`` every result is one JSON document on one line of stdout, and a
stream of messages (``sub``, ``kv watch``...) is JSON lines. Payloads are
``"data"`` when they are UTF-8 text, else ``"data_b64"`` (base64); KV values
likewise ``"value"`` / ``"value_b64"``. Human text goes to stdout too;
progress and status lines ("Listening on ...") always go to stderr.

Bytes that are not UTF-8 (another client may send them in a subject, a key, a
header; the library hands them over as ``surrogateescape`` strings) follow one
rule everywhere: in JSON every string is valid Unicode, each such byte shown
as U+FFFD, and a subject, reply subject, key or object name that has them
also gets ``"<field>_b64"`` with its exact bytes (:func:`text_fields`); in
text output each such byte, each control character and each backslash is
escaped (``\xe9``, ``\x1b``, ``\\``: :func:`escaped`), which is what
bash's ``$'...'`` quoting reads back into the same bytes.
"""

from __future__ import annotations

import base64
import enum
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


def wire_bytes(text: str) -> bytes:
    """The bytes ``text`` stands for (bytes that are not UTF-8 come as surrogateescape)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate outside that range (JSON written so)
        return text.encode("utf-8", "surrogatepass")


def is_utf8(text: str) -> bool:
    """Whether ``text`` stands for valid UTF-8 bytes (it holds no surrogate)."""
    return text.isascii() or not any("\ud800" <= c <= "\udfff" for c in text)


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: each byte that is not UTF-8 becomes U+FFFD."""
    return text if is_utf8(text) else wire_bytes(text).decode("utf-8", "replace")


def text_fields(key: str, text: str) -> dict[str, str]:
    """``{key: text}`` in valid Unicode, plus ``{key + "_b64": base64}`` of the exact bytes
    when they are not UTF-8."""
    if is_utf8(text):
        return {key: text}
    return {key: valid_text(text), f"{key}_b64": base64.b64encode(wire_bytes(text)).decode()}


def escaped(text: str) -> str:
    """``text`` for a terminal: bytes that are not UTF-8 and control characters as
    ``\\xNN``, a backslash as ``\\\\``; anything else as it is."""
    if is_utf8(text) and not _CONTROL.search(text):
        return text
    parts: list[str] = []
    for char in text:
        if "\ud800" <= char <= "\udfff":
            parts += (f"\\x{byte:02x}" for byte in wire_bytes(char))
        elif char == "\\":
            parts.append("\\\\")
        elif _CONTROL.match(char):
            parts.append(f"\\x{ord(char):02x}")
        else:
            parts.append(char)
    return "".join(parts)


def quoted(text: str) -> str:
    """``'text'``, :func:`escaped`."""
    return f"'{escaped(text)}'"


def jsonable(value: Any) -> Any:
    """``value`` made of JSON types: configs and infos by their wire form (``to_api``);
    every string valid Unicode (:func:`valid_text`)."""
    if isinstance(value, str) and not isinstance(value, enum.Enum):
        return valid_text(value)
    if isinstance(value, int | float | bool) or value is None:
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "to_api"):
        return jsonable(value.to_api())
    if isinstance(value, Mapping):
        return {valid_text(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, Iterable):
        return [jsonable(v) for v in value]
    raise TypeError(f"cannot print {type(value).__name__} as JSON")


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def payload(key: str, data: bytes) -> dict[str, str]:
    """``{key: text}`` for UTF-8 data, else ``{key + "_b64": base64}``."""
    if _is_text(data):
        return {key: data.decode("utf-8")}
    return {f"{key}_b64": base64.b64encode(data).decode("ascii")}


def headers_dict(headers: Any) -> dict[str, list[str]] | None:
    """Every header value, as lists (``Headers`` is multi-valued); None when there are none."""
    if not headers:
        return None
    if hasattr(headers, "get_all"):
        return {k: list(headers.get_all(k)) for k in headers.keys()}
    return {k: [v] if isinstance(v, str) else list(v) for k, v in headers.items()}


def header_lines(headers: Any) -> list[str]:
    """``K: V`` lines for the human view of a message (:func:`escaped`)."""
    return [
        f"{escaped(k)}: {escaped(v)}"
        for k, values in (headers_dict(headers) or {}).items()
        for v in values
    ]


def format_bytes(n: float) -> str:
    """``1.5 MiB``-style sizes."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_enum(value: Any) -> str:
    """An enum member's wire value (any other value as ``str``); ``"default"`` for None."""
    return "default" if value is None else getattr(value, "value", str(value))


def format_time(moment: datetime | None) -> str:
    """An ISO 8601 time, or ``"?"`` when the server did not say."""
    return moment.isoformat() if moment else "?"


class Output:
    """Where a command's results go: text or JSON on stdout, status on stderr.

    Attributes:
        json: whether ``--json`` was given.
    """

    def __init__(
        self, json_mode: bool, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        """Write to ``stdout``/``stderr`` (default: the process's)."""
        self.json = json_mode
        self._out = stdout or sys.stdout
        self._err = stderr or sys.stderr

    def result(self, doc: Any, text: str | Callable[[], str]) -> None:
        """Print one result: ``doc`` as a JSON line with ``--json``, else ``text``."""
        if self.json:
            self._out.write(json.dumps(jsonable(doc), separators=(",", ":")) + "\n")
        else:
            self._out.write((text() if callable(text) else text) + "\n")
        self._out.flush()

    def raw(self, data: bytes) -> None:
        """Write bytes to stdout as they are (``--raw`` payloads)."""
        self._out.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def status(self, text: str) -> None:
        """A status line on stderr (never part of the machine-readable output)."""
        self._err.write(text + "\n")
        self._err.flush()

    def progress(
        self, label: str, total: int | None, enabled: bool | None, unit: str = "bytes"
    ) -> Progress:
        """A :class:`Progress` line on stderr (``enabled`` None: only on a terminal)."""
        shown = self._err.isatty() if enabled is None else enabled
        return Progress(label, total, self._err if shown else None, unit)


class Progress:
    """A progress line: redrawn in place on a terminal, a few lines a second elsewhere.

    ``update(n)`` adds ``n`` units (bytes or messages); ``done()`` prints the
    final line with the rate. Nothing is printed when the stream is ``None``.
    """

    def __init__(
        self, label: str, total: int | None, stream: TextIO | None, unit: str = "bytes"
    ) -> None:
        """Start the clock; ``total`` None means unknown."""
        self.label, self.total, self.unit = label, total, unit
        self.done_units = 0
        self.started = time.monotonic()
        self._stream = stream
        self._tty = stream is not None and stream.isatty()
        self._next_draw = 0.0

    def update(self, n: int) -> None:
        """Count ``n`` more units; redraw at most 10 times a second (once a second off a tty)."""
        self.done_units += n
        now = time.monotonic()
        if self._stream is not None and now >= self._next_draw:
            self._next_draw = now + (0.1 if self._tty else 1.0)
            self._draw(final=False)

    def elapsed(self) -> float:
        """Seconds since the start (at least a microsecond)."""
        return max(time.monotonic() - self.started, 1e-6)

    def done(self) -> None:
        """Print the final line (100 %, elapsed time, rate)."""
        if self._stream is not None:
            self._draw(final=True)

    def _draw(self, final: bool) -> None:
        assert self._stream is not None
        amount = self._amount(self.done_units)
        if self.total:
            pct = 100.0 * self.done_units / self.total
            width = 30
            filled = int(width * min(pct, 100.0) / 100)
            text = (
                f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {pct:5.1f}% "
                f"{amount}/{self._amount(self.total)}"
            )
        else:
            text = f"{self.label} {amount}"
        rate = self.done_units / self.elapsed()
        text += f" {self._amount(rate)}/s"
        if final:
            text += f" in {self.elapsed():.2f}s"
        end = "\n" if final or not self._tty else ""
        self._stream.write(("\r\x1b[K" if self._tty else "") + text + end)
        self._stream.flush()

    def _amount(self, n: float) -> str:
        return format_bytes(n) if self.unit == "bytes" else f"{n:,.0f} {self.unit}"


def message_doc(
    subject: str, data: bytes, headers: Any = None, reply: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A message as a JSON document: subject (and ``subject_b64``), reply (likewise), the
    ``extra`` fields, headers, data (or data_b64)."""
    doc: dict[str, Any] = text_fields("subject", subject)
    if reply:
        doc.update(text_fields("reply", reply))
    doc.update({k: v for k, v in extra.items() if v is not None})
    found = headers_dict(headers)
    if found:
        doc["headers"] = found
    doc.update(payload("data", data))
    return doc


def message_text(title: str, data: bytes, headers: Any = None) -> str:
    """A message for people: a title line, its headers, its payload (bytes that are not
    UTF-8 as ``\\xNN``), a blank line."""
    lines = [title, *header_lines(headers)]
    if headers:
        lines.append("")
    lines.append(data.decode("utf-8", errors="backslashreplace"))
    return "\n".join(lines) + "\n"
