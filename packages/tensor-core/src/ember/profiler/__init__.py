"""``ember.profiler``: PyTorch's ``torch.profiler`` API on ember's dispatcher.

Every op call made inside ``with profile(...)`` becomes an event named ``aten::<op>`` (PyTorch's
names, so existing filters and sort keys work) with its CPU time, and, when asked, input shapes,
output memory and matmul/conv FLOPs; ``record_function`` adds named ranges; ``schedule`` and
``prof.step()`` pick the steps of a training loop to record; ``tensorboard_trace_handler``
writes Chrome traces. Device kernels are not timed (docs/deviations.md).

Example::

    >>> import ember
    >>> from ember.profiler import profile, record_function
    >>> with profile(record_shapes=True) as prof:
    ...     with record_function("block"):
    ...         y = (ember.ones(8, 8) @ ember.ones(8, 8)).relu()
    >>> [e.key for e in prof.key_averages()][:2]
    ['block', 'aten::matmul']
"""

from ._events import EventList, FunctionEvent, FunctionEventAvg
from ._profile import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)
from ._recorder import record_function

__all__ = [
    "EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction", "ProfilerActivity", "profile",
    "record_function", "schedule", "supported_activities", "tensorboard_trace_handler",
]
