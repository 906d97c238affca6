"""``ember.autograd.profiler_util``: the profiler's event classes (torch.autograd.profiler_util)."""

from ember.profiler._events import EventList, FunctionEvent, FunctionEventAvg, Interval

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval"]
