"""``ember.distributed.pipelining``: pipeline parallelism (PyTorch's ``torch.distributed.pipelining``).

A model is cut into stages (``PipelineStage`` around each rank's piece, or ``pipeline()`` with
``SplitPoint``s on an ``nn.Sequential``); a schedule (``ScheduleGPipe``, ``Schedule1F1B``; with
several stages per rank ``ScheduleInterleaved1F1B``, ``ScheduleLoopedBFS``) splits
each batch into microbatches and runs their forwards and backwards across the stages, passing
activations forward and their gradients back with point-to-point messages.
"""

from ._schedules import (
    PipelineScheduleMulti,
    PipelineScheduleSingle,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleLoopedBFS,
)
from ._split import Pipe, SplitPoint, pipe_split, pipeline, register_pipeline_tracer
from ._stage import PipelineStage

__all__ = ["Pipe", "PipelineScheduleMulti", "PipelineScheduleSingle", "PipelineStage", "Schedule1F1B",
           "ScheduleGPipe", "ScheduleInterleaved1F1B", "ScheduleLoopedBFS", "SplitPoint", "pipe_split", "pipeline",
           "register_pipeline_tracer"]
