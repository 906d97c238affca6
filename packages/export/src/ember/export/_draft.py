"""``draft_export``: an export that tolerates data-dependent decisions and reports them.

The module runs once for real first; the int values its ``.item()`` reads take are kept by user
line. The trace then gives each read's unbacked symbol (``u0``) its real value, and where the
program decides on one (``if n > 2:``), which export refuses, the real value decides: the
decision is reported as a data-dependent failure and becomes a fact of the symbol's range, so the
graph asserts it at run time (PyTorch's real-tensor propagation). The program comes back with
``ep._report``, a :class:`DraftExportReport` of what was found.
"""

from __future__ import annotations

import logging
from enum import IntEnum
from typing import Any

log = logging.getLogger("ember.export")


class FailureType(IntEnum):
    MISSING_FAKE_KERNEL = 1
    DATA_DEPENDENT_ERROR = 2
    GUARD_ADDED = 3
    MISMATCHED_FAKE_KERNEL = 4

    def __str__(self) -> str:
        return self.name


class FailureReport:
    """One problem draft_export worked around: its kind and what it knows of it (``data``)."""

    def __init__(self, failure_type: FailureType, data: dict[str, Any], xfail: bool = False) -> None:
        self.failure_type = failure_type
        self.data = data
        self.xfail = xfail

    def __repr__(self) -> str:
        return f"FailureReport(failure_type={self.failure_type}, xfail={self.xfail}, data={self.data})"

    def print(self, str_to_filename: dict | None = None) -> str:
        if self.failure_type is FailureType.DATA_DEPENDENT_ERROR:
            frame = self.data.get("user_stack")
            where = f"\n        File {frame.filename}, lineno {frame.lineno}, in {frame.name}\n            " \
                    f"{(frame.line or '').strip()}" if frame is not None else " (unknown)"
            return (f"Data dependent error.\n    When exporting, we were unable to evaluate the value of "
                    f"`{self.data['expr']}`.\n    This was encountered {self.data['occurrences']} times.\n"
                    f"    This occurred at the following user stacktrace:{where}\n\n"
                    f"    As a result, it was specialized to a constant (e.g. `{self.data['result']}` in the 1st "
                    "occurrence), and asserts were inserted into the graph.\n\n"
                    "    Please add `torch._check(...)` to the original code to assert this data-dependent "
                    "assumption.\n")
        return f"{self.failure_type.name}: {self.data}\n"


class DraftExportReport:
    """``ep._report``: the failures draft_export found (empty when the export was sound)."""

    def __init__(self, failures: list[FailureReport], str_to_filename: dict | None = None,
                 expressions_created: dict | None = None, op_profiles: dict | None = None) -> None:
        self.failures = failures
        self.str_to_filename = str_to_filename or {}
        self.expressions_created = expressions_created or {}
        self.op_profiles = op_profiles or {}

    def successful(self) -> bool:
        return len(self.failures) == 0 or all(f.xfail for f in self.failures)

    def __repr__(self) -> str:
        return f"DraftExportReport({self.failures})"

    def __str__(self) -> str:
        # Green when sound, yellow otherwise (terminal colours, as PyTorch's report prints).
        bar = "#" * 94
        if self.successful():
            return (f"\033[92m\n{bar}\nCongratulations: No issues are found during export, and it was able to "
                    f"soundly produce a graph.\nYou can now change back to torch.export.export()\n{bar}\n\033[0m")
        bar = "#" * 99
        text = (f"\033[93m\n{bar}\nWARNING: {len(self.failures)} issue(s) found during export, and it was not "
                f"able to soundly produce a graph.\nPlease follow the instructions to fix the errors.\n{bar}\n\n")
        for i, failure in enumerate(self.failures, 1):
            text += f"{i}. {failure.print(self.str_to_filename)}\n"
        return text + "\033[0m"

    def apply_suggested_fixes(self) -> None:
        raise NotImplementedError("Not implemented yet")


class Draft:
    """What the trace reads while draft_export runs (``_unbacked_export.DRAFT``)."""

    def __init__(self, real_values: dict) -> None:
        self._real_values = {key: list(values) for key, values in real_values.items()}
        self.failures: list[FailureReport] = []
        self._by_expr: dict[tuple, FailureReport] = {}

    def real_value(self, frame):
        """The value the next .item() read at ``frame``'s line had when the module ran."""
        if frame is None:
            return None
        values = self._real_values.get((frame.filename, frame.lineno))
        return values.pop(0) if values else None

    def data_dependent(self, rel, answer: bool, frame) -> None:
        key = (str(rel), None if frame is None else (frame.filename, frame.lineno))
        found = self._by_expr.get(key)
        if found is not None:
            found.data["occurrences"] += 1
            return
        report = FailureReport(FailureType.DATA_DEPENDENT_ERROR,
                               {"expr": str(rel), "result": answer, "occurrences": 1, "user_stack": frame})
        self._by_expr[key] = report
        self.failures.append(report)


def _real_item_values(mod, args, kwargs) -> dict:
    """Runs ``mod`` once, keeping the int values of its ``.item()`` reads by user line."""
    import ember
    from ember.compiler._user_frames import user_frame

    values: dict = {}
    original = ember.Tensor.item

    def item(self):
        value = original(self)
        if isinstance(value, int) and not isinstance(value, bool):
            frame = user_frame(2)
            if frame is not None:
                values.setdefault((frame.filename, frame.lineno), []).append(value)
        return value

    ember.Tensor.item = item
    try:
        with ember.no_grad():
            mod(*args, **kwargs)
    finally:
        ember.Tensor.item = original
    return values


def draft_export(mod, args, kwargs=None, *, dynamic_shapes=None, preserve_module_call_signature: tuple = (),
                 strict: bool = False, prefer_deferred_runtime_asserts_over_guards: bool = False):
    """Exports ``mod`` as :func:`ember.export.export` does, deciding data-dependent branches by the
    values the example inputs give; returns the program with ``ep._report`` (a
    :class:`DraftExportReport`) listing what it had to assume.

    Example:
        >>> ep = ember.export.draft_export(model, (x,))
        >>> print(ep._report)
    """
    from ember.compiler import _unbacked_export

    from ._trace import export

    kwargs = dict(kwargs or {})
    draft = Draft(_real_item_values(mod, args, kwargs))
    previous = _unbacked_export.DRAFT[0]
    _unbacked_export.DRAFT[0] = draft
    try:
        ep = export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                    preserve_module_call_signature=preserve_module_call_signature)
    finally:
        _unbacked_export.DRAFT[0] = previous
    report = DraftExportReport(draft.failures)
    if not report.successful():
        log.warning("%s\nYou can view the errors in python by inspecting `print(ep._report)`.",
                    f"{len(report.failures)} issue(s) found during export, and it was not able to soundly "
                    "produce a graph.")
    ep._report = report
    return ep


__all__ = ["DraftExportReport", "FailureReport", "FailureType", "draft_export"]
