"""``grad_fn._saved_<name>``: the values an op's node saved for backward, read by their schema
argument names (``y.grad_fn._saved_self``, ``_saved_other``, ``_saved_exponent``) and
``_saved_result`` for a saved output, as PyTorch's generated nodes expose them. Reading a saved
tensor unpacks it (a saved-tensor unpack hook runs on every read; a node whose buffers were
freed by backward raises the usual RuntimeError). An argument the node did not save raises
AttributeError, as the attribute is absent from PyTorch's node."""

from __future__ import annotations

from ember._src.optable import Signature

from .graph import SavedTensor

_SIGNATURES: dict = {}
_MISSING = object()


def _params(op_name: str):
    params = _SIGNATURES.get(op_name, _MISSING)
    if params is _MISSING:
        from ember._src.dispatch import OPS

        op = OPS.get(op_name)
        params = None
        if op is not None and getattr(op, "schema", None):
            params = Signature.parse(op.schema).params
        _SIGNATURES[op_name] = params
    return params


def _read(value, node):
    if type(value) is SavedTensor:
        return value.unpack(node)
    if type(value) is list and any(type(v) is SavedTensor for v in value):
        return [v.unpack(node) if type(v) is SavedTensor else v for v in value]
    return value


def saved_attribute(node, name: str):
    """The value of ``node._saved_<name>``, or ``_MISSING``."""
    formula = node._formula
    if formula is None:
        return _MISSING
    if name == "result" or (name.startswith("result") and name[6:].isdigit()):
        index = int(name[6:] or 0)
        outputs = node._saved_outputs
        if outputs and index < len(outputs) and outputs[index] is not None:
            return outputs[index].unpack(node)
        return _MISSING
    params = _params(formula.op_name)
    if params is None:
        return _MISSING
    for i, p in enumerate(params):
        if p.name != name:
            continue
        kwargs = node._kwargs
        if kwargs and name in kwargs:
            value = kwargs[name]
        elif i < len(node._saved_args):
            value = tuple.__getitem__(node._saved_args, i)
        else:
            return _MISSING
        if value is None and p.type.startswith("Tensor") and not p.optional:
            return _MISSING  # a tensor input the formula does not read is not kept
        return _read(value, node)
    return _MISSING
