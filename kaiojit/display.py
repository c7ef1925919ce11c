"""Inspection text that a notebook shows highlighted (pygments when installed, else plain)."""

from __future__ import annotations


class Shown(str):
    """A str (kir, LLVM IR, PTX, ...) with the language a notebook highlights it as."""

    language = "text"

    @classmethod
    def wrap(cls, value, language: str):
        """``value`` (a str, or a dict of them) as Shown text of ``language``."""
        if isinstance(value, dict):
            return {k: cls.wrap(v, language) for k, v in value.items()}
        s = cls(value)
        s.language = language
        return s

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import get_lexer_by_name
            return highlight(str(self), get_lexer_by_name(self.language),
                             HtmlFormatter(noclasses=True))
        except Exception:  # noqa: BLE001 - no pygments: plain text
            import html
            return f"<pre>{html.escape(str(self))}</pre>"


__all__ = ["Shown"]
