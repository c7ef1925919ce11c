"""Inspection text as a notebook shows it: highlighted, monospace, under a resource header.

``kernel.inspect_kir/llvm/ptx/sass()`` return :class:`Shown` strings (all compiled signatures:
a :class:`ShownDict`). They are ordinary ``str``/``dict`` values; a notebook calls
``_repr_html_`` (a header of the kernel's resources and occupancy where known, then the text
highlighted by the lexers of :mod:`kaiojit.highlight`, in a monospace block) and IPython's
text view ``_repr_pretty_`` (the text itself, not the quoted ``'...\\n...'`` of ``repr``).
Without pygments the HTML is the escaped text in a ``<pre>``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from kaiojit.highlight import MONOSPACE

HEADER_STYLE = (f"{MONOSPACE}; padding: 4px 8px; background: #eef2f7; "
                "border-left: 3px solid #4a6fa5; margin-bottom: 2px;")


class Shown(str):
    """A str (kernel IR, LLVM IR, PTX, SASS) that a notebook shows highlighted as
    ``language``, under a header of ``(label, value)`` rows computed on first display."""

    language = "text"
    _header: Callable[[], list[tuple[str, str]]] | list[tuple[str, str]] | None = None

    @classmethod
    def wrap(cls, value: Any, language: str,
             header: Callable[[Any], list[tuple[str, str]]] | None = None) -> Any:
        """``value`` (a str, or a {signature: str} dict) as Shown text of ``language``;
        ``header(key)`` gives a text's header rows (key: the dict's key, else None)."""
        if isinstance(value, dict):
            return ShownDict({k: cls._one(v, language, header, k) for k, v in value.items()})
        return cls._one(value, language, header, None)

    @classmethod
    def _one(cls, value: str, language: str, header: Any, key: Any) -> Shown:
        s = cls(value)
        s.language = language
        if header is not None:
            s._header = lambda: header(key)
        return s

    @property
    def header(self) -> list[tuple[str, str]]:
        """The header rows (kernel, target, registers, spills, shared, occupancy...)."""
        if callable(self._header):
            self._header = self._header()
        return list(self._header or ())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        rows = self.header
        head = ""
        if rows:
            cells = " &nbsp;·&nbsp; ".join(
                f'<span style="white-space: nowrap"><b>{html.escape(k)}</b> '
                f"{html.escape(v)}</span>" for k, v in rows)
            head = f'<div class="kaiojit-header" style="{HEADER_STYLE}">{cells}</div>'
        try:
            from kaiojit.highlight import highlight_html

            body = highlight_html(str(self), self.language)
        except ImportError:  # no pygments: plain text
            body = f'<pre style="{MONOSPACE}">{html.escape(str(self))}</pre>'
        return f'<div class="kaiojit-shown" style="{MONOSPACE}">{head}{body}</div>'


class ShownDict(dict):
    """{signature: Shown}: each shown in turn in a notebook."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("\n\n".join(f"# {key}\n{value}" for key, value in self.items()))

    def _repr_html_(self) -> str:
        if not self:
            return "<pre>{}</pre>"
        return "".join(v._repr_html_() if isinstance(v, Shown) else
                       f"<pre>{html.escape(str(v))}</pre>" for v in self.values())


__all__ = ["Shown", "ShownDict"]
