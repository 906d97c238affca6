"""Finding the user's source line (the first frame outside ember's own packages)."""

from __future__ import annotations

import os
import sys

import ember

# Every distribution's ``ember/`` folder: frames in files below them are ember's, not the user's.
_EMBER_DIRS = tuple(os.path.join(os.path.abspath(p), "") for p in ember.__path__)


class FrameSummary:
    """Where a user's program was when something happened (a graph break, a node)."""

    __slots__ = ("filename", "lineno", "name", "line")

    def __init__(self, filename: str, lineno: int, name: str, line: str | None):
        self.filename, self.lineno, self.name, self.line = filename, lineno, name, line

    def __repr__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, in {self.name}'

    def __str__(self) -> str:
        text = repr(self)
        return f"{text}\n    {self.line.strip()}" if self.line else text


def is_user_file(filename: str) -> bool:
    """Whether code from ``filename`` is the program's: not in ember's packages, not generated (``<...>``)."""
    return not filename.startswith(_EMBER_DIRS) and not filename.startswith("<")


def user_frame(depth: int = 1) -> FrameSummary | None:
    """The innermost frame whose file is not part of ember (None when there is none)."""
    f = sys._getframe(depth)
    while f is not None:
        filename = f.f_code.co_filename
        if is_user_file(filename):
            import linecache

            return FrameSummary(filename, f.f_lineno, f.f_code.co_name, linecache.getline(filename, f.f_lineno))
        f = f.f_back
    return None
