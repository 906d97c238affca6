"""The entries behind custom ops: one ember op per ``namespace::name``, whose kernels, fake
implementation and backward formula look up what the user registered, at call time.

A custom op is an ordinary ember op (``ember.ops.<ns>.<name>``, key ``"ns::name"`` in the op
table), so every layer treats it like a built-in one: dispatch modes record it as one node
(``ember.compile``, ``make_fx``, ``ember.export``), the autograd hook records one backward node
from its formula, and a saved program names it. Its arguments always reach the kernels bound to
the schema (every argument, in schema order), so the positions a formula returns gradients for
are the schema's.
"""

from __future__ import annotations

import ember
from ember._src.dispatch import OPS, Op, define
from ember._src.tensor import Tensor

from ._schema import FunctionSchema

DEVICE_TYPES = ("cpu", "cuda")
ENTRIES: dict[str, OpEntry] = {}


class OpEntry:
    """What has been registered for one custom op."""

    def __init__(self, qualname: str, schema: FunctionSchema, op: Op):
        self.qualname = qualname
        self.schema = schema
        self.op = op
        self.kernels: dict = {}  # device type (or None: every device) -> function
        self.fake = None
        self.backward = None
        self.setup_context = None
        self.composite = None  # CompositeImplicitAutograd: a function of other ops
        self.vmap = None
        self.check_aliasing = False  # custom_op's ops: no output may alias an input or another output

    def kernel_for(self, device_type: str):
        if self.composite is not None:
            return self.composite
        fn = self.kernels.get(device_type) or self.kernels.get(None)
        if fn is None:
            raise NotImplementedError(
                f"Could not run '{self.qualname}' with arguments from the '{device_type.upper()}' backend: no kernel "
                f"is registered for it (register one with ember.library.register_kernel or Library.impl)")
        return fn

    def call(self, fn, args, kwargs):
        pos, kw = self.schema.split(self.schema.bind(args, kwargs))
        return fn(*pos, **kw)


def entry_of(op) -> OpEntry:
    """The entry of ``op``: a ``"ns::name"`` string, a CustomOpDef, or the ember op itself."""
    name = op if isinstance(op, str) else getattr(op, "_qualname", None) or getattr(op, "name", None)
    entry = ENTRIES.get(name)
    if entry is None:
        raise ValueError(f"{op!r} is not a custom op defined through ember.library (define it first)")
    return entry


def _device_kernel(entry: OpEntry, device_type: str):
    def kernel(*args, **kwargs):
        # A device kernel runs below autograd: its tensors do not require grad (so a kernel may
        # call .numpy() on them, as PyTorch's tutorials' kernels do). Detached tensors share
        # storage and version counter, so writes of a mutating op land in the caller's tensors.
        args = tuple(_below_autograd(a) for a in args)
        kwargs = {k: _below_autograd(v) for k, v in kwargs.items()}
        fn = entry.kernel_for(device_type)
        out = entry.call(fn, args, kwargs)
        if entry.check_aliasing:
            _check_aliasing(entry.qualname, fn, (*args, *kwargs.values()), out)
        return out

    return kernel


def _storage_key(t):
    s = t.untyped_storage()
    return (s.device.type, s.data_ptr()) if s.nbytes() else None


def _check_aliasing(qualname, fn, inputs, out) -> None:
    """PyTorch's rule for custom_op kernels: an output shares no storage with an input or another
    output (autograd and functionalization assume fresh results)."""
    from ember._src.tensor import Tensor

    def tensors(x):
        if isinstance(x, Tensor):
            yield x
        elif isinstance(x, (tuple, list)):
            for y in x:
                yield from tensors(y)

    seen = {k for t in tensors(inputs) if (k := _storage_key(t)) is not None}
    for t in tensors(out):
        key = _storage_key(t)
        if key is None:
            continue
        if key in seen:
            name = qualname.split("::", 1)[1]
            raise RuntimeError(
                f"{name} (with implementation in {getattr(fn, '__module__', fn)!r}): The output of this custom "
                "operator (1) must not also be an input to this custom operator and (2) may not alias any inputs "
                "to this custom operator or other returns. The most common way to trigger this error is if we have "
                "y = custom_op(x) and y and x are the same Tensor. Please instead return a clone of the offending "
                "output tensor(s) (e.g. return x.clone()) or refactor the custom operator to not return y.")
        seen.add(key)


def _meta_kernel(entry: OpEntry):
    def meta(*args, **kwargs):
        fn = entry.fake or entry.composite
        if fn is None:
            if not entry.schema.returns:
                return None  # an op that only writes its inputs: nothing to describe
            raise RuntimeError(
                f"There was no fake impl registered for {entry.qualname}. This is necessary for ember.compile/"
                "ember.export/fake tensors to work. Please use ember.library.register_fake to add a fake impl.")
        return entry.call(fn, args, kwargs)

    return meta


def _materialize(grads, outputs):
    out = []
    for g, o in zip(grads, outputs):
        if g is None and isinstance(o, ember.Tensor):
            g = ember.zeros_like(o)
        out.append(g)
    return out


class BackwardContext:
    """The ``ctx`` of ``register_autograd``'s ``setup_context`` and ``backward``."""

    def __init__(self, n_inputs: int, needs):
        self.saved_tensors = ()
        self.needs_input_grad = needs
        self._n = n_inputs

    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value: bool):
        pass


def _formula(entry: OpEntry):
    def backward(grads, inputs, outputs):
        full = entry.schema.bind(tuple(inputs.args), dict(inputs.kwargs))
        n_passed = len(inputs.args)
        if entry.backward is not None:
            needs = tuple(isinstance(a, ember.Tensor) and a.requires_grad for a in full)
            ctx = BackwardContext(len(full), needs)
            output = outputs[0] if len(outputs) == 1 and not entry.schema._tuple_return else tuple(outputs)
            if entry.setup_context is not None:
                # as PyTorch: ``inputs`` are the positional arguments; keyword-only ones come apart
                pos, kw = entry.schema.split(full)
                if kw:
                    entry.setup_context(ctx, tuple(pos), output, keyword_only_inputs=kw)
                else:
                    entry.setup_context(ctx, tuple(pos), output)
            got = entry.backward(ctx, *_materialize(grads, outputs))
            got = (got,) if not isinstance(got, (tuple, list)) else tuple(got)
            n_positional = sum(not a.kwarg_only for a in entry.schema.arguments)
            if len(got) != n_positional:
                raise RuntimeError(f"{entry.qualname}: the registered backward returned {len(got)} gradients, "
                                   f"expected {n_positional} (one per positional input, None for non-tensors)")
            return list(got[:n_passed])
        if entry.composite is not None:
            from ember._higher_order_ops.cond import subgraph_vjp

            def rerun(*xs):
                out = entry.call(entry.composite, xs, {})
                return out if isinstance(out, (tuple, list)) else (out,)

            return subgraph_vjp(rerun, list(full), grads)[:n_passed]
        raise RuntimeError(
            f"Trying to backward through {entry.qualname.replace('::', '.')}.default but no autograd formula was "
            "registered. Please use register_autograd to add one.")

    return backward


def create_op(qualname: str, schema: FunctionSchema, tags=()) -> OpEntry:
    """Declares the ember op ``qualname`` with ``schema`` and its dispatch adapters."""
    if "::" not in qualname:
        raise ValueError(f"custom op names must look like 'namespace::name', got {qualname!r}")
    ns, name = qualname.split("::", 1)
    if not ns.isidentifier() or not name.isidentifier():
        raise ValueError(f"the namespace and name of {qualname!r} must be Python identifiers")
    if qualname in OPS:
        raise RuntimeError(f"Tried to register an operator ({qualname}) with the same name and overload name "
                           "multiple times.")
    schema.name = qualname
    op = define(schema.text(), tuple(tags) + ("custom",))
    entry = OpEntry(qualname, schema, op)
    for device_type in DEVICE_TYPES:
        op.kernels[device_type] = _device_kernel(entry, device_type)
    op.kernels["meta"] = op.meta = _meta_kernel(entry)
    ENTRIES[qualname] = entry
    from ember.autograd.formulas import FORMULAS, Formula

    FORMULAS[qualname] = Formula(qualname, _formula(entry), save_output=True)
    _register_vmap(entry)
    return entry


def _register_vmap(entry: OpEntry) -> None:
    from ember.func import batching

    def rule(op, level, args, kwargs):
        if entry.vmap is None:
            return batching.loop_fallback(op, level, args, kwargs)
        return entry.vmap(op, level, args, kwargs)

    batching.BATCH_RULES[entry.qualname] = rule


def destroy(qualname: str) -> None:
    """Removes a custom op (``Library._destroy``): its op, formula and batching rule."""
    from ember.autograd.formulas import FORMULAS
    from ember.func import batching

    ENTRIES.pop(qualname, None)
    OPS.pop(qualname, None)
    FORMULAS.pop(qualname, None)
    batching.BATCH_RULES.pop(qualname, None)
    from ember.compiler._op_facts import META_CACHE, OP_INFO

    for op in [k for k in OP_INFO if getattr(k, "name", None) == qualname]:
        del OP_INFO[op]
    META_CACHE.clear()


def _below_autograd(value):
    if isinstance(value, Tensor) and value._requires_grad:
        return value.detach()
    if type(value) in (list, tuple) and any(isinstance(v, Tensor) and v._requires_grad for v in value):
        return type(value)(_below_autograd(v) for v in value)
    return value
