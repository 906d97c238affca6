"""``DefaultSavePlanner``/``DefaultLoadPlanner``: PyTorch's planner objects, for their options.

ember plans a checkpoint itself (every rank writes the pieces it owns, ``_save_load``); of the
planners' options only ``allow_partial_load`` changes anything: ``load`` then leaves the entries
the checkpoint does not hold as they are instead of raising."""

from __future__ import annotations


class DefaultSavePlanner:
    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 dedup_replicated_tensors=None, dedup_save_to_lowest_rank: bool = False,
                 enable_plan_caching: bool = False):
        self.flatten_state_dict = flatten_state_dict
        self.flatten_sharded_tensors = flatten_sharded_tensors
        self.dedup_save_to_lowest_rank = dedup_save_to_lowest_rank
        self.enable_plan_caching = enable_plan_caching


class DefaultLoadPlanner:
    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 allow_partial_load: bool = False):
        self.flatten_state_dict = flatten_state_dict
        self.flatten_sharded_tensors = flatten_sharded_tensors
        self.allow_partial_load = allow_partial_load
