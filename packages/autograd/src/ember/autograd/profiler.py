"""``ember.autograd.profiler``: ``profile`` and ``record_function`` (torch.autograd.profiler), from
the core's op timer (``ember.profiler``)."""

from ember.profiler._events import EventList, FunctionEvent, FunctionEventAvg
from ember.profiler._recorder import profile, record_function

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]
