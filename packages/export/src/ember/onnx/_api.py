"""``ember.onnx.export`` (PyTorch's ``torch.onnx.export``, dynamo-style: from an exported program)."""

from __future__ import annotations

import enum

from ember.export import Dim, ExportedProgram
from ember.export import export as export_program

from ._exporter import ONNXProgram, translate_program


class TrainingMode(enum.IntEnum):
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def _dynamic_shapes_from_axes(model, args, kwargs, input_names, dynamic_axes):
    """``dynamic_axes`` ({input name: {axis: dim name} or [axes]}) as a dynamic_shapes tuple."""
    from ember.export._dynamic_shapes import input_names as arg_names

    names = list(input_names or arg_names(model, args, kwargs))
    values = list(args) + list(kwargs.values())
    dims: dict = {}
    out = []
    for i in range(len(values)):
        name = names[i] if i < len(names) else None
        axes = dynamic_axes.get(name) if name is not None else None
        if axes is None:
            out.append(None)
            continue
        if isinstance(axes, (list, tuple)):
            axes = {a: f"{name}_dim_{a}" for a in axes}
        spec = {}
        for axis, dim_name in axes.items():
            key = str(dim_name).replace(" ", "_")
            if not key.isidentifier():
                key = f"d_{abs(hash(key))}"
            if key not in dims:
                dims[key] = Dim(key)
            spec[int(axis)] = dims[key]
        out.append(spec)
    # Axes named for outputs follow from the inputs' dims.
    return tuple(out)


def export(model, args=(), f=None, *, kwargs=None, export_params: bool = True, verbose=None,
           input_names=None, output_names=None, opset_version: int | None = None, dynamic_axes=None,
           keep_initializers_as_inputs: bool = False, dynamic_shapes=None, training=TrainingMode.EVAL,
           do_constant_folding: bool = True, dynamo: bool = True, external_data: bool = True,
           report: bool = False, optimize: bool = False, verify: bool = False,
           **unsupported) -> ONNXProgram:
    """Exports ``model`` to ONNX; writes it to ``f`` (a path or binary file) when given.

    Args:
        model: an ``ember.nn.Module`` or an ``ember.export.ExportedProgram``.
        args: example positional inputs (a tuple; a single tensor is accepted).
        input_names / output_names: names of the graph's inputs and outputs.
        opset_version: the ONNX opset (18 by default; a lower one is converted to with ONNX's
            version converter, or stays 18 with a warning where it cannot be).
        dynamic_axes: ``{input name: {axis: dim name}}`` (or a list of axes): those sizes vary.
        dynamic_shapes: as for ``ember.export.export``; use this or ``dynamic_axes``.

    Returns:
        An :class:`ONNXProgram`; ``onnx.checker.check_model(full_check=True)`` has passed.
    """
    if unsupported:
        raise TypeError(f"export() got unexpected keyword arguments {sorted(unsupported)}")
    if dynamic_axes is not None and dynamic_shapes is not None:
        raise ValueError("give dynamic_axes or dynamic_shapes, not both")
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    if isinstance(model, ExportedProgram):
        ep = model
    else:
        was_training = model.training
        if training == TrainingMode.EVAL:
            model.eval()
        elif training == TrainingMode.TRAINING:
            model.train()
        try:
            if dynamic_axes is not None:
                dynamic_shapes = _dynamic_shapes_from_axes(model, args, kwargs, input_names, dynamic_axes)
            ep = export_program(model, args, kwargs, dynamic_shapes=dynamic_shapes)
        finally:
            model.train(was_training)
    dim_names = getattr(ep, "_dim_names", {})
    model_proto = translate_program(ep, input_names, output_names, opset_version, dim_names)
    program = ONNXProgram(model_proto, ep)
    if f is not None:
        program.save(f)
    return program
