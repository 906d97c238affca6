"""Reading ``dynamic_shapes`` against the call's inputs, and reporting violations as PyTorch does.

``dynamic_shapes`` mirrors the inputs: a dict keyed by the forward's argument names or a
tuple/list in argument order; for each tensor, a dict ``{dim: spec}`` or a sequence with one
spec per dim, where a spec is a ``Dim`` (or derived dim), ``Dim.AUTO``/``STATIC``/
``DYNAMIC``, an int (that static size) or None (static). ``normalize`` returns one
``{dim: spec}`` per flattened input tensor.
"""

from __future__ import annotations

import inspect

from . import _pytree as pytree
from ._dims import Dim, _DimHint, _DimHintType
from ._errors import UserError, UserErrorType

_EXPORTDB = "https://pytorch.org/docs/main/generated/exportdb/index.html#dynamic-shapes-validation"


def _arg_names(mod, args: tuple, kwargs: dict) -> list[str]:
    """Names of the forward's parameters bound by this call, in call order."""
    fn = mod.forward if hasattr(mod, "forward") else mod
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [f"args_{i}" for i in range(len(args))] + list(kwargs)
    names = []
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = next((p for p in sig.parameters.values() if p.kind is p.VAR_POSITIONAL), None)
    for i in range(len(args)):
        if i < len(params):
            names.append(params[i].name)
        else:
            names.append(f"{var_pos.name if var_pos else 'args'}_{i - len(params)}")
    return names + list(kwargs)


def input_names(mod, args: tuple, kwargs: dict) -> list[str]:
    return _arg_names(mod, args, kwargs)


def _per_tensor(spec, tensor, where: str) -> dict:
    if spec is None:
        return {}
    ndim = tensor.ndim
    if isinstance(spec, dict):
        out = {}
        for d, s in spec.items():
            if isinstance(d, int) and not -ndim <= d < ndim:
                # PyTorch's own error here: it writes the spec into a list of the tensor's dims
                raise IndexError("list assignment index out of range")
            if not isinstance(d, int):
                raise UserError(UserErrorType.INVALID_INPUT,
                                f"Dynamic shape spec {spec} for {where} names dimension {d}, but the tensor has "
                                f"{ndim} dimensions")
            out[d % ndim] = s
        return out
    if isinstance(spec, (tuple, list)):
        if len(spec) != ndim:
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"Expected dynamic shape spec {spec} at {where} to have the same length as the actual "
                            f"tensor shape {tuple(tensor.shape)} (expected {ndim}, but got {len(spec)} instead)")
        return dict(enumerate(spec))
    if isinstance(spec, (Dim, _DimHint)):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Unexpected dynamic_shape {spec} of Tensor at {where}: give a dict or a tuple with one "
                        "entry per dimension")
    raise UserError(UserErrorType.INVALID_INPUT, f"Unexpected dynamic_shape {spec!r} of Tensor at {where}")


class ShapesCollection:
    """``dynamic_shapes`` keyed by the input tensors themselves (PyTorch's ``ShapesCollection``):
    ``sc[x] = {0: batch}`` for any tensor inside ``args``/``kwargs``, however deeply nested; the
    collection is passed as ``dynamic_shapes`` (or turned into the usual structure with
    :meth:`dynamic_shapes`). Tensors given no shape are static.

    Example:
        >>> import ember
        >>> from ember.export import Dim, ShapesCollection, export
        >>> x = ember.randn(3, 4)
        >>> sc = ShapesCollection()
        >>> sc[x] = {0: Dim("batch")}
        >>> ep = export(ember.nn.Linear(4, 2), (x,), dynamic_shapes=sc)
        >>> len(ep.range_constraints)
        1
    """

    def __init__(self):
        self._shapes: dict = {}  # id(tensor) -> its shape spec
        self._tensors: dict = {}  # id(tensor) -> tensor (keeps the ids valid)

    def __setitem__(self, tensor, shape) -> None:
        import ember

        if not isinstance(tensor, ember.Tensor):
            raise AssertionError(f"Cannot assign shape to non-tensor type {type(tensor)}")
        known = self._shapes.get(id(tensor))
        if known is not None and known != shape:
            raise AssertionError(f"Shapes assigned to input do not match: expected {known}, got {shape}")
        self._shapes[id(tensor)] = shape
        self._tensors[id(tensor)] = tensor

    def __getitem__(self, tensor):
        self._tensors.setdefault(id(tensor), tensor)
        return self._shapes.setdefault(id(tensor), {})

    def __len__(self) -> int:
        return len(self._shapes)

    def dynamic_shapes(self, m, args: tuple, kwargs: dict | None = None):
        """The ``dynamic_shapes`` structure for ``m(*args, **kwargs)``: per argument name, the
        shapes of the tensors in it, None elsewhere."""
        kwargs = kwargs or {}
        used: set = set()

        def spec_of(value):
            flat, tree = pytree.tree_flatten(value)
            if len(flat) == 1 and flat[0] is value:
                if id(value) in self._shapes:
                    used.add(id(value))
                    return self._shapes[id(value)]
                return None
            return pytree.tree_unflatten([spec_of(leaf) for leaf in flat], tree)

        names = _arg_names(m, args, kwargs)
        out = dict(zip(names, [spec_of(a) for a in args] + [spec_of(v) for v in kwargs.values()]))
        if set(self._shapes) - used:
            raise ValueError("Some tensors that were assigned shapes were not found in args. Maybe such "
                             "tensors were copied when passing them as args? Maybe such tensors are contained "
                             "in classes that were not registered with pytree?")
        return out


class AdditionalInputs:
    """``dynamic_shapes`` inferred from more example inputs (PyTorch's ``AdditionalInputs``): a dim
    whose size differs between the export's inputs and any added example is ``Dim.DYNAMIC``, one
    that never differs is static; ``export`` then runs the program on every added example.

    Example:
        >>> import ember
        >>> from ember.export import AdditionalInputs, export
        >>> more = AdditionalInputs()
        >>> more.add((ember.randn(5, 4),))
        >>> ep = export(ember.nn.Linear(4, 2), (ember.randn(3, 4),), dynamic_shapes=more)
        >>> ep.module()(ember.randn(7, 4)).shape
        ember.Size([7, 2])
    """

    def __init__(self):
        self._examples: list = []

    def add(self, args, kwargs=None) -> None:
        """One more example call, ``m(*args, **kwargs)``."""
        if type(args) is not tuple:
            raise AssertionError(f"Representative args {args} must be a tuple")
        if kwargs is not None and type(kwargs) is not dict:
            raise AssertionError(f"Representative kwargs {kwargs} must be None or a dict")
        self._examples.append((args, kwargs or {}))

    def dynamic_shapes(self, m, args: tuple, kwargs: dict | None = None):
        """The ``dynamic_shapes`` structure (per argument name) that the examples imply."""
        kwargs = kwargs or {}
        first, tree = pytree.tree_flatten((args, kwargs))
        others = []
        for other_args, other_kwargs in self._examples:
            leaves, other_tree = pytree.tree_flatten((other_args, other_kwargs))
            if other_tree != tree:
                raise ValueError(f"The example inputs {other_args}, {other_kwargs} are not structured as the "
                                 "inputs to export")
            others.append(leaves)
        specs = []
        for i, leaf in enumerate(first):
            seen = [leaf, *(leaves[i] for leaves in others)]
            if any(type(v) is not type(leaf) for v in seen):
                raise ValueError(f"The following inputs were found to have differing types, so they cannot be "
                                 f"marked as dynamic: {tuple(seen)}.")
            if _is_tensor(leaf):
                specs.append(tuple(Dim.DYNAMIC if any(v.shape[d] != leaf.shape[d] for v in seen) else None
                                   for d in range(leaf.ndim)))
            else:
                if any(v != leaf for v in seen):
                    # (PyTorch makes a differing int a dynamic input; ember exports numbers as constants)
                    raise ValueError(f"The following inputs were found to have differing values, but they "
                                     f"cannot be marked as dynamic: {tuple(seen)}.")
                specs.append(None)
        spec_args, spec_kwargs = pytree.tree_unflatten(specs, tree)
        names = _arg_names(m, args, kwargs)
        return dict(zip(names, [*spec_args, *spec_kwargs.values()]))

    def verify(self, ep) -> None:
        """Runs ``ep.module()`` on every example (an input the program cannot take raises)."""
        module = ep.module()
        for args, kwargs in self._examples:
            module(*args, **kwargs)


def normalize(mod, args: tuple, kwargs: dict, dynamic_shapes) -> list[dict]:
    """One ``{dim: Dim | hint | int | None}`` per flattened leaf of ``(args, kwargs)``."""
    leaves, _ = pytree.tree_flatten((args, kwargs))
    if dynamic_shapes is None:
        return [{} for _ in leaves]
    if isinstance(dynamic_shapes, (ShapesCollection, AdditionalInputs)):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    names = _arg_names(mod, args, kwargs)
    values = list(args) + list(kwargs.values())
    if isinstance(dynamic_shapes, dict):
        if set(dynamic_shapes) != set(names):
            raise UserError(
                UserErrorType.INVALID_INPUT,
                "When `dynamic_shapes` is specified as a dict, its top-level keys must be the arg names "
                f"{names} of `inputs`, but here they are {list(dynamic_shapes)}. Alternatively, you could also "
                "ignore arg names entirely and specify `dynamic_shapes` as a list/tuple matching `inputs`. "
                f"For more information about this error, see: {_EXPORTDB}")
        per_arg = [dynamic_shapes[n] for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(values):
            raise UserError(
                UserErrorType.INVALID_INPUT,
                "Detected mismatch between the structure of `inputs` and `dynamic_shapes`: `inputs` has "
                f"{len(values)} elements, but `dynamic_shapes` has {len(dynamic_shapes)} elements\n"
                f"For more information about this error, see: {_EXPORTDB}")
        per_arg = list(dynamic_shapes)
    else:
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"dynamic_shapes must be a dict or a tuple/list, got {type(dynamic_shapes).__name__}")
    out = []
    for name, value, spec in zip(names, values, per_arg):
        out.extend(_match(value, spec, name))
    return out


def _is_tensor(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "ndim")


def _match(value, spec, where: str) -> list[dict]:
    """Walks ``value`` and ``spec`` together, returning one dict per leaf of ``value``."""
    if _is_tensor(value):
        return [_per_tensor(spec, value, where)]
    leaves, vspec = pytree.tree_flatten(value)
    if vspec.is_leaf():  # a non-tensor leaf (int, float, ...) takes no spec
        if spec is not None:
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"Unexpected dynamic_shape {spec!r} of a non-tensor input at {where}")
        return [{}]
    if spec is None:
        return [{} for _ in leaves]
    children = pytree.node_children(value)
    if isinstance(value, dict):
        if not isinstance(spec, dict) or set(spec) != set(value):
            raise UserError(UserErrorType.INVALID_INPUT,
                            f"Detected mismatch between the structure of `inputs` and `dynamic_shapes` at {where}: "
                            f"keys {list(value)} against {list(spec) if isinstance(spec, dict) else spec!r}\n"
                            f"For more information about this error, see: {_EXPORTDB}")
        return [d for k in value for d in _match(value[k], spec[k], f"{where}[{k!r}]")]
    spec_children = list(spec) if isinstance(spec, (tuple, list)) else None
    if spec_children is None or len(spec_children) != len(children):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Detected mismatch between the structure of `inputs` and `dynamic_shapes` at {where}: "
                        f"{len(children)} elements against {spec!r}\n"
                        f"For more information about this error, see: {_EXPORTDB}")
    return [d for i, (c, s) in enumerate(zip(children, spec_children)) for d in _match(c, s, f"{where}[{i}]")]


def dim_kind(spec) -> str:
    """'static', 'dim' (a named Dim), 'auto' or 'dynamic'."""
    if spec is None or isinstance(spec, int):
        return "static"
    if isinstance(spec, Dim):
        return "dim"
    if isinstance(spec, _DimHint):
        return {_DimHintType.AUTO: "auto", _DimHintType.STATIC: "static", _DimHintType.DYNAMIC: "dynamic"}[spec.type]
    raise UserError(UserErrorType.INVALID_INPUT, f"Unexpected dynamic shape spec {spec!r}")


def constraint_violation(names: list[str], reasons: list[str], fixes: list[str]) -> UserError:
    """PyTorch's ``Constraints violated (...)!`` error with its suggested fixes."""
    text = f"Constraints violated ({', '.join(names)})! For more information, run with TORCH_LOGS=\"+dynamic\".\n"
    text += "".join(f"  - {r}\n" for r in reasons)
    if fixes:
        text += "Suggested fixes:\n" + "".join(f"  {f}\n" for f in fixes)
    return UserError(UserErrorType.CONSTRAINT_VIOLATION, text)
