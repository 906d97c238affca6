"""``ember.autograd.profiler``: PyTorch's older profiler entry points.

``profile`` records everything inside its ``with`` block (no schedule); ``record_function`` and
the event classes are ``ember.profiler``'s, so both APIs give the same events and tables.
"""

from ember.profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ember.profiler._profile import LegacyProfile as profile

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]
