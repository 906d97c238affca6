"""Export's user-facing error: PyTorch's ``torch._dynamo.exc.UserError`` (a RuntimeError).

It derives from compile's ``UserError`` when ``ember._dynamo.exc`` has one (else from its
``TorchDynamoException``, as PyTorch's does), so ``except`` clauses written against either
catch it.
"""

from __future__ import annotations

import enum
import importlib.util


class UserErrorType(enum.Enum):
    DYNAMIC_CONTROL_FLOW = enum.auto()
    ANTI_PATTERN = enum.auto()
    STANDARD_LIBRARY = enum.auto()
    CONSTRAINT_VIOLATION = enum.auto()
    DYNAMIC_DIM = enum.auto()
    INVALID_INPUT = enum.auto()
    INVALID_OUTPUT = enum.auto()
    UNSUPPORTED_FEATURE = enum.auto()


def _base():
    if importlib.util.find_spec("ember._dynamo") is not None:
        try:
            from ember._dynamo import exc

            return getattr(exc, "UserError", None) or exc.TorchDynamoException
        except (ImportError, AttributeError):
            pass
    return RuntimeError


_Base = _base()


class UserError(_Base):
    """An export failure caused by the program or its inputs; the message says how to fix it."""

    def __init__(self, error_type: UserErrorType, msg: str, case_name: str | None = None):
        self.error_type = error_type
        self.message = msg
        self.case_name = case_name
        text = msg
        if case_name is not None:
            text += f"\nFor more information about this error, see: exportdb case {case_name}"
        RuntimeError.__init__(self, text)
