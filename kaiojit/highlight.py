"""Pygments lexers for what kaiojit shows: kernel IR, LLVM IR, PTX and SASS.

pygments' own LLVM and PTX lexers lag behind LLVM 20's output and PTX 8 (``captures(none)``,
``nneg``, ``memory(argmem: read)`` and ``@%p1 bra`` are error tokens there), and pygments has no
SASS or kernel-IR lexer (its "sass" is the CSS preprocessor). The lexers here extend the two
and add the other two; every one ends with a catch-all rule, so no input gives an error token
(a notebook would box it in red). Built on first use: pygments is optional.
"""

from __future__ import annotations

import functools
from typing import Any

LANGUAGES = ("kir", "llvm", "ptx", "sass", "text")


@functools.cache
def lexer_for(language: str) -> Any:
    """A pygments lexer instance for one of :data:`LANGUAGES` (ImportError without pygments)."""
    from pygments.lexer import RegexLexer, inherit, words
    from pygments.lexers import get_lexer_by_name
    from pygments.token import (
        Comment,
        Keyword,
        Name,
        Number,
        Operator,
        Punctuation,
        String,
        Text,
        Whitespace,
    )

    if language == "llvm":
        base = type(get_lexer_by_name("llvm"))

        class KaiojitLlvmLexer(base):  # type: ignore[misc, valid-type]
            """LLVM IR: pygments' lexer, plus LLVM 20's newer attributes and a catch-all."""

            name = "LLVM (kaiojit)"
            tokens = {"root": [inherit, (r"[A-Za-z_][\w.]*", Keyword), (r"[^\s]", Text)]}

        return KaiojitLlvmLexer()
    if language == "ptx":
        base = type(get_lexer_by_name("ptx"))

        class KaiojitPtxLexer(base):  # type: ignore[misc, valid-type]
            """PTX: pygments' lexer, plus predicate guards (``@%p1``, ``@!%p2``) and a
            catch-all."""

            name = "PTX (kaiojit)"
            tokens = {"root": [(r"@!?(?=%)", Operator), inherit, (r"[^\s]", Text)]}

        return KaiojitPtxLexer()

    class SassLexer(RegexLexer):
        """SASS as nvdisasm and cuobjdump print it."""

        name = "SASS"
        tokens = {"root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r"/\*.*?\*/", Comment.Multiline),
            (r"#.*?$", Comment.Single),
            (r"[.$\w]+:", Name.Label),
            (r"\.[A-Za-z_][\w.]*", Keyword.Pseudo),  # directives and sections
            (r"@!?U?P(?:\d|T)\b", Operator),  # predicate guards
            (r"\b(?:U?R\d+|U?RZ|U?P\d|U?PT|SR_\w+|SRZ)\b", Name.Variable),  # registers
            (r"\b(?:c|cx|desc)(?=\[)", Name.Builtin),  # constant banks, descriptors
            (r"\b[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\b", Keyword),  # opcodes and modifiers
            (r"-?0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+|[-+]?INF|-?QNAN", Number.Float),
            (r"-?\d+", Number.Integer),
            (r'"[^"]*"', String),
            (r"[A-Za-z_$][\w$.@]*", Name),
            (r"[\[\](){},;|!~+\-*&]", Punctuation),
            (r"[^\s]", Text),
        ]}

    class KirLexer(RegexLexer):
        """kaiojit's kernel IR as ``kernel.inspect_kir()`` prints it."""

        name = "KIR"
        tokens = {"root": [
            (r"\s+", Whitespace),
            (r"#.*?$", Comment.Single),
            (words(("kernel", "func", "device", "local", "shared", "if", "else", "elif",
                    "while", "for", "in", "range", "return", "break", "continue", "pass",
                    "and", "or", "not", "is", "assert"), suffix=r"\b"), Keyword),
            (words(("True", "False", "None", "void"), suffix=r"\b"), Keyword.Constant),
            (r"\b(?:u?int(?:8|16|32|64)|float(?:16|32|64)|bfloat16|bool_?|complex(?:64|128))\b",
             Keyword.Type),
            (r"[A-Za-z_][\w]*(?=\()", Name.Function),
            (r"[A-Za-z_][\w]*", Name),
            (r"\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|inf|nan", Number.Float),
            (r"0x[0-9a-fA-F]+|\d+", Number.Integer),
            (r"'[^'\n]*'|\"[^\"\n]*\"", String),
            (r"->|[-+*/%<>=!&|^~@]=?|//|\*\*|<<|>>", Operator),
            (r"[\[\](){}:,.;]", Punctuation),
            (r"[^\s]", Text),
        ]}

    if language == "sass":
        return SassLexer()
    if language == "kir":
        return KirLexer()
    return get_lexer_by_name("text")


def error_tokens(text: str, language: str) -> list[str]:
    """The error tokens a lexer gives for ``text`` (none, for kaiojit's lexers)."""
    from pygments.token import Error

    return [value for token, value in lexer_for(language).get_tokens(text) if token in Error]


MONOSPACE = ("font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', "
             "'Liberation Mono', monospace; font-size: 12px")


def highlight_html(text: str, language: str, classes: bool = False) -> str:
    """``text`` as HTML in a monospace ``<pre>``: inline styles (a notebook needs no
    stylesheet), or CSS classes."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    return highlight(text, lexer_for(language),
                     HtmlFormatter(noclasses=not classes, prestyles=MONOSPACE))


__all__ = ["LANGUAGES", "MONOSPACE", "error_tokens", "highlight_html", "lexer_for"]
