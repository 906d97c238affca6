"""``ember.func``: functional module calls (the function transforms are not provided)."""

from ember.nn.utils.stateless import functional_call_dicts as functional_call

__all__ = ["functional_call"]
