"""``ember.onnx.export``: an exported program translated op by op to an ONNX model.

The model is captured with ``ember.export.export`` (in eval mode, as ``torch.onnx.export``
does by default), in-place ops on fresh values are rewritten out of place, and each node
is translated through the table in ``_translations*.py``. Weights become initializers,
dynamic dims become named symbolic dims, and ``onnx.checker.check_model(full_check=True)``
runs before anything is returned or written.
"""

from __future__ import annotations

import copy
import operator
import os

import numpy as np

import ember
import onnx
from ember._src.dispatch import Op
from ember.compiler._graph_build import _set_grad_enabled
from ember.compiler._lazy import _detach as _lazy_detach
from ember.export import _functionalize
from ember.export._program import node_shape_dtype
from ember.export._ranges import as_expr
from ember.export._signature import InputKind, OutputKind, TensorArgument
from onnx import numpy_helper

from . import (  # noqa: F401 - they fill the table
    _translations_control,
    _translations_nn,
    _translations_pointwise,
    _translations_reductions,
    _translations_resample,
    _translations_shape,
)
from ._builder import NUMPY_DTYPES, Builder, UnsupportedOp, make_model, onnx_dtype, value_info
from ._inplace import translate_inplace
from ._translations import TRANSLATIONS

DEFAULT_OPSET = 18


def _is_tensor_node(node) -> bool:
    shape, _ = node_shape_dtype(node)
    return shape is not None


def translate_program(ep, input_names=None, output_names=None, opset_version=None,
                      dim_names: dict | None = None, *, weights: str = "embed") -> onnx.ModelProto:
    """An ONNX model computing ``ep``'s user outputs from its user inputs. ``weights``: the
    parameters, buffers and lifted constants are initializers (``"embed"``) or graph inputs after
    the user inputs, named by their state-dict key, with no transposed copy of them folded
    (``"inputs"``, PyTorch's ``export_params=False``)."""
    if weights not in ("embed", "inputs"):
        raise ValueError(f"weights must be 'embed' or 'inputs', got {weights!r}")
    opset = opset_version or DEFAULT_OPSET
    if opset < 18:
        # As PyTorch's exporter: translate at opset 18, then convert down (a warning and opset 18
        # where ONNX's version converter cannot).
        model = translate_program(ep, input_names, output_names, 18, dim_names, weights=weights)
        return _convert_down(model, opset)
    from ember.export._decompose import without_composites

    ep = without_composites(ep)
    graph = copy.deepcopy(ep.graph)
    _functionalize.rewrite_inplace_ops(graph)
    sig = ep.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    specs = dict(zip([n.name for n in placeholders], sig.input_specs))
    # number/None user inputs are constants of the program: no ONNX input (as PyTorch's exporter)
    original_names = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    kept = [i for i, n in enumerate(placeholders) if isinstance(specs[n.name].arg, TensorArgument)]
    placeholders = [placeholders[i] for i in kept]
    original_names = [original_names[i] for i in kept]
    dim_names = dict(dim_names or {})
    user_nodes = [n for n in placeholders if specs[n.name].kind is InputKind.USER_INPUT]
    names = list(input_names or [])
    # The program's own placeholder names: the copy renames one that shadows a builtin (input -> input_1).
    original = dict(zip(placeholders, original_names))
    names += [original[n] for n in user_nodes[len(names):]]
    if len(names) != len(user_nodes):
        raise ValueError(f"input_names has {len(names)} names for {len(user_nodes)} inputs")
    sources = {}
    for node, name in zip(user_nodes, names):
        shape, _ = node_shape_dtype(node)
        for d, s in enumerate(shape or ()):
            e = as_expr(s)
            if not isinstance(e, int) and e.is_Symbol and e not in sources:
                sources[e] = (name, d)
    b = Builder(opset, sources)
    onnx_inputs = []
    state = {**ep.state_dict, **ep.constants}
    for node in placeholders:
        spec = specs[node.name]
        if spec.kind is InputKind.USER_INPUT:
            name = names[user_nodes.index(node)]
            shape, dtype = node_shape_dtype(node)
            if shape is None:
                raise UnsupportedOp(f"the non-tensor input {node.name} cannot be an ONNX input")
            onnx_inputs.append(value_info(name, dtype, shape, dim_names))
            b.names[node] = name
        else:
            tensor = state[spec.target]
            b.initializers.append(numpy_helper.from_array(tensor.detach().contiguous().numpy(), spec.target))
            b.names[node] = spec.target
            if weights != "embed":
                b.unfoldable.add(spec.target)
    b.owner = ep.graph_module
    translate_nodes(b, graph)
    out_node = next(n for n in graph.nodes if n.op == "output")
    outputs = out_node.args[0] if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    user_outs = [o for o, s in zip(outputs, sig.output_specs)
                 if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
    out_names = list(output_names or [])
    out_names += [f"output_{i}" if i else "output" for i in range(len(out_names), len(user_outs))]
    onnx_outputs = []
    for o, name in zip(user_outs, out_names):
        if not hasattr(o, "op"):
            if type(o) not in _CONSTANT_OUTPUT_DTYPES:
                raise UnsupportedOp(f"the constant output {o!r} cannot be an ONNX output")
            # A Python number the model returns (x.shape[0] of a static size): a 0-d constant
            # output, as PyTorch's exporter writes it.
            dtype = _CONSTANT_OUTPUT_DTYPES[type(o)]
            constant = numpy_helper.from_array(np.asarray(o, dtype=NUMPY_DTYPES[dtype]))
            _name_output(b, b.emit("Constant", [], value=constant), name)
            onnx_outputs.append(value_info(name, dtype, (), dim_names))
            continue
        _name_output(b, b.value(o), name)
        shape, dtype = node_shape_dtype(o)
        onnx_outputs.append(value_info(name, dtype, shape, dim_names))
    model = make_model(b, onnx_inputs, onnx_outputs)
    if weights == "inputs":
        _state_initializers_as_inputs(model, b.unfoldable)
    if b.folds:  # which initializers are transposed weights: ONNXProgram.apply_weights redoes them
        import json

        onnx.helper.set_model_props(model, {_FOLDS_KEY: json.dumps(b.folds)})
    onnx.checker.check_model(model, full_check=True)
    return model


_FOLDS_KEY = "ember.folded_transposes"


def _state_initializers_as_inputs(model, names: set) -> None:
    """Moves the initializers named ``names`` to graph inputs."""
    graph = model.graph
    kept = []
    for init in graph.initializer:
        if init.name in names:
            graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        else:
            kept.append(init)
    del graph.initializer[:]
    graph.initializer.extend(kept)


_CONSTANT_OUTPUT_DTYPES = {bool: ember.bool, int: ember.int64, float: ember.float32}


def _convert_down(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``model`` (opset 18) at ``opset``, or as it is with a warning when that fails."""
    import warnings

    from onnx import version_converter

    try:
        converted = version_converter.convert_version(model, opset)
        onnx.checker.check_model(converted, full_check=True)
    except Exception as exc:  # noqa: BLE001 - the converter raises many types; any means "keep 18"
        warnings.warn(f"Failed to convert the model to the target version {opset} using the ONNX C API. "
                      f"The model was not modified (opset 18): {type(exc).__name__}: {exc}", UserWarning,
                      stacklevel=3)
        return model
    return converted


def translate_nodes(b: Builder, graph) -> None:
    """Translates every node of ``graph`` but its placeholders (named in ``b.names`` already) and output."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "get_attr":
            continue  # a subgraph: read by the cond / while_loop translation
        if node.op != "call_function":
            raise UnsupportedOp(f"{node.op} nodes ({node.name}) have no ONNX translation")
        if node.target is operator.getitem:
            parts = b.names[node.args[0]]
            part = parts[node.args[1]] if isinstance(parts, list) else None
            if part is None and not node.users:
                continue  # an unused result (batch-norm statistics, pooling indices)
            if part is None:
                raise UnsupportedOp(f"output {node.args[1]} of {node.args[0].name} has no ONNX translation")
            b.names[node] = part
            continue
        name = getattr(node.target, "name", None)
        if _functionalize.mutated_inputs(node):
            try:
                translate_inplace(b, node, order)
            except UnsupportedOp as exc:
                raise UnsupportedOp(f"{exc} (node {node.name}{_where(node)})") from None
            continue
        if node.target is _set_grad_enabled:
            continue
        if node.target is _lazy_detach:  # Tensor.detach() recorded as a Python call: the same values
            if node.users:
                b.names[node] = b.value(node.args[0])
            continue
        if node.target in _UNBACKED_SIZES:
            _UNBACKED_SIZES[node.target](b, node)
            continue
        if not _is_tensor_node(node) and not isinstance(node.meta.get("val"), (list, tuple)):
            if isinstance(node.target, Op):
                raise UnsupportedOp(f"ember.ops.{name} (node {node.name}) has no tensor metadata to translate")
            continue  # a symbolic size: computed where a translation needs it (Builder.sym)
        fn = TRANSLATIONS.get(name)
        if fn is None:
            raise UnsupportedOp(f"ember.ops.{name} has no ONNX translation (node {node.name}"
                                f"{_where(node)}); ember.onnx cannot export this model")
        try:
            b.names[node] = fn(b, node)
        except UnsupportedOp as exc:
            raise UnsupportedOp(f"cannot translate ember.ops.{name} (node {node.name}{_where(node)}): {exc}") from None

def _size_operand(b: Builder, value) -> str:
    return b.const(np.array([value], dtype=np.int64)) if isinstance(value, int) else b.sym(as_expr(value))


def _item_size(b: Builder, node) -> None:
    """``item`` of an int tensor (an unbacked size ``u0``): its value as a 1-element int64 tensor,
    which ``Builder.sym`` then reads for ``u0`` (the range checks, ``_assert_scalar``, are not
    written: PyTorch's ONNX export drops them too)."""
    value = b.emit("Cast", [b.value(node.args[0])], to=onnx.TensorProto.INT64)
    b._sym_cache[node.meta["val"].node] = b.emit("Reshape", [value, b.const(np.array([1], dtype=np.int64))])


def _clamped_slice_index(b: Builder, node) -> None:
    """``clamp_slice_index(index, size)``: ``Max(index + size, 0)`` for a negative index, else
    ``Min(index, size)`` (a new unbacked size)."""
    index, size = (_size_operand(b, a) for a in node.args)
    zero = b.const(np.array([0], dtype=np.int64))
    negative = b.emit("Less", [index, zero])
    wrapped = b.emit("Max", [b.emit("Add", [index, size]), zero])
    b._sym_cache[node.meta["val"].node] = b.emit("Where", [negative, wrapped, b.emit("Min", [index, size])])


def _unbacked_sizes() -> dict:
    from ember.compiler._unbacked_export import clamp_slice_index, item

    return {item: _item_size, clamp_slice_index: _clamped_slice_index}


_UNBACKED_SIZES = _unbacked_sizes()


def translate_subgraph(b: Builder, sub, input_names: list, graph_name: str, output_names: list | None = None):
    """An ONNX GraphProto computing ``sub`` (a cond/while_loop subgraph) whose placeholders are
    ``input_names`` (values of the enclosing graph, or the body's own inputs), for If/Loop."""
    graph = copy.deepcopy(sub.graph)
    _functionalize.rewrite_inplace_ops(graph)
    child = b.child(sub)
    for node, name in zip([n for n in graph.nodes if n.op == "placeholder"], input_names):
        child.names[node] = name
    translate_nodes(child, graph)
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = out_node.args[0] if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    names, infos = [], []
    for i, o in enumerate(outs):
        name = (output_names[i] if output_names else None) or b.fresh(f"{graph_name}_out")
        child.nodes.append(onnx.helper.make_node("Identity", [child.value(o)], [name], name=b.fresh("node_out")))
        _, dtype = node_shape_dtype(o)
        infos.append(onnx.helper.make_tensor_value_info(name, onnx_dtype(dtype), None))
        names.append(name)
    return child, names, infos


def _name_output(b, value: str, name: str) -> None:
    """Makes graph output ``name`` hold ``value``: renames the producing node's result when it is
    ours and unclaimed, else adds an Identity."""
    producer = next((n for n in b.nodes if value in n.output), None)
    # renaming would miss the reads inside If/Loop subgraphs: an Identity is safe there
    nested = any(n.op_type in ("If", "Loop") for n in b.nodes)
    if producer is not None and not nested and not any(value == o for o in getattr(b, "_claimed", ())):
        for n in b.nodes:
            for k, i in enumerate(n.input):
                if i == value:
                    n.input[k] = name
            for k, o in enumerate(n.output):
                if o == value:
                    n.output[k] = name
        for key, v in list(b.names.items()):
            if v == value:
                b.names[key] = name
        b._claimed = getattr(b, "_claimed", ()) + (name,)
        return
    b.nodes.append(onnx.helper.make_node("Identity", [value], [name], name=b.fresh("node_output")))


def _where(node) -> str:
    trace = node.meta.get("stack_trace")
    if not trace:
        return ""
    last = str(trace).strip().splitlines()[-2:] if str(trace).strip() else []
    return f", from {' '.join(s.strip() for s in last)}" if last else ""


class ONNXProgram:
    """An exported ONNX model (PyTorch's ``torch.onnx.ONNXProgram``): save it or run it in ONNX Runtime."""

    def __init__(self, model: onnx.ModelProto, exported_program=None):
        self.model = model
        self.exported_program = exported_program
        self._session = None

    @property
    def model_proto(self) -> onnx.ModelProto:
        return self.model

    def save(self, destination, *, include_initializers: bool = True, keep_initializers_as_inputs: bool = False,
             external_data: bool | None = None) -> None:
        data = self.model.SerializeToString()
        if isinstance(destination, (str, os.PathLike)):
            from ember.serialization._atomic import atomic_write

            with atomic_write(destination) as f:
                f.write(data)
        else:
            destination.write(data)

    def initialize_inference_session(self, initializer=None):
        import onnxruntime

        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(self.model.SerializeToString(), opts,
                                                     providers=["CPUExecutionProvider"])

    def release(self) -> None:
        self._session = None

    def __call__(self, *args, **kwargs):
        """Runs the model in ONNX Runtime on ember tensors; returns ember tensors."""
        import ember

        if self._session is None:
            self.initialize_inference_session()
        from ember.export import _pytree

        flat, _ = _pytree.tree_flatten((args, kwargs))
        feeds = {i.name: (x.numpy() if hasattr(x, "numpy") else x) for i, x in zip(self._session.get_inputs(), flat)}
        return [ember.from_numpy(o.copy()) for o in self._session.run(None, feeds)]

    def optimize(self) -> None:
        """Accepted: ember's translation already folds constants and transposed weights."""

    def apply_weights(self, state_dict: dict) -> None:
        """Replaces the initializers named in ``state_dict`` (parameter and buffer names) with its
        values, and the transposed copies ember folded from them."""
        import json

        import numpy as np

        props = {p.key: p.value for p in self.model.metadata_props}
        folds = json.loads(props.get(_FOLDS_KEY, "{}"))
        arrays = {k: (v.detach().contiguous().numpy() if hasattr(v, "detach") else np.asarray(v))
                  for k, v in state_dict.items()}
        for init in self.model.graph.initializer:
            value = arrays.get(init.name)
            if value is None and init.name in folds:
                source, perm = folds[init.name]
                if source in arrays:
                    value = np.ascontiguousarray(np.transpose(arrays[source], perm))
            if value is not None:
                if tuple(value.shape) != tuple(init.dims):
                    raise ValueError(f"apply_weights: {init.name} has shape {tuple(init.dims)}, the state dict "
                                     f"gives {tuple(value.shape)}")
                dtype = numpy_helper.to_array(init).dtype
                init.CopyFrom(numpy_helper.from_array(value.astype(dtype, copy=False), init.name))
        self._session = None

    def rename_axes(self, rename_mapping: dict) -> None:
        """Renames symbolic dims (``{"s0": "batch"}``) of the graph's inputs, outputs and values."""
        graph = self.model.graph
        for info in list(graph.input) + list(graph.output) + list(graph.value_info):
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in rename_mapping:
                    dim.dim_param = str(rename_mapping[dim.dim_param])
        self._session = None

    def call_reference(self, *args, **kwargs):
        """Runs the model with ONNX's reference evaluator (``onnx.reference``); returns ember tensors."""
        import ember
        from ember.export import _pytree
        from onnx.reference import ReferenceEvaluator

        flat, _ = _pytree.tree_flatten((args, kwargs))
        names = [i.name for i in self.model.graph.input]
        feeds = {n: (x.numpy() if hasattr(x, "numpy") else x) for n, x in zip(names, flat)}
        return [ember.from_numpy(o.copy()) for o in ReferenceEvaluator(self.model).run(None, feeds)]

    def compute_values(self, value_names, args=(), kwargs=None):
        """The values named ``value_names`` (graph outputs or intermediate values) for these inputs."""
        import ember
        from ember.export import _pytree

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        present = {o.name for o in model.graph.output}
        for name in value_names:
            if name not in present:
                model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
        import onnxruntime

        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        flat, _ = _pytree.tree_flatten((args, kwargs or {}))
        feeds = {i.name: (x.numpy() if hasattr(x, "numpy") else x) for i, x in zip(session.get_inputs(), flat)}
        return [ember.from_numpy(o.copy()) for o in session.run(list(value_names), feeds)]

    def __repr__(self) -> str:
        return f"ONNXProgram(model=<{len(self.model.graph.node)} nodes, opset {self.model.opset_import[0].version}>)"
