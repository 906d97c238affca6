"""``pipeline()``: cutting a model into stages (PyTorch's ``torch.distributed.pipelining.pipeline``).

Any module is traced into a graph and cut at ``split_spec`` (``{"layers.2": SplitPoint.BEGINNING}``)
or at the ``pipe_split()`` calls in its forward. ember-distributed may not import the tracer
(ember-export sits beside it), so the tracer is a hook:

- ``register_pipeline_tracer(name, fn)`` registers one in this process, and
- a distribution may advertise one in its pyproject (ember-export does)::

      [project.entry-points."ember.pipelining.tracers"]
      export = "ember.export._pipeline:split_module"

``fn(module, args, kwargs, split_spec, split_policy, marker)`` traces ``module`` on one
microbatch and cuts its graph before the first op of a ``split_spec`` module marked
``"BEGINNING"``, after the last op of one marked ``"END"`` and at every call of ``marker`` (the
op ``pipe_split()`` records). It returns a dict of plain data: ``stages`` (one module per stage
holding only the parameters and buffers it reads, under their names in ``module``; its forward
takes the values named in ``inputs[i]`` and returns a tuple of those named in ``outputs[i]``),
``model_inputs`` (the names of the model's tensor inputs: positional, then keyword),
``model_outputs`` (the names of its flat outputs), ``unflatten`` (flat outputs -> the forward's
output structure) and ``graph`` (the traced graph, for ``Pipe.info()``).

Values go only from a stage to the next: a value a later stage reads (a skip connection over
several stages, a keyword argument of the model) is passed along by the stages in between,
and its gradient comes back the same way. With no tracer installed, an ``nn.Sequential`` is
still cut by child names (each stage an ``nn.Sequential`` of its children).
"""

from __future__ import annotations

import enum
from collections import namedtuple

from ember import nn
from ember._src.dispatch import OPS, define

from ._stage import PipelineStage


class SplitPoint(enum.Enum):
    BEGINNING = 1
    END = 2


def _pipe_split_kernel():
    return None


# A marker op: traced into the graph (tag "side_effect" keeps it there), a no-op when run eagerly.
if "pippy::_pipe_split" not in OPS:
    _PIPE_SPLIT = define("pippy::_pipe_split() -> ()", ("side_effect",), meta=_pipe_split_kernel,
                         differentiable=False)
    for _device in ("cpu", "meta", "cuda"):
        _PIPE_SPLIT.kernels[_device] = _pipe_split_kernel
else:
    _PIPE_SPLIT = OPS["pippy::_pipe_split"]


def pipe_split() -> None:
    """Marks a stage boundary in a forward that ``pipeline()`` traces; does nothing when run eagerly."""
    return _PIPE_SPLIT()


_TRACERS: dict = {}
TRACER_GROUP = "ember.pipelining.tracers"


def register_pipeline_tracer(name: str, tracer) -> None:
    """Makes ``tracer`` (the contract in this module's docstring) the one ``pipeline()`` uses."""
    if not callable(tracer):
        raise TypeError(f"a pipeline tracer must be callable, got {type(tracer).__name__}")
    _TRACERS[name] = tracer


def _find_tracer():
    if _TRACERS:
        return next(reversed(_TRACERS.values()))
    from importlib.metadata import entry_points

    for ep in entry_points(group=TRACER_GROUP):
        try:
            tracer = ep.load()
        except ImportError:
            continue
        _TRACERS[ep.name] = tracer
        return tracer
    return None


PipeInfo = namedtuple("PipeInfo", ["graph", "num_stages", "has_loss_and_backward"])


class _Route:
    """Which values stage ``index`` receives, feeds its module, and sends on (names from the tracer)."""

    def __init__(self, index, receives, reads, writes, sends, outputs=None, unflatten=None, model_inputs=None):
        self.index = index
        self.receives = receives  # names of the tensors that arrive from the previous stage, in order
        self.reads = reads  # the stage module's inputs
        self.writes = writes  # the stage module's outputs
        self.sends = sends  # names sent to the next stage, in order
        self.outputs = outputs  # the last stage: the model's flat outputs
        self.unflatten = unflatten
        self.model_inputs = model_inputs  # the first stage: the names of the model's inputs

    def run(self, submod, values: dict):
        out = submod(*[values[name] for name in self.reads])
        values.update(zip(self.writes, out))
        return values


def _routes(split: dict) -> list:
    stages = split["stages"]
    n = len(stages)
    made = {name: -1 for name in split["model_inputs"]}
    order = list(split["model_inputs"])
    for s, names in enumerate(split["outputs"]):
        for name in names:
            made[name] = s
            order.append(name)
    last_use = {}
    for s, names in enumerate(split["inputs"]):
        for name in names:
            if name not in made:
                raise RuntimeError(f"pipeline(): stage {s} reads '{name}', which no stage makes")
            last_use[name] = max(last_use.get(name, -1), s)
    for name in split["model_outputs"]:
        last_use[name] = n
    sends = [[name for name in order if made[name] <= s < last_use.get(name, -1)] for s in range(n)]
    routes = []
    for s in range(n):
        routes.append(_Route(s, sends[s - 1] if s else list(split["model_inputs"]), split["inputs"][s],
                             split["outputs"][s], sends[s] if s < n - 1 else [],
                             outputs=split["model_outputs"] if s == n - 1 else None,
                             unflatten=split["unflatten"] if s == n - 1 else None,
                             model_inputs=split["model_inputs"] if s == 0 else None))
    return routes


def _model_values(model_inputs, args, kwargs) -> dict:
    """The model's inputs by their traced names: positional ones in order, keywords by name."""
    kwargs = dict(kwargs or {})
    values = dict(zip(model_inputs, args))
    rest = [name for name in model_inputs[len(args):]]
    for name in rest:
        if name in kwargs:
            values[name] = kwargs.pop(name)
    left = [name for name in rest if name not in values]
    values.update(zip(left, kwargs.values()))
    if len(values) != len(model_inputs) or len(args) + len(kwargs) > len(model_inputs):
        raise TypeError(f"the traced model takes {len(model_inputs)} tensor inputs ({', '.join(model_inputs)}), "
                        f"got {len(args)} positional and {sorted(kwargs)} keyword (the first stage's step() "
                        "takes every input: ember passes those later stages read along the stages)")
    return values


class _SplitModule(nn.Module):
    """``Pipe.split_gm``: the stages ``submod_pp_0``, ``submod_pp_1``, ... run one after another."""

    def __init__(self, stages, routes):
        super().__init__()
        for i, stage in enumerate(stages):
            self.add_module(f"submod_pp_{i}", stage)
        self._routes = routes

    def forward(self, *args, **kwargs):
        values = _model_values(self._routes[0].model_inputs, args, kwargs)
        for i, route in enumerate(self._routes):
            route.run(getattr(self, f"submod_pp_{i}"), values)
        last = self._routes[-1]
        return last.unflatten([values[name] for name in last.outputs])


class Pipe(nn.Module):
    """The stages ``pipeline()`` cut: ``build_stage(i, device)`` gives stage ``i``'s PipelineStage."""

    def __init__(self, split_gm, num_stages: int, routes=None, graph=None):
        super().__init__()
        self.split_gm = split_gm
        self.num_stages = num_stages
        self._routes = routes
        self._graph = graph

    def forward(self, *args, **kwargs):
        return self.split_gm(*args, **kwargs)

    def get_stage_module(self, stage_index: int) -> nn.Module:
        if not 0 <= stage_index < self.num_stages:
            raise ValueError(f"Invalid stage index {stage_index}!")
        return getattr(self.split_gm, f"submod_pp_{stage_index}" if self._routes is not None else str(stage_index))

    def info(self) -> PipeInfo:
        return PipeInfo(graph=self._graph, num_stages=self.num_stages, has_loss_and_backward=False)

    def build_stage(self, stage_index: int, device=None, group=None) -> PipelineStage:
        stage = PipelineStage(self.get_stage_module(stage_index), stage_index, self.num_stages, device, group=group)
        if self._routes is not None:
            stage._route = self._routes[stage_index]
        return stage


def _split_sequential(module, split_spec) -> Pipe:
    names = [name for name, _ in module.named_children()]
    cuts = set()
    for name, point in (split_spec or {}).items():
        if name not in names:
            raise ValueError(f"split_spec names '{name}', which is not a child of the Sequential ({names})")
        index = names.index(name) + (1 if point == SplitPoint.END else 0)
        if 0 < index < len(names):
            cuts.add(index)
    bounds = [0, *sorted(cuts), len(names)]
    children = list(module.children())
    stages = nn.Sequential(*[nn.Sequential(*children[a:b]) for a, b in zip(bounds, bounds[1:])])
    return Pipe(stages, len(stages))


def pipeline(module, mb_args=None, mb_kwargs=None, split_spec=None, split_policy=None) -> Pipe:
    """Traces ``module`` on one microbatch (``mb_args``, ``mb_kwargs``) and cuts it into stages at
    ``split_spec`` and ``pipe_split()`` calls; see the module docstring."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"pipeline() takes an nn.Module, got {type(module).__name__}")
    if split_spec is not None and split_policy is not None:
        raise ValueError("Cannot specify both split_spec and split_policy")
    for name, point in (split_spec or {}).items():
        if not isinstance(point, SplitPoint):
            raise TypeError(f"split_spec['{name}'] must be a SplitPoint, got {point!r}")
    tracer = _find_tracer()
    if tracer is None:
        if isinstance(module, nn.Sequential) and split_policy is None:
            return _split_sequential(module, split_spec)
        raise ImportError(f"pipeline() traces {type(module).__name__} into a graph to cut it, and no tracer is "
                          f"installed: pip install ember-export (it registers one in the '{TRACER_GROUP}' entry "
                          "point group), or cut the model by hand into PipelineStage objects")
    if mb_args is None:
        if isinstance(module, nn.Sequential) and split_policy is None:
            return _split_sequential(module, split_spec)
        raise TypeError("pipeline() needs mb_args, the inputs of one microbatch, to trace the model")
    if not isinstance(mb_args, tuple):
        mb_args = (mb_args,)
    spec = {name: point.name for name, point in (split_spec or {}).items()}
    split = tracer(module, mb_args, dict(mb_kwargs or {}), spec, split_policy, _PIPE_SPLIT)
    routes = _routes(split)
    return Pipe(_SplitModule(split["stages"], routes), len(split["stages"]), routes, split.get("graph"))
