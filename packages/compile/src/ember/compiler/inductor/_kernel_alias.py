"""Kernels equal up to buffer names: the canonical text that finds them (``kernel_sources``
compiles one and declares the others as aliases of its symbol)."""

from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT = re.compile(r"//[^\n]*")


def canonical(text: str, name: str, buffers: dict) -> str:
    """``text`` with comments dropped, the kernel's name blanked and every buffer name (also as
    the suffix of a local such as ``acc_buf5``) renumbered in order of first appearance."""
    numbers: dict = {}

    def rename(m) -> str:
        tok = m.group(0)
        if tok == name:
            return "KERNEL"
        if tok in buffers:
            return f"B{numbers.setdefault(tok, len(numbers))}"
        cut = tok.find("_")
        while cut != -1:
            if tok[cut + 1:] in buffers:
                return f"{tok[:cut + 1]}B{numbers.setdefault(tok[cut + 1:], len(numbers))}"
            cut = tok.find("_", cut + 1)
        return tok

    return _IDENT.sub(rename, _COMMENT.sub("", text))


def alias_name(decl: str) -> str:
    return decl[len("EMBER_KERNEL void "):decl.index("(")]
