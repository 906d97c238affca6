"""``PassManager``: runs a list of passes, in an order its constraints allow, until nothing changes."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import wraps
from typing import Any

from ember.nn import Module

from ...graph_module import GraphModule
from .pass_base import PassResult

__all__ = ["PassManager", "pass_result_wrapper", "this_before_that_pass_constraint"]


def _pass_name(fn: Callable) -> str:
    return fn.__name__ if inspect.isfunction(fn) else type(fn).__name__


def pass_result_wrapper(fn: Callable[..., Any]) -> Callable[..., PassResult | None]:
    """Makes a pass that returns None or a module return a PassResult (marked modified)."""
    if fn is None:
        return None

    @wraps(fn)
    def wrapped_fn(gm: Module) -> PassResult | None:
        result = fn(gm)
        if result is None:
            return PassResult(gm, True)
        if isinstance(result, PassResult):
            return result
        if isinstance(result, Module):
            return PassResult(result, True)
        return None

    if not inspect.isfunction(fn):
        wrapped_fn.__name__ = type(fn).__name__
    return wrapped_fn


def this_before_that_pass_constraint(this: Callable, that: Callable) -> Callable[[Callable, Callable], bool]:
    """A constraint: ``this`` must run before ``that``.

    A constraint ``c(a, b)`` says whether running ``a`` before ``b`` is allowed.
    """

    def depends_on(a: Callable, b: Callable) -> bool:
        return not (a == that and b == this)

    return depends_on


class PassManager:
    """Runs ``passes`` on a module, up to ``steps`` rounds or until a round changes nothing.

    Args:
        passes: callables taking a module and returning a PassResult.
        constraints: ``c(a, b) -> bool`` (may ``a`` run before ``b``?); the passes are reordered
            to satisfy them.
        steps: the most rounds (1 by default).
        run_checks_after_each_pass: run ``check`` after every pass, not only before the first.
        suppress_check_failures: accepted for compatibility.
    """

    steps: int = 1

    def __init__(self, passes: list[Callable[..., PassResult | None]] | None = None,
                 constraints: list[Callable[[Callable, Callable], bool]] | None = None,
                 steps: int | None = None, run_checks_after_each_pass: bool = False,
                 suppress_check_failures: bool = False) -> None:
        self.passes = passes or []
        self.constraints = constraints or []
        if steps:
            self.steps = steps
        self.run_checks_after_each_pass = run_checks_after_each_pass
        self.suppress_check_failures = suppress_check_failures
        self._validated = False

    def add_pass(self, _pass: Callable) -> None:
        self.passes.append(_pass)
        self._validated = False

    def add_constraint(self, constraint: Callable) -> None:
        self.constraints.append(constraint)
        self._validated = False

    def validate_constraints(self) -> None:
        """Raises RuntimeError if the current order breaks a constraint."""
        if self._validated:
            return
        for constraint in self.constraints:
            for i, earlier in enumerate(self.passes):
                for later in self.passes[i + 1:]:
                    if not constraint(earlier, later):
                        raise RuntimeError(f"pass schedule constraint violated. Expected {earlier} before {later} "
                                           f"but found {later} before {earlier}")
        self._validated = True

    def solve_constraints(self) -> None:
        """Reorders the passes (stably) so that every constraint holds; RuntimeError on a cycle."""
        count = len(self.passes)
        must_precede: list[set[int]] = [set() for _ in range(count)]  # j in must_precede[i]: j first
        for i in range(count):
            for j in range(count):
                if i != j and any(not c(self.passes[i], self.passes[j]) for c in self.constraints):
                    must_precede[i].add(j)
        order: list[int] = []
        placed: set[int] = set()
        while len(order) < count:
            ready = [i for i in range(count) if i not in placed and must_precede[i] <= placed]
            if not ready:
                cycle = [_pass_name(self.passes[i]) for i in range(count) if i not in placed]
                raise RuntimeError(f"Circular dependency detected within the following passes: {cycle}")
            order.append(ready[0])
            placed.add(ready[0])
        self.passes = [self.passes[i] for i in order]
        self._validated = True

    def add_checks(self, check: Callable) -> None:
        """Replaces ``check`` (run on the module before the passes) with ``check(module)``."""
        if len(inspect.signature(check).parameters) != 1:
            raise TypeError("PassManager check function should only take in one variable, a module")
        self.check = check  # type: ignore[method-assign]

    def check(self, module: Module) -> None:
        """Invariant checks on the module (none unless ``add_checks`` set one)."""

    def __call__(self, module: Module) -> PassResult:
        if not self._validated:
            self.solve_constraints()
        self.check(module)
        overall_modified = False
        for _ in range(self.steps):
            modified = False
            for i, fn in enumerate(self.passes):
                try:
                    result = fn(module)
                    if not isinstance(result, PassResult) and not hasattr(result, "graph_module"):
                        raise TypeError(f"The result of the pass {_pass_name(fn)} should be type PassResult."
                                        "Please wrap it with pass_result_wrapper()")
                    module = result.graph_module
                    modified = modified or result.modified
                    if isinstance(module, GraphModule):
                        module.recompile()
                    if self.run_checks_after_each_pass:
                        self.check(module)
                except Exception as e:
                    earlier = [_pass_name(p) for p in self.passes[:i]]
                    raise Exception(f"An error occurred when running the '{_pass_name(fn)}' pass after the "  # noqa: TRY002
                                    f"following passes: {earlier}") from e
            overall_modified = overall_modified or modified
            if not modified:
                break
        return PassResult(module, overall_modified)
