"""Parallel styles: how one module's parameters are laid out on the tensor-parallel mesh and how its
inputs and outputs are converted (PyTorch's ``ColwiseParallel`` and friends).

Colwise: ``Linear.weight`` Shard(0) (output features), input Replicate -> output Shard(-1).
Rowwise: ``Linear.weight`` Shard(1) (input features), input Shard(-1) -> partial sums, reduced to
the output layout (Replicate: all-reduce; Shard(1): reduce-scatter, for sequence parallelism).
Embeddings go the other way round (colwise shards the embedding dim, rowwise the vocabulary).
"""

from __future__ import annotations

from ember import Tensor, nn

from .._api import replace_parameter
from .._dtensor import DTensor, distribute_tensor
from .._placements import Replicate, Shard


class ParallelStyle:
    src_data_rank = 0

    def _apply(self, module, mesh):
        raise NotImplementedError


def _to_dtensor(x, mesh, layout, desired, use_local):
    if not isinstance(x, Tensor) or (layout is None and not isinstance(x, DTensor)):
        return x
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, (layout,), run_check=False)
    if desired is not None and x.placements != (desired,):
        x = x.redistribute(mesh, (desired,))
    return x.to_local() if use_local else x


def _distribute_param(module, name, mesh, placement, src_data_rank):
    param = module._parameters.get(name)
    if param is None or isinstance(param, DTensor):
        return
    replace_parameter(module, name, distribute_tensor(param.detach(), mesh, [placement], src_data_rank=src_data_rank))


def _replicate_rest(module, mesh, src_data_rank):
    for name in list(module._parameters):
        _distribute_param(module, name, mesh, Replicate(), src_data_rank)


class ColwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = (input_layouts or Replicate(),)
        self.output_layouts = (output_layouts or Shard(-1),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    def _partition(self, module, mesh):
        if isinstance(module, nn.Linear):
            _distribute_param(module, "weight", mesh, Shard(0), self.src_data_rank)
            _distribute_param(module, "bias", mesh, Shard(0), self.src_data_rank)
        elif isinstance(module, nn.Embedding):
            _distribute_param(module, "weight", mesh, Shard(1), self.src_data_rank)
        else:
            raise NotImplementedError(f"ColwiseParallel currently only support nn.Linear and nn.Embedding, got "
                                      f"{type(module).__name__}")

    def _apply(self, module, mesh):
        self._partition(module, mesh)
        layout, desired = self.input_layouts[0], self.desired_input_layouts[0]

        def before(mod, args):
            return tuple(_to_dtensor(a, mesh, layout, desired, False) if i == 0 else a for i, a in enumerate(args))

        def after(mod, args, out):
            return _to_dtensor(out, mesh, None, self.output_layouts[0], self.use_local_output)

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)
        return module


class RowwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = (input_layouts or Shard(-1),)
        self.output_layouts = (output_layouts or Replicate(),)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        if isinstance(module, nn.Linear):
            _distribute_param(module, "weight", mesh, Shard(1), self.src_data_rank)
            _distribute_param(module, "bias", mesh, Replicate(), self.src_data_rank)
            desired = Shard(-1)
        elif isinstance(module, nn.Embedding):
            _distribute_param(module, "weight", mesh, Shard(0), self.src_data_rank)
            desired = Replicate()
        else:
            raise NotImplementedError(f"RowwiseParallel currently only support nn.Linear and nn.Embedding, got "
                                      f"{type(module).__name__}")
        layout = self.input_layouts[0]

        def before(mod, args):
            return tuple(_to_dtensor(a, mesh, layout, desired, False) if i == 0 else a for i, a in enumerate(args))

        def after(mod, args, out):
            return _to_dtensor(out, mesh, None, self.output_layouts[0], self.use_local_output)

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)
        return module


class SequenceParallel(ParallelStyle):
    """Norms and dropout on activations sharded along the sequence dim; parameters replicated."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_dim = sequence_dim
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        _replicate_rest(module, mesh, self.src_data_rank)
        shard = Shard(self.sequence_dim)

        def before(mod, args):
            return tuple(_to_dtensor(a, mesh, shard, shard, False) if i == 0 else a for i, a in enumerate(args))

        def after(mod, args, out):
            return out.to_local() if self.use_local_output and isinstance(out, DTensor) else out

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)
        return module


class PrepareModuleInput(ParallelStyle):
    """Converts positional (and keyword) inputs from ``input_layouts`` to ``desired_input_layouts``."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_output=False):
        self.input_layouts = _as_tuple(input_layouts)
        self.desired_input_layouts = _as_tuple(desired_input_layouts)
        self.input_kwarg_layouts = input_kwarg_layouts or {}
        self.desired_input_kwarg_layouts = desired_input_kwarg_layouts or {}
        self.use_local_output = use_local_output
        if len(self.input_layouts) != len(self.desired_input_layouts):
            raise AssertionError("input_layouts and desired_input_layouts should have same length!")

    def _apply(self, module, mesh):
        def before(mod, args, kwargs):
            args = list(args)
            if len(args) < len(self.input_layouts):
                raise ValueError("module inputs and input_layouts should have same length!")
            for i, (layout, desired) in enumerate(zip(self.input_layouts, self.desired_input_layouts)):
                args[i] = _to_dtensor(args[i], mesh, layout, desired, self.use_local_output)
            for key, layout in self.input_kwarg_layouts.items():
                if key in kwargs:
                    kwargs[key] = _to_dtensor(kwargs[key], mesh, layout, self.desired_input_kwarg_layouts.get(key),
                                              self.use_local_output)
            return tuple(args), kwargs

        module.register_forward_pre_hook(before, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Converts outputs from ``output_layouts`` to ``desired_output_layouts``."""

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.output_layouts = _as_tuple(output_layouts)
        self.desired_output_layouts = _as_tuple(desired_output_layouts)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        def after(mod, args, out):
            single = not isinstance(out, tuple)
            outs = (out,) if single else out
            converted = tuple(_to_dtensor(o, mesh, layout, desired, self.use_local_output)
                              for o, layout, desired in zip(outs, self.output_layouts, self.desired_output_layouts))
            return converted[0] if single else converted

        module.register_forward_hook(after)
        return module


class PrepareModuleInputOutput(ParallelStyle):
    """``PrepareModuleInput`` and ``PrepareModuleOutput`` on one module (``use_local_input``: the
    inputs' ``use_local_output``)."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_input=False, output_layouts,
                 desired_output_layouts, use_local_output=True):
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts, desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def _apply(self, module, mesh):
        self.prepare_module_input._apply(module, mesh)
        self.prepare_module_output._apply(module, mesh)
        return module


def _as_tuple(value):
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)
