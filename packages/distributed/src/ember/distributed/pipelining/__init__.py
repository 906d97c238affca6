"""``ember.distributed.pipelining``: pipeline parallelism (PyTorch's ``torch.distributed.pipelining``).

A model is cut into stages (``PipelineStage`` around each rank's piece, or ``pipeline()`` with
``SplitPoint``s on an ``nn.Sequential``); a schedule (``ScheduleGPipe``, ``Schedule1F1B``) splits
each batch into microbatches and runs their forwards and backwards across the stages, passing
activations forward and their gradients back with point-to-point messages.
"""

from ._schedules import PipelineScheduleSingle, Schedule1F1B, ScheduleGPipe
from ._split import Pipe, SplitPoint, pipe_split, pipeline
from ._stage import PipelineStage

__all__ = ["Pipe", "PipelineScheduleSingle", "PipelineStage", "Schedule1F1B", "ScheduleGPipe", "SplitPoint",
           "pipe_split", "pipeline"]
