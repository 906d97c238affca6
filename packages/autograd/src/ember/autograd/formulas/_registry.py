"""The derivative table: one entry per differentiable op, keyed by the op's name.

A backward formula is ``backward(grads, inputs, outputs)``:

- ``grads``: tuple with one gradient per op output (None where that output got no gradient),
- ``inputs``: ``Inputs`` with the op's original ``args`` and ``kwargs`` (tensors restored from
  their saved copies, version-checked),
- ``outputs``: tuple of the op's outputs (only when registered with ``save_output=True``;
  otherwise an empty tuple; ``save_output=(1, 2)`` saves only those outputs and gives None for
  the others, so that writing in place into an unread output leaves the backward valid),

and returns a sequence aligned with the op's *positional* args: a Tensor gradient, None, or
for a ``Tensor[]`` argument (``cat``) a list of Tensor-or-None. Gradients may have the
broadcast shape; the engine sums them down to each input's shape and casts to its dtype.
Formulas are written with ember ops so that ``create_graph=True`` differentiates them again.

A forward-mode rule is ``jvp(tangents, inputs, outputs)`` with ``tangents`` aligned with the
positional args (None where an input has no tangent; a list for ``Tensor[]`` args), returning
the tangent of each output (a Tensor, or a tuple for multi-output ops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class Inputs:
    """The op's ``args`` and ``kwargs`` as a formula sees them (a plain slotted class: one is made
    per backward node, so its construction is on the engine's hot path; the native engine loop,
    csrc/common/autograd_apply.cpp, allocates it and sets the two slots without calling __init__)."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple, kwargs: dict):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"Inputs(args={self.args!r}, kwargs={self.kwargs!r})"


@dataclass
class Formula:
    op_name: str
    backward: Callable
    save_output: bool | tuple = False
    jvp: Callable | None = None
    # For an in-place op whose formula reads self as it was: ``clone_self(args, kwargs)`` says when
    # the recording must save a copy of self before the kernel overwrites it.
    clone_self: Callable | None = None
    # Whether ``backward`` ever reads ``inputs`` (found once from its bytecode by the recording,
    # which saves no input tensors for formulas that do not: add, sub, ...).
    reads_inputs: bool | None = None
    # The formula reads only its tensor inputs' metadata (shape, strides, dtype): the recording saves
    # data-less stand-ins, as PyTorch saves only sizes for views, sum, cat, ..., so writing into an
    # input afterwards (in place) does not invalidate this backward.
    meta_only: bool = False
    # Positions of the tensor arguments of which the formula reads only the metadata (the rest it reads
    # whole): saved as meta_only saves all of them, so that an in-place write into such an input
    # afterwards does not invalidate this backward (embedding's weight, renormalised in place by a later
    # max_norm lookup: PyTorch saves only its row count).
    meta_args: tuple = ()
    # Indices of floating outputs that never get a history (PyTorch's non-differentiable outputs:
    # lstsq's rank and singular values): they are returned without grad_fn and get no tangent.
    nondiff_outputs: tuple = ()


FORMULAS: dict[str, Formula] = {}

# Ops whose outputs never carry gradient (comparisons, argmax, nonzero, factories, ...).
NON_DIFFERENTIABLE: set[str] = set()


def derivative(
    op_name: str, *, save_output: bool | tuple = False, clone_self: Callable | None = None, meta_only: bool = False,
    nondiff_outputs: tuple = (), meta_args: tuple = (),
):
    """Registers the backward formula of ``op_name``."""

    def register(fn: Callable) -> Callable:
        if op_name in FORMULAS:
            raise ValueError(f"derivative for {op_name} registered twice")
        FORMULAS[op_name] = Formula(op_name, fn, save_output, clone_self=clone_self, meta_only=meta_only,
                                    nondiff_outputs=nondiff_outputs, meta_args=meta_args)
        return fn

    return register


def forward_derivative(op_name: str):
    """Registers the forward-mode (JVP) rule of an op whose backward is registered."""

    def register(fn: Callable) -> Callable:
        FORMULAS[op_name].jvp = fn
        return fn

    return register


def non_differentiable(*op_names: str) -> None:
    NON_DIFFERENTIABLE.update(op_names)
