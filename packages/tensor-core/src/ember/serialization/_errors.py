"""The exception types of ``ember.serialization``."""

from __future__ import annotations

import pickle


class UnpicklingError(pickle.UnpicklingError, RuntimeError):
    """A checkpoint's pickle stream is corrupt, or asks for something ember never runs.

    It is both a ``pickle.UnpicklingError`` (what ``torch.load(weights_only=True)`` raises for a
    forbidden global) and a ``RuntimeError`` (what PyTorch raises for a corrupt archive), so either
    ``except`` clause catches every way a bad file can fail.
    """


class CallerError(Exception):
    """Carries an error of the caller's own making (e.g. a bad ``map_location``) through the
    unpickler, which otherwise reports every failure as a corrupt stream."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def describe(source) -> str:
    """A short name for error messages: the file's path, or the type of the file object."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        return repr(str(source))
    name = getattr(source, "name", None)
    if isinstance(name, str):
        return repr(name)
    return f"<{type(source).__name__}>"
