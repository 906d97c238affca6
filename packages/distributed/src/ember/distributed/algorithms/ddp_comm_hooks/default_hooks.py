"""The built-in DDP comm hooks: plain averaging, and averaging in float16/bfloat16 to halve traffic.

A hook is ``hook(process_group, bucket) -> Future`` whose value is the bucket's flat buffer
holding the averaged gradients. ``process_group`` is the state passed to ``register_comm_hook``
(None means the default group).
"""

from __future__ import annotations

import ember

from ... import _collectives as C
from ..._world import resolve

__all__ = ["allreduce_hook", "bf16_compress_hook", "bf16_compress_wrapper", "fp16_compress_hook",
           "fp16_compress_wrapper"]


def allreduce_hook(process_group, bucket):
    """Divides by the world size and sums over the ranks (what DDP does without a hook)."""
    buffer = bucket.buffer()
    buffer.div_(resolve(process_group).size())
    return C.all_reduce(buffer, group=process_group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _compress_hook(dtype, process_group, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(resolve(process_group).size())
    future = C.all_reduce(compressed, group=process_group, async_op=True).get_future()

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer

    return future.then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Averages the gradients in float16 (half the bytes on the wire), then restores their dtype."""
    return _compress_hook(ember.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """Averages the gradients in bfloat16, then restores their dtype."""
    return _compress_hook(ember.bfloat16, process_group, bucket)


def _wrapper(dtype, hook):
    def wrapped(state, bucket):
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(dtype))
        future = hook(state, bucket)

        def restore(fut):
            buffer.copy_(fut.value())
            return buffer

        return future.then(restore)

    return wrapped


def fp16_compress_wrapper(hook):
    """Runs ``hook`` on a float16 copy of the bucket and casts the result back."""
    return _wrapper(ember.float16, hook)


def bf16_compress_wrapper(hook):
    """Runs ``hook`` on a bfloat16 copy of the bucket and casts the result back."""
    return _wrapper(ember.bfloat16, hook)
