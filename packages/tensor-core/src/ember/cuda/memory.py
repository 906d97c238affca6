"""``ember.cuda.memory``: the CUDA allocator's statistics (see ``ember.cuda``; without a GPU the
counters read 0 and the statistics are empty, as in PyTorch's CPU build)."""

from ember.cuda import (
                        empty_cache,
                        get_per_process_memory_fraction,
                        max_memory_allocated,
                        max_memory_cached,
                        max_memory_reserved,
                        mem_get_info,
                        memory_allocated,
                        memory_cached,
                        memory_reserved,
                        memory_stats,
                        memory_stats_as_nested_dict,
                        memory_summary,
                        reset_accumulated_memory_stats,
                        reset_max_memory_allocated,
                        reset_max_memory_cached,
                        reset_peak_memory_stats,
                        set_per_process_memory_fraction,
)

__all__ = ["empty_cache", "get_per_process_memory_fraction", "max_memory_allocated", "max_memory_cached",
           "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_cached", "memory_reserved",
           "memory_stats", "memory_stats_as_nested_dict", "memory_summary", "reset_accumulated_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "reset_peak_memory_stats",
           "set_per_process_memory_fraction"]


# The allocator's history recorder and snapshots (the memory visualizer's input): ember's CUDA
# allocator keeps no history, so these raise as PyTorch's build without CUDA does.
def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=9223372036854775807, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None) -> None:
    raise AttributeError("module 'ember._C' has no attribute '_cuda_record_memory_history'")


def _snapshot(device=None, augment_with_fx_traces=False):
    raise AttributeError("module 'ember._C' has no attribute '_cuda_memorySnapshot'")


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False) -> None:
    _snapshot(augment_with_fx_traces=augment_with_fx_traces)
