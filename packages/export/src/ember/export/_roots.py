"""The dynamic dims of an export call: one root per ``Dim`` name or per hinted dim.

A root is a size that may vary: a named ``Dim`` (all its uses, derived ones included, share
it) or one dim hinted ``Dim.AUTO``/``Dim.DYNAMIC``. ``uses`` lists where it appears as
(input leaf index, dim, coeff, offset): that input's size is ``coeff * root + offset``.
"""

from __future__ import annotations

from ._dims import INT_OO, _DerivedDim
from ._dynamic_shapes import dim_kind
from ._errors import UserError, UserErrorType


class _Root:
    def __init__(self, key, name, lo, hi, kind, base):
        self.key, self.name, self.lo, self.hi, self.kind, self.base = key, name, lo, hi, kind, base
        self.uses = []  # (leaf index, dim, coeff, offset)
        self.symbol = None


def dynamic_roots(leaves, dim_specs, arg_names):
    roots: dict = {}
    for i, (leaf, specs) in enumerate(zip(leaves, dim_specs)):
        for d, spec in specs.items():
            size = int(leaf.shape[d])
            where = f"{arg_names[i]}.size()[{d}]"
            kind = dim_kind(spec)
            if kind == "static":
                if isinstance(spec, int) and spec != size:
                    from ember.compiler._exc import ConstraintViolationError

                    raise ConstraintViolationError(f"Static shape constraint of {spec} does not match input size of "
                                                   f"{size}, for L['{arg_names[i]}'].size()[{d}]")
                continue
            if kind == "dim":
                root = spec.root
                coeff, offset = (spec.coeff, spec.offset) if isinstance(spec, _DerivedDim) else (1, 0)
                if (size - offset) % coeff:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected {where} = {size} to be of the form {spec!r} for an integer "
                                    f"{root.__name__}")
                value = (size - offset) // coeff
                if not spec.min <= size <= spec.max:
                    from ember.compiler._exc import ConstraintViolationError

                    upper = "int_oo" if spec.max >= INT_OO else spec.max
                    # PyTorch names the range its trace uses: sizes 0 and 1 are never dynamic
                    lower = max(spec.min, 2)
                    raise ConstraintViolationError(f"{size} not in range [{lower}, {upper}] (the example input at "
                                                   f"{where}, dim {spec.__name__})")
                key = ("dim", root.__name__)  # PyTorch identifies dims by name
                entry = roots.get(key)
                if entry is not None and (entry.lo, entry.hi) != (root.min, root.max):
                    raise UserError(UserErrorType.INVALID_INPUT,
                                    f"Found different definitions {root!r} and Dim({root.__name__!r}, "
                                    f"min={entry.lo}, max={entry.hi}) for the same symbolic dimension "
                                    f"{root.__name__}!")
                if entry is None:
                    entry = roots[key] = _Root(key, root.__name__, root.min, root.max, "dim", value)
                    entry.first_where = where
                elif entry.base != value:
                    # PyTorch's words (its sources spelled L['y'].size()[0])
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"{where} = {value} is not equal to {entry.first_where} = {entry.base}")
                entry.uses.append((i, d, coeff, offset))
            else:
                lo = spec.min if spec.min is not None else 2  # PyTorch's 0/1 specialization
                hi = spec.max if spec.max is not None else INT_OO
                entry = roots[(i, d)] = _Root((i, d), where, lo, hi, kind, size)
                entry.uses.append((i, d, 1, 0))
    return list(roots.values())
