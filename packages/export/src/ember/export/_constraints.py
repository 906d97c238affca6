"""``torch.export.Constraint``: what a ``dynamic_shapes`` entry says about one input dimension.

torch 2.13 spells ``Constraint`` as the union ``_Constraint | _DerivedConstraint |
_RelaxedConstraint`` of dataclasses naming a tensor (``t_id``, its ``id()``) and a dim; the
range lives in ``constraint_range.vr`` (``StrictMinMaxConstraint(warn_only=False, vr=VR[..])``).
``_process_dynamic_shapes`` reads a ``dynamic_shapes`` spec into such a list, in torch's order
(hints as they are met, then named dims by first use, then static sizes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from . import _pytree as pytree
from ._dims import Dim, _DerivedDim, _DimHint
from ._ranges import ValueRange


@dataclasses.dataclass(frozen=True)
class StrictMinMaxConstraint:
    """A dim's inclusive range that must hold (torch's ``StrictMinMaxConstraint``)."""

    warn_only: bool
    vr: ValueRange

    def render(self, source) -> str:
        return f"{self.vr.lower} <= {source.name} <= {self.vr.upper}"


def _strict(lower: int, upper: int) -> StrictMinMaxConstraint:
    return StrictMinMaxConstraint(warn_only=False, vr=ValueRange(lower, upper))


@dataclasses.dataclass
class _ConstraintTarget:
    """An input tensor dimension: ``t_id`` is the tensor's ``id()``."""

    t_id: int
    dim: int


@dataclasses.dataclass
class _Constraint(_ConstraintTarget):
    """A :class:`Dim` (or a static size) on one input dimension, with its range."""

    name: str
    constraint_range: StrictMinMaxConstraint

    def _clone_with_range(self, lower: int = 0, upper: int | None = None) -> _Constraint:
        vr = self.constraint_range.vr
        lo = max(vr.lower, lower)
        hi = vr.upper if upper is None else min(vr.upper, upper)
        if lo > hi:
            raise ValueError(f"Range [{lo}, {hi}] is empty")  # torch: ValueRanges' "Invalid ranges"
        return _Constraint(self.t_id, self.dim, self.name, _strict(lo, hi))

    def __ge__(self, lower: int) -> _Constraint:
        return self._clone_with_range(lower=lower)

    def __gt__(self, lower: int) -> _Constraint:
        return self._clone_with_range(lower=lower + 1)

    def __le__(self, upper: int) -> _Constraint:
        return self._clone_with_range(upper=upper)

    def __lt__(self, upper: int) -> _Constraint:
        return self._clone_with_range(upper=upper - 1)

    def __bool__(self) -> bool:
        raise TypeError(
            "Cannot determine truth value of _Constraint. "
            "If you are trying to combine _Constraint's with logical connectives, "
            "you can specify them separately instead.")

    @property
    def serializable_spec(self) -> dict:
        vr = self.constraint_range.vr
        return {"t_id": self.t_id, "dim": self.dim, "min": vr.lower, "max": vr.upper}


@dataclasses.dataclass
class _PhantomRoot:
    """The root of a derived dim that no input dimension shows directly (``2*_n`` alone)."""

    name: str
    constraint_range: StrictMinMaxConstraint
    val: int


@dataclasses.dataclass
class _DerivedConstraint(_ConstraintTarget):
    """A derived dim (``fn(root)``) on one input dimension; ``root`` is an input dim or a phantom."""

    name: str
    constraint_range: StrictMinMaxConstraint
    root: _ConstraintTarget | _PhantomRoot
    fn: Callable

    @property
    def serializable_spec(self) -> dict:
        vr = self.constraint_range.vr
        return {"t_id": self.t_id, "dim": self.dim, "min": vr.lower, "max": vr.upper}


@dataclasses.dataclass
class _RelaxedConstraint(_ConstraintTarget):
    """A dim marked ``Dim.AUTO``/``Dim.DYNAMIC``: range and relations left to inference."""

    @property
    def serializable_spec(self) -> dict:
        return {"t_id": self.t_id, "dim": self.dim}


Constraint = _Constraint | _DerivedConstraint | _RelaxedConstraint


def _process_dynamic_shapes(combined_args: dict, dynamic_shapes) -> list[Constraint]:
    """The constraints a ``dynamic_shapes`` spec puts on ``combined_args`` (name -> value)."""
    from ._dynamic_shapes import _is_tensor, _match

    if dynamic_shapes is None or len(dynamic_shapes) == 0:
        return []
    names = list(combined_args)
    if isinstance(dynamic_shapes, dict):
        specs = [dynamic_shapes.get(n) for n in names]
    else:
        specs = list(dynamic_shapes)
    symbols: dict[str, list] = {}
    phantoms: dict[str, _PhantomRoot] = {}
    with_phantom: list[_DerivedConstraint] = []
    constraints: list = []

    def to_constraint(dim, tensor, i: int):
        if isinstance(dim, _DerivedDim):
            root_dim = dim.root
            if root_dim.__name__ in symbols:
                first = symbols[root_dim.__name__][0]
                root = _ConstraintTarget(first.t_id, first.dim)
            elif root_dim.__name__ in phantoms:
                root = phantoms[root_dim.__name__]
            else:
                size = int(tensor.shape[i])
                if (size - dim.offset) % dim.coeff:
                    from ._errors import UserError, UserErrorType
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected shape[{i}] = {size} of input Tensor to be of the form "
                                    f"{dim._readable()}, where {root_dim.__name__} is an integer")
                root = _PhantomRoot(root_dim.__name__, _strict(root_dim.min, root_dim.max),
                                    (size - dim.offset) // dim.coeff)
                phantoms[root_dim.__name__] = root
            made = _DerivedConstraint(id(tensor), i, dim.__name__, _strict(dim.min, dim.max), root, dim.evaluate)
            if isinstance(root, _PhantomRoot):
                with_phantom.append(made)
            return made
        return _Constraint(id(tensor), i, dim.__name__, _strict(dim.min, dim.max))

    def parse(tensor, i: int, dim) -> None:
        if isinstance(dim, bool):
            return
        if isinstance(dim, int):
            made = _Constraint(id(tensor), i, str(dim), _strict(dim, dim))
            symbols.setdefault(str(dim), []).append(made)
        elif isinstance(dim, Dim):
            symbols.setdefault(dim.__name__, []).append(to_constraint(dim, tensor, i))
        elif isinstance(dim, _DimHint):
            constraints.append(_RelaxedConstraint(id(tensor), i))

    for name, value, spec in zip(names, combined_args.values(), specs):
        leaves = pytree.tree_flatten(value)[0]
        for leaf, per in zip(leaves, _match(value, spec, name)):
            if _is_tensor(leaf):
                for i, dim in per.items():
                    parse(leaf, i, dim)
    for made in with_phantom:  # a root met later as an input dim is no phantom after all
        first = symbols.get(made.root.name)
        if first:
            made.root = _ConstraintTarget(first[0].t_id, first[0].dim)
    for group in symbols.values():
        constraints.extend(group)
    return constraints


__all__ = ["Constraint"]
