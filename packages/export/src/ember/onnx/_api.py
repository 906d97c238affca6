"""``ember.onnx.export`` (PyTorch's ``torch.onnx.export``, dynamo-style: from an exported program)."""

from __future__ import annotations

import contextlib
import enum

from ember.export import Dim, ExportedProgram
from ember.export import export as export_program

from ._exporter import ONNXProgram, translate_program


class TrainingMode(enum.IntEnum):
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2

    def __str__(self) -> str:
        return f"TrainingMode.{self.name}"


class OperatorExportTypes(enum.IntEnum):
    """Accepted for programs written for the TorchScript exporter; ember always writes standard ONNX."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3

    def __str__(self) -> str:
        return f"OperatorExportTypes.{self.name}"


_IN_EXPORT = [0]


def is_in_onnx_export() -> bool:
    """True while ``export`` traces the model (a model's forward may branch on it, as with PyTorch)."""
    return _IN_EXPORT[0] > 0


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
           report: bool = False, optimize: bool = True, verify: bool = False,
           operator_export_type=OperatorExportTypes.ONNX, custom_opsets=None, export_modules_as_functions=False,
           autograd_inlining: bool = True, custom_translation_table=None, profile: bool = False,
           dump_exported_program: bool = False, artifacts_dir=".", fallback: bool = False,
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
    # PyTorch's dynamo exporter reports its stages on stdout unless verbose=False (programs print them)
    say = _stage_printer(dynamo and verbose is not False)
    if isinstance(model, ExportedProgram):
        ep = model
    else:
        was_training = model.training
        if training == TrainingMode.EVAL:
            model.eval()
        elif training == TrainingMode.TRAINING:
            model.train()
        from ember.nn.modules import _recurrence

        _IN_EXPORT[0] += 1
        _recurrence.SYMBOLIC_STEPS[0] += 1  # LSTM/GRU time dims stay dynamic, as in torch's legacy exporter
        try:
            if dynamic_axes is not None:
                dynamic_shapes = _dynamic_shapes_from_axes(model, args, kwargs, input_names, dynamic_axes)
            first_line = repr(model).split("\n", 1)
            with say(f"Obtain model graph for `{first_line[0]}{'[...]' if len(first_line) > 1 else ''}` with "
                     "`torch.export.export(..., strict=False)`"):
                ep = export_program(model, args, kwargs, dynamic_shapes=dynamic_shapes)
        finally:
            _IN_EXPORT[0] -= 1
            _recurrence.SYMBOLIC_STEPS[0] -= 1
            model.train(was_training)
    dim_names = getattr(ep, "_dim_names", {})
    # export_params=False: the legacy exporter (and the dynamo one with keep_initializers_as_inputs)
    # makes the weights graph inputs; the dynamo one alone leaves them out, inputs and initializers
    # both, for the caller to attach later.
    with say("Run decompositions"):
        pass  # (the translation below decomposes as it goes)
    with say("Translate the graph into ONNX"):
        model_proto = translate_program(ep, input_names, output_names, opset_version, dim_names,
                                        weights="embed" if export_params else "inputs")
    if optimize:
        with say("Optimize the ONNX graph"):
            pass  # (ember writes the graph without the redundancies PyTorch's optimizer removes)
    if not export_params and dynamo and not keep_initializers_as_inputs:
        _drop_state_inputs(model_proto, ep)
    if keep_initializers_as_inputs:
        # the legacy exporter's other constants are Constant nodes, not initializers: only the
        # module's parameters and buffers become inputs there
        _initializers_as_inputs(model_proto, None if dynamo else set(ep.state_dict) | set(ep.constants))
    program = ONNXProgram(model_proto, ep)
    if f is not None:
        program.save(f)
    return program


def _stage_printer(enabled: bool):
    """``say(stage)``: a context that prints ``[torch.onnx] <stage>...`` and then ``... ✅`` (or ``... ❌``
    when the stage raises), as PyTorch's dynamo exporter does; nothing when not ``enabled``."""

    @contextlib.contextmanager
    def say(stage: str):
        if not enabled:
            yield
            return
        print("[torch.onnx]", f"{stage}...")
        try:
            yield
        except BaseException:
            print("[torch.onnx]", f"{stage}... \u274c")
            raise
        print("[torch.onnx]", f"{stage}... \u2705")

    return say


def _drop_state_inputs(model, ep) -> None:
    """The dynamo path's ``export_params=False``: the weights are neither initializers nor inputs
    (PyTorch's ``ONNXProgram.save(include_initializers=False)``); they must be attached to the
    model before it runs."""
    state = set(ep.state_dict) | set(ep.constants)
    kept = [value for value in model.graph.input if value.name not in state]
    del model.graph.input[:]
    model.graph.input.extend(kept)


def _initializers_as_inputs(model, state=None) -> None:
    """``keep_initializers_as_inputs=True``: every initializer (of ``state``'s names, when given)
    is also a graph input (a default a caller may override), as PyTorch's exporters write them."""
    from onnx import helper

    present = {i.name for i in model.graph.input}
    for init in model.graph.initializer:
        if init.name not in present and (state is None or init.name in state):
            model.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
