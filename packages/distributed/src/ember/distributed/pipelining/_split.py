"""``pipeline()`` with ``SplitPoint``: cutting an ``nn.Sequential`` into stages by child names.

PyTorch traces any module into a graph to cut it; ember's distributed layer sits below the
tracer, so ``pipeline()`` cuts sequential containers (whose forward is their children in order)
and refuses other modules with a clear error instead of guessing their data flow.
"""

from __future__ import annotations

import enum

from ember import nn

from ._stage import PipelineStage


class SplitPoint(enum.Enum):
    BEGINNING = 1
    END = 2


def pipe_split() -> None:
    raise RuntimeError("pipe_split() marks a cut inside a traced forward; ember's pipeline() cuts nn.Sequential "
                       "containers: pass split_spec={child name: SplitPoint.BEGINNING} instead")


class Pipe:
    """The stages ``pipeline()`` cut: ``build_stage(i, device)`` gives rank ``i``'s PipelineStage."""

    def __init__(self, stages: list):
        self.stages = stages
        self.num_stages = len(stages)

    def get_stage_module(self, stage_index: int):
        return self.stages[stage_index]

    def build_stage(self, stage_index: int, device=None, group=None) -> PipelineStage:
        return PipelineStage(self.stages[stage_index], stage_index, self.num_stages, device, group=group)


def pipeline(module, mb_args=None, mb_kwargs=None, split_spec=None, split_policy=None) -> Pipe:
    """Cuts ``module`` (an ``nn.Sequential``) before (BEGINNING) or after (END) the named children."""
    if not isinstance(module, nn.Sequential):
        raise TypeError(f"ember's pipeline() cuts nn.Sequential modules (their forward is their children in order), "
                        f"got {type(module).__name__}; build PipelineStage objects by hand for other models")
    if split_policy is not None:
        raise ValueError("split_policy is not supported: give split_spec")
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
    stages = [nn.Sequential(*children[a:b]) for a, b in zip(bounds, bounds[1:])]
    return Pipe(stages)
