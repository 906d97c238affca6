"""FSDP2's policies: mixed precision and (on a CPU-only engine, trivial) offloading."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """``param_dtype``: dtype of the gathered parameters (forward/backward compute);
    ``reduce_dtype``: dtype of the gradient reduce-scatter (default: ``param_dtype``);
    ``output_dtype``: cast of the module's floating-point outputs; ``cast_forward_inputs``:
    cast floating-point inputs to ``param_dtype``."""

    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading (the default)."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Sharded parameters live on the CPU: with ember's MPI engine they always do."""

    pin_memory: bool = True
