"""``torch.quasirandom``: the (scrambled) Sobol sequence engine.

The direction numbers are Joe and Kuo's (``new-joe-kuo-6.21201``, criterion D(6), up to dimension
21201), taken from SciPy's ``scipy.stats.qmc.Sobol`` with 30 bits, which builds them with the same
recurrence as PyTorch's ``_sobol_engine_initialize_state_``: the unscrambled sequence is PyTorch's
point for point. Points come in Gray-code order; point ``i + 1`` is point ``i`` with the direction
number of the lowest zero bit of ``i`` XOR-ed in.

Scrambling is PyTorch's: a random digital shift (``randint(2, (dim, 30))`` read as bits, least
significant first) and a random lower-triangular binary matrix per dimension (``randint(2, (dim, 30,
30)).tril()`` with its diagonal set to 1) applied to the direction numbers (Owen's linear matrix
scramble), drawn from a generator seeded with ``seed`` (the global one when ``seed`` is None). The
two generators' streams are the same, so a seeded scrambled engine draws PyTorch's points too.
"""

from __future__ import annotations

import numpy as np

import ember

__all__ = ["SobolEngine"]


def _direction_numbers(dimension: int, bits: int) -> np.ndarray:
    """The (dimension, bits) int64 direction numbers, column j scaled by 2**(bits - 1 - j)."""
    try:
        from scipy.stats import qmc
    except ImportError as exc:  # an optional dependency of ember-tensor-core (extra "qmc")
        raise ImportError("ember.quasirandom.SobolEngine needs SciPy (pip install scipy): its "
                          "scipy.stats.qmc.Sobol holds the Joe-Kuo direction numbers") from exc
    engine = qmc.Sobol(dimension, scramble=False, bits=bits)
    sv = np.asarray(engine._sv, dtype=np.int64)  # SciPy keeps them here; no public accessor
    if sv.shape != (dimension, bits):
        raise RuntimeError(f"scipy.stats.qmc.Sobol gave direction numbers of shape {sv.shape}, expected "
                           f"{(dimension, bits)}: this SciPy version is not supported")
    return sv


def _trailing_ones(index: np.ndarray) -> np.ndarray:
    """The position of the lowest zero bit of each (non-negative) index."""
    lowest = ~index & (index + 1)
    return np.log2(lowest.astype(np.float64)).astype(np.int64)


class SobolEngine:
    r"""Draws (scrambled) Sobol sequences of up to 21201 dimensions, as ``torch.quasirandom.SobolEngine``.

    Args:
        dimension (int): the dimensionality of the points, in ``[1, 21201]``.
        scramble (bool, optional): scramble the sequence (Owen's linear matrix scramble with a
            digital shift). Default: ``False``.
        seed (int, optional): the seed of the scrambling's generator; the global generator when
            None. Default: ``None``.

    Example::

        >>> soboleng = ember.quasirandom.SobolEngine(dimension=5)
        >>> soboleng.draw(3)
        tensor([[0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
                [0.5000, 0.5000, 0.5000, 0.5000, 0.5000],
                [0.7500, 0.2500, 0.2500, 0.2500, 0.7500]])
    """

    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension, scramble=False, seed=None):
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}]")
        self.seed = seed
        self.scramble = scramble
        self.dimension = dimension
        state = _direction_numbers(dimension, self.MAXBIT)
        if not self.scramble:
            self.shift = ember.zeros(self.dimension, dtype=ember.long)
        else:
            state = self._scramble(state)
        self.sobolstate = ember.from_numpy(state)
        self.quasi = self.shift.clone(memory_format=ember.contiguous_format)
        # in the default dtype at construction, as PyTorch (a float64 draw's first point is rounded to it)
        self._first_point = (self.quasi / 2**self.MAXBIT).reshape(1, -1)
        self.num_generated = 0

    def _scramble(self, state: np.ndarray) -> np.ndarray:
        g = None
        if self.seed is not None:
            g = ember.Generator()
            g.manual_seed(self.seed)
        shift_bits = ember.randint(2, (self.dimension, self.MAXBIT), generator=g)
        self.shift = ember.mv(shift_bits, ember.pow(2, ember.arange(0, self.MAXBIT)))
        ltm = ember.randint(2, (self.dimension, self.MAXBIT, self.MAXBIT), generator=g).tril().numpy()
        ltm[:, np.arange(self.MAXBIT), np.arange(self.MAXBIT)] = 1
        # new bit (MAXBIT-1-p) of direction number j = parity of (row p of the matrix, read most
        # significant bit first) AND (direction number j): a product over GF(2)
        bits = (state[:, :, None] >> np.arange(self.MAXBIT - 1, -1, -1)) & 1  # (dim, j, k): bit MAXBIT-1-k
        parity = np.matmul(bits.astype(np.float32), ltm.transpose(0, 2, 1).astype(np.float32))  # (dim, j, p)
        weights = np.left_shift(np.int64(1), np.arange(self.MAXBIT - 1, -1, -1, dtype=np.int64))
        return (parity.astype(np.int64) & 1) @ weights

    def _advance(self, n: int, start: int, keep: bool, dtype=None):
        """Steps the state ``n`` points from index ``start``; returns the points (as ``dtype``) when ``keep``."""
        quasi = self.quasi.numpy()
        if n <= 0:
            return np.empty((0, self.dimension), dtype=np.int64) if keep else None
        columns = _trailing_ones(np.arange(start, start + n, dtype=np.int64))
        if columns.max() >= self.MAXBIT:
            raise RuntimeError(f"SobolEngine: at most 2**{self.MAXBIT} points can be generated")
        if not keep:
            total = np.bitwise_xor.reduce(self.sobolstate.numpy()[:, columns], axis=1)
            self.quasi.copy_(ember.from_numpy(quasi ^ total))
            return None
        points = np.bitwise_xor.accumulate(self.sobolstate.numpy()[:, columns].T, axis=0) ^ quasi
        self.quasi = ember.from_numpy(points[-1].copy())
        return points

    def _draw(self, n: int, start: int, dtype) -> ember.Tensor:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}, {self.dimension}]")
        if dtype not in (ember.float32, ember.float64):
            from ember._src.ops._common import type_name

            raise NotImplementedError(f"\"_sobol_engine_draw\" not implemented for '{type_name(dtype)}'")
        points = self._advance(n, start, True)
        scale = np.float64(1.0 / (1 << self.MAXBIT))
        np_dtype = np.float32 if dtype is ember.float32 else np.float64
        return ember.from_numpy(points.astype(np_dtype) * np_dtype(scale))

    def draw(self, n: int = 1, out: ember.Tensor | None = None, dtype: ember.dtype | None = None) -> ember.Tensor:
        r"""The next ``n`` points of the sequence, a tensor of shape ``(n, dimension)``.

        Args:
            n (int, optional): how many points. Default: 1
            out (Tensor, optional): the output tensor (resized to the points' shape)
            dtype (:class:`ember.dtype`, optional): float32 or float64. Default: the default dtype
        """
        if dtype is None:
            dtype = ember.get_default_dtype()
        if self.num_generated == 0:
            if n == 1:
                result = self._first_point.to(dtype)
            else:
                rest = self._draw(n - 1, self.num_generated, dtype)
                result = ember.cat((self._first_point.to(dtype), rest), dim=-2)
        else:
            result = self._draw(n, self.num_generated - 1, dtype)
        self.num_generated += n
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m: int, out: ember.Tensor | None = None, dtype: ember.dtype | None = None) -> ember.Tensor:
        r"""The next ``2**m`` points; the total drawn must stay a power of 2 (the balance properties)."""
        n = 2**m
        total_n = self.num_generated + n
        if not (total_n & (total_n - 1) == 0):
            raise ValueError("The balance properties of Sobol' points require n to be a power of 2. "
                             f"{self.num_generated} points have been previously generated, then: "
                             f"n={self.num_generated}+2**{m}={total_n}. If you still want to do this, please use "
                             "'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self):
        r"""Back to the first point."""
        self.quasi.copy_(self.shift)
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        r"""Skips ``n`` points, as drawing them would."""
        if self.num_generated == 0:
            self._advance(n - 1, self.num_generated, False)
        else:
            self._advance(n, self.num_generated - 1, False)
        self.num_generated += n
        return self

    def __repr__(self):
        fmt_string = [f"dimension={self.dimension}"]
        if self.scramble:
            fmt_string += ["scramble=True"]
        if self.seed is not None:
            fmt_string += [f"seed={self.seed}"]
        return self.__class__.__name__ + "(" + ", ".join(fmt_string) + ")"
