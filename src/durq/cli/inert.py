"""Values from Redis, made inert for a terminal: every command prints what it read from
Redis (queue and group names, job ids, reasons, tracebacks, payloads, worker
heartbeats, schedule and library names) through ``plain``, never as Rich markup.

Anyone who can write to Redis chooses these bytes. Printed raw, an escape sequence
clears the screen, retitles the window, or hides a line behind an OSC 8 hyperlink;
rendered as markup, ``[reverse]`` or ``[link=...]`` restyles the output. ``plain``
makes a Rich ``Text`` (no markup, no emoji codes) whose control characters are shown
as escapes (``\\x1b``); line feeds and tabs stay, so that tracebacks keep their shape.
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["escape_controls", "plain"]

# C0 controls but tab and line feed, DEL, C1 controls (0x9b alone starts a CSI
# sequence on some terminals), and the Unicode marks that reorder or split what is
# shown (bidirectional overrides and isolates, line and paragraph separators)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``,
    ``\\u202e``); line feeds and tabs kept."""
    return _CONTROLS.sub(_escaped, text)


def plain(value: object) -> Text:
    """``str(value)`` as Rich text to print as it is: no markup, control characters
    escaped. For table cells, titles and lines alike."""
    return Text(escape_controls(str(value)))
