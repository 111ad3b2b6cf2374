"""JSON's escapes of UTF-16 surrogates in YAML, which libyaml refuses.

JSON writes a character past U+FFFF as two escapes (``"\\ud83d\\ude00"`` is 😀),
and a YAML 1.2 document may be JSON; libyaml refuses such escapes, PyYAML's own
reader left them as two halves no database stores. They are read through
stand-ins here, and a pair is joined into its character.
"""

from __future__ import annotations

import re
from typing import Final

from labq.errors import InputError

# \u followed by a surrogate's code, its backslash not itself escaped
_SURROGATE_ESCAPE: Final = re.compile(r"(?<!\\)((?:\\\\)*\\u)([dD])([89a-fA-F][0-9a-fA-F]{2})")
_STAND_IN_ESCAPE: Final = re.compile(r"\\u([eE])([89a-fA-F][0-9a-fA-F]{2})")
_STAND_IN_ANY: Final = re.compile(r"[\ue800-\uefff]|\\u[eE][89a-fA-F]|\\U0000[eE][89a-fA-F]")
_STAND_IN: Final = re.compile("[\ue800-\uefff]")
_TO_SURROGATE: Final = {code: code - 0x1000 for code in range(0xE800, 0xF000)}


class Surrogates:
    """Escapes of UTF-16 surrogates, read through stand-ins libyaml accepts.

    ``\\uD83D`` becomes ``\\uE83D`` (a private-use character; one letter changed,
    so every line and column stays put). In a double-quoted value the character
    U+E83D then stands for U+D83D, and a pair is joined into its character; in any
    other value the text ``\\uE83D`` is put back. This is exact only when the
    document holds no such character or escape of its own, so such a document is
    refused (it would have to mix private-use characters with surrogate escapes).
    """

    def __init__(self, text: str):
        self.text = text

    @classmethod
    def of(cls, text: str, source: str) -> Surrogates | None:
        """The text with stand-ins, or None when it has no surrogate escape."""
        if "\\u" not in text or not _SURROGATE_ESCAPE.search(text):
            return None
        clash = _STAND_IN_ANY.search(text)
        if clash is not None:
            raise InputError(
                "escapes of UTF-16 surrogates (\\uD800-\\uDFFF) cannot be read in a document "
                "that also holds characters U+E800-U+EFFF: write the characters themselves",
                source=source,
                line=text.count("\n", 0, clash.start()) + 1,
            )
        stand_in = _SURROGATE_ESCAPE.sub(
            lambda m: f"{m[1]}{'e' if m[2] == 'd' else 'E'}{m[3]}", text
        )
        return cls(stand_in)

    @staticmethod
    def restore(value: str, style: str | None) -> str:
        """The value the original text meant."""
        if style == '"':
            if not _STAND_IN.search(value):
                return value
            halves = value.translate(_TO_SURROGATE)
            return halves.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        if "\\u" not in value:
            return value
        return _STAND_IN_ESCAPE.sub(lambda m: f"\\u{'d' if m[1] == 'e' else 'D'}{m[2]}", value)
