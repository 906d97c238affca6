"""``PassBase`` (a pass as an object with pre- and post-checks) and ``PassResult``."""

from __future__ import annotations

import abc
from collections import namedtuple
from typing import Any

__all__ = ["PassBase", "PassResult"]


class PassResult(namedtuple("PassResult", ["graph_module", "modified"])):
    """What a pass returns: the (possibly new) module, and whether it changed anything."""

    __slots__ = ()

    def __new__(cls, graph_module: Any, modified: bool) -> PassResult:
        return super().__new__(cls, graph_module, modified)


class PassBase(abc.ABC):
    """A pass: implement ``call``; ``requires``/``ensures`` check the module before and after.

    An instance can go straight into a ``PassManager``'s list of passes.
    """

    def __call__(self, graph_module: Any) -> PassResult | None:
        self.requires(graph_module)
        result = self.call(graph_module)
        self.ensures(graph_module)
        return result

    @abc.abstractmethod
    def call(self, graph_module: Any) -> PassResult | None:
        """Runs the pass on ``graph_module``."""

    def requires(self, graph_module: Any) -> None:  # noqa: B027 - optional hook
        """Checks the preconditions of the pass (nothing by default)."""

    def ensures(self, graph_module: Any) -> None:  # noqa: B027 - optional hook
        """Checks the postconditions of the pass (nothing by default)."""
