"""Decimal text <-> ``int`` of any size, whatever ``sys.set_int_max_str_digits`` says.

CPython refuses ``int(text)`` and ``str(n)`` past 4,300 digits by default (and the limit
can be set as low as 640). Counter totals (ADR-49) have no size limit on the server, so
the client converts them in pieces no longer than any limit allows, splitting by powers
of ten.
"""

from __future__ import annotations

import re

__all__ = ["format_int", "parse_int"]

_PIECE = 600  # digits converted at once: under the lowest limit CPython accepts (640)
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _digits_to_int(digits: str) -> int:
    if len(digits) <= _PIECE:
        return int(digits)
    low = len(digits) // 2
    scale: int = 10**low
    return _digits_to_int(digits[:-low]) * scale + _digits_to_int(digits[-low:])


def parse_int(text: str) -> int:
    """The ``int`` a decimal text (an optional sign, then ASCII digits) stands for.

    Raises:
        ValueError: ``text`` is not such a text.
    """
    if not isinstance(text, str) or _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"not a decimal integer: {text!r:.60}")
    value = _digits_to_int(text.lstrip("+-"))
    return -value if text.startswith("-") else value


def _int_to_digits(n: int) -> str:
    if n.bit_length() < _PIECE * 3:  # under 10**600: str() is always allowed
        return str(n)
    low = int(n.bit_length() * 0.30103) // 2  # about half its digits
    scale: int = 10**low
    high, rest = divmod(n, scale)
    return _int_to_digits(high) + _int_to_digits(rest).rjust(low, "0")


def format_int(n: int) -> str:
    """The decimal text of ``n`` (``-`` for a negative one), of any size."""
    return "-" + _int_to_digits(-n) if n < 0 else _int_to_digits(n)
