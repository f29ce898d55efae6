"""A response's ``Warning`` headers, as kube-apiserver v1.36's warning recorder writes them
(``k8s.io/apiserver/pkg/endpoints/filters/warning.go`` and ``NewWarningHeader`` of
``k8s.io/apimachinery/pkg/util/net``).

One recorder serves a whole request: the server's own warnings (unknown fields, ...) and every
admission webhook's, whatever the answer (a denial's 400 carries them too). Its rules:

- an empty text is skipped, and a text already recorded is sent once;
- a text with a control character (``unicode.IsControl``: U+0000-U+001F, U+007F-U+009F, so a
  newline or a tab) is dropped: ``NewWarningHeader`` refuses it, the request goes on;
- the header is ``299 - "<text>"`` with only ``"`` and ``\\`` escaped;
- while the texts sent add up to at most 4,096 runes they go whole; the text that would pass
  that limit switches to truncating: every text recorded so far is sent again cut to its first
  256 runes (no ellipsis), later ones too, and once 4,096 runes went out no more are added.

A Python ``str`` counts code points, which are Go's runes; a lone surrogate (JSON's ``\\ud800``)
is U+FFFD, as Go's JSON decoder makes it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

TRUNCATE_AT_TOTAL_RUNES = 4 * 1024
TRUNCATE_ITEM_RUNES = 256

_SURROGATE = re.compile("[\ud800-\udfff]")


def warning_headers(texts: Iterable[str]) -> list[str]:
    """The ``Warning`` header values for ``texts`` recorded in this order."""
    recorded: set[str] = set()
    ordered: list[str] = []
    headers: list[str] = []
    written = 0
    truncating = False
    for raw in texts:
        text = _SURROGATE.sub("\ufffd", raw)
        if not text or (truncating and written >= TRUNCATE_AT_TOTAL_RUNES) or text in recorded:
            continue
        recorded.add(text)
        ordered.append(text)
        if truncating:
            text = text[:TRUNCATE_ITEM_RUNES]
        header = _header(text)
        if header is None:
            continue
        if truncating or written + len(text) <= TRUNCATE_AT_TOTAL_RUNES:
            written += len(text)
            headers.append(header)
            continue
        truncating, written, headers = True, 0, []
        for item in ordered:
            cut = item[:TRUNCATE_ITEM_RUNES]
            header = _header(cut)
            if header is not None:
                written += len(cut)
                headers.append(header)
    return headers


def _header(text: str) -> str | None:
    """``NewWarningHeader(299, "", text)``, None where it refuses the text."""
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        return None
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
