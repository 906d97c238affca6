"""``record``: the decorator torchrun scripts put on ``main`` to report a worker's error.

When a decorated function raises, the traceback is written as JSON to the file named by
``TORCHELASTIC_ERROR_FILE`` (if the launcher set one) and the exception propagates, so the
launcher can say which rank failed and why.
"""

from __future__ import annotations

import functools
import json
import os
import time
import traceback

__all__ = ["ChildFailedError", "record"]


class ChildFailedError(Exception):
    """A worker of the launched job failed (``failures`` maps rank to a description)."""

    def __init__(self, name: str, failures: dict):
        super().__init__(f"{name} FAILED: {failures}")
        self.name = name
        self.failures = failures


def record(fn=None, error_handler=None):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except SystemExit as exit_:
                if exit_.code in (0, None):
                    raise
                _write_error(exit_)
                raise
            except Exception as err:
                _write_error(err)
                raise

        return wrapper

    return decorate(fn) if fn is not None else decorate


def _write_error(err: BaseException) -> None:
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    message = {"message": {"message": f"{type(err).__name__}: {err}", "extraInfo": {
        "py_callstack": traceback.format_exc(), "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as f:
            json.dump(message, f)
    except OSError:
        pass
