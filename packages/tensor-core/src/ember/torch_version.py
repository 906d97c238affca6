"""``TorchVersion``: a version string that compares as a version (``ember.__version__ >= "0.1"``),
as ``torch.torch_version.TorchVersion``; comparisons with tuples of ints work too."""

from __future__ import annotations

import re

__all__ = ["TorchVersion", "Version", "InvalidVersion"]


class InvalidVersion(ValueError):
    """A string that is not a version."""


class Version:
    """A PEP 440-style release version: numeric release parts, then an optional pre/dev/local part
    (a release with such a suffix sorts below the plain release, as in PEP 440)."""

    _RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)(?:(a|b|rc|\.dev|\.post)(\d*))?(?:\+([\w.]+))?\s*$")

    def __init__(self, text: str):
        m = self._RE.match(str(text))
        if m is None:
            raise InvalidVersion(f"Invalid version: '{text}'")
        self.release = tuple(int(p) for p in m.group(1).split("."))
        tag = m.group(2)
        rank = {"a": -3, "b": -2, "rc": -1, ".dev": -4, ".post": 1, None: 0}[tag]
        self.local = m.group(4)
        # A local label (+cpu) sorts after the same public version and is not equal to it (PEP 440).
        local = () if self.local is None else tuple((0, int(p), "") if p.isdigit() else (-1, 0, p.lower())
                                                    for p in self.local.split("."))
        self._key = (self.release + (0,) * (8 - len(self.release)), rank, int(m.group(3) or 0), local)

    def __eq__(self, other):
        return self._key == other._key

    def __lt__(self, other):
        return self._key < other._key

    def __hash__(self):
        return hash(self._key)


def _convert(other) -> Version:
    if isinstance(other, Version):
        return other
    if isinstance(other, (tuple, list)):
        return Version(".".join(str(int(p)) for p in other))
    if isinstance(other, str):
        return Version(other)
    raise InvalidVersion(other)


class TorchVersion(str):
    """A ``str`` subclass whose comparisons parse both sides as versions."""

    def _cmp(self, other, op):
        try:
            return op(Version(self), _convert(other))
        except InvalidVersion:
            return op(str(self), str(other))

    def __gt__(self, other):
        return self._cmp(other, lambda a, b: b < a)

    def __lt__(self, other):
        return self._cmp(other, lambda a, b: a < b)

    def __ge__(self, other):
        return self._cmp(other, lambda a, b: not a < b)

    def __le__(self, other):
        return self._cmp(other, lambda a, b: not b < a)

    def __eq__(self, other):
        return self._cmp(other, lambda a, b: a == b)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__
