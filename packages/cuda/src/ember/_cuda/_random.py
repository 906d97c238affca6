"""The CUDA generator: a counter-based (Philox, Triton's ``tl.rand``/``tl.randn``) stream.

State is (seed, offset): a draw of n values reserves n counters, so results depend only on
the seed and the sequence of draws (reproducible, and independent of launch geometry).
Values differ from PyTorch's CUDA generator; their distributions do not.
"""

from __future__ import annotations

import random as _pyrandom
import threading

from ember._src.dispatch import OPS
from ember._src.ops.random import samplers as rnd
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TRITON
from ._streams import current_handle

_LOCK = threading.Lock()
_STATE = {"seed": 67280421310721, "initial": 67280421310721, "offset": 0}


def manual_seed(seed: int) -> None:
    with _LOCK:
        _STATE["seed"] = _STATE["initial"] = int(seed) & ((1 << 63) - 1)
        _STATE["offset"] = 0


def seed() -> None:
    manual_seed(_pyrandom.getrandbits(63))


def initial_seed() -> int:
    return _STATE["initial"]


def get_rng_state() -> tuple:
    return _STATE["seed"], _STATE["offset"]


def set_rng_state(state) -> None:
    with _LOCK:
        _STATE["seed"], _STATE["offset"] = int(state[0]), int(state[1])


def _take(n: int) -> tuple:
    with _LOCK:
        s, o = _STATE["seed"], _STATE["offset"]
        _STATE["offset"] = o + ((n + 3) // 4) * 4
    return s, o


_SRC = HEADER + '''
@triton.jit
def k(out, n, seed, base, a, b, BLOCK: tl.constexpr, KIND: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    ctr = base + offs
    if KIND == 0:
        r = a + (b - a) * tl.rand(seed, ctr)
    elif KIND == 1:
        r = a + b * tl.randn(seed, ctr)
    else:
        r = (tl.rand(seed, ctr) < a).to(tl.float32)
    tl.store(out + offs, r.to(out.dtype.element_ty), mask=m)
'''


def _draw(self, kind: int, a: float, b: float, generator):
    if generator is not None and getattr(generator, "device", None) is not None and \
            generator.device.type != "cuda":
        raise RuntimeError(f"Expected a 'cuda' device type for generator but found '{generator.device.type}'")
    n = self.numel()
    if n == 0:
        return self
    target = self if self.is_contiguous() else new_empty_tensor(self._shape, self.dtype, self._device)
    s, o = _take(n)
    index = self._device.index or 0
    sig = {"out": "*" + TRITON[self.dtype], "n": "i64", "seed": "i64", "base": "i64", "a": "fp32", "b": "fp32",
           "BLOCK": "constexpr", "KIND": "constexpr"}
    launcher = _compile.kernel(_SRC, "k", sig, {"BLOCK": 1024, "KIND": kind}, (), 4, 1, index)
    launcher(((n + 1023) // 1024, 1, 1), current_handle(index), target.data_ptr(), n, s, o, float(a), float(b))
    if target is not self:
        from ._ops_copy import device_copy

        device_copy(self, target)
    rnd.bump_written(self)
    return self


def _uniform_(self, low=0.0, high=1.0, *, generator=None):
    rnd._check_uniform(self, low, high)
    return _draw(self, 0, low, high, generator)


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    rnd._check_normal(self, mean, std)
    return _draw(self, 1, mean, std, generator)


def _bernoulli_(self, p=0.5, *, generator=None):
    rnd._check_bernoulli_p(self, p)
    return _draw(self, 2, p, 0.0, generator)


def register() -> None:
    OPS["uniform_"].kernels["cuda"] = _uniform_
    OPS["normal_"].kernels["cuda"] = _normal_
    OPS["bernoulli_.float"].kernels["cuda"] = _bernoulli_
