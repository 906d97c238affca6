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
