"""Fused Adam/AdamW on CUDA: ``ember._fused_adam_`` / ``_fused_adamw_`` (what ``ember.optim.Adam``
and ``AdamW`` call for their ``fused``/``foreach``/default steps) in one launch for all parameters.

The per-tensor composite the core falls back to issues eight elementwise kernels per parameter
(about 1200 launches for GPT-2's 148 parameters, each paying ember's per-op host cost). Here one
kernel reads param, grad and both moments once and writes param and moments once, in float32
arithmetic for every float dtype. Its work list is a table of chunks (at most CHUNK elements of one
parameter each: the four addresses, the length, and the step size and bias correction of that
parameter's step), built with NumPy on the host and copied to the device ahead of the launch; while
no tensor moves and every parameter is at the same step (the step size then goes in the launch), the
same table serves again, so a step is one launch whatever the parameter count (PyTorch's
multi-tensor apply packs the addresses into the launch arguments instead). One launch per parameter
(the former form) remains for a step inside a CUDA-graph capture, where a copy from pageable host
memory may not be recorded.
The bias corrections are computed on the host from the step counters (CPU tensors, as PyTorch keeps
them), so the launch needs no device-to-host read.

Taken only for the plain case: every tensor a contiguous dense CUDA tensor of the param's dtype,
no amsgrad, no GradScaler state (``grad_scale``/``found_inf``), CPU step counters. Anything else
returns False and the core's composite runs (same equations, PyTorch's results).
"""

from __future__ import annotations

import math
import weakref
from operator import attrgetter, is_, itemgetter, methodcaller

import numpy as np

from ember import _C
from ember._src import dtypes as dt
from ember._src.ops.optim import fused as core_fused
from ember._src.tensor import Tensor

from . import _compile, _fastcall
from ._allocator import allocator
from ._elementwise import _SHAPES, HEADER, TL, TRITON
from ._storage import new_contiguous
from ._streams import current_handle

# One block of the update, shared by both launch forms: loads, float32 arithmetic, stores.
_UPDATE = '''
@triton.jit
def _adam_block(p, g, m, v, i, mask, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt, DECOUPLED: tl.constexpr,
                MAXIMIZE: tl.constexpr):
    pv = tl.load(p + i, mask=mask, eviction_policy="evict_first").to(tl.float32)
    gv = tl.load(g + i, mask=mask, eviction_policy="evict_first").to(tl.float32)
    mv = tl.load(m + i, mask=mask, eviction_policy="evict_first").to(tl.float32)
    vv = tl.load(v + i, mask=mask, eviction_policy="evict_first").to(tl.float32)
    if MAXIMIZE:
        gv = -gv
    if DECOUPLED:
        pv = pv * (1.0 - lr * wd)
    else:
        gv = gv + pv * wd
    mv = mv + (1.0 - beta1) * (gv - mv)
    vv = vv * beta2 + (1.0 - beta2) * gv * gv
    denom = tl.sqrt(vv) / bc2_sqrt + eps
    pv = pv - step_size * (mv / denom)
    tl.store(p + i, pv.to(p.dtype.element_ty), mask=mask, cache_modifier=".cs")
    tl.store(m + i, mv.to(m.dtype.element_ty), mask=mask, cache_modifier=".cs")
    tl.store(v + i, vv.to(v.dtype.element_ty), mask=mask, cache_modifier=".cs")
'''

# One launch per parameter.
_ADAM = HEADER + _UPDATE + '''
@triton.jit
def k(p, g, m, v, n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt, BLOCK: tl.constexpr,
      DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    _adam_block(p, g, m, v, i, i < n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt, DECOUPLED, MAXIMIZE)
'''

# One launch over a table of chunks: row c holds the param, grad and moment addresses of its
# first element, its length (at most CHUNK), and the step size and sqrt(1 - beta2^step) of its
# parameter as float64 bits. __ELEM__: the Triton type of the parameters.
_ADAM_CHUNKS = HEADER + _UPDATE + '''
@triton.jit
def k(table, lr, beta1, beta2, eps, wd, step_size_all, bc2_sqrt_all, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
      DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr, UNIFORM: tl.constexpr):
    row = table + tl.program_id(0).to(tl.int64) * 7
    p = tl.multiple_of(tl.load(row).to(tl.pointer_type(__ELEM__)), 16)
    g = tl.multiple_of(tl.load(row + 1).to(tl.pointer_type(__ELEM__)), 16)
    m = tl.multiple_of(tl.load(row + 2).to(tl.pointer_type(__ELEM__)), 16)
    v = tl.multiple_of(tl.load(row + 3).to(tl.pointer_type(__ELEM__)), 16)
    n = tl.load(row + 4)
    if UNIFORM:  # every parameter at the same step: the launch's scalars
        step_size = step_size_all
        bc2_sqrt = bc2_sqrt_all
    else:
        step_size = tl.load(row + 5).to(tl.float64, bitcast=True).to(tl.float32)
        bc2_sqrt = tl.load(row + 6).to(tl.float64, bitcast=True).to(tl.float32)
    for start in range(0, n, BLOCK):  # a short chunk (a bias, a norm's weight) stops after its own blocks
        i = start + tl.arange(0, BLOCK)
        _adam_block(p, g, m, v, i, i < n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt, DECOUPLED, MAXIMIZE)
'''

_BLOCK, _WARPS = 2048, 8  # the per-parameter kernel
# The chunked kernel: chunks of CHUNK elements, BLOCK at a time by _CHUNK_WARPS warps (module-level so that
# bench_cuda_gpt2_kernels.py --tune can sweep them). GPT-2's 124M float32 parameters on the H200: 0.98 ms a
# step (3.55 TB/s) at (4096, 1024, 4), 1.52 ms at the former (65536, 2048, 8): small programs (4 elements
# of each operand per thread and block) keep more of them resident and end evenly.
CHUNK, _CHUNK_BLOCK, _CHUNK_WARPS = 4096, 1024, 4
_FLOAT = frozenset(("fp16", "bf16", "fp32", "fp64"))
_dense_ptrs, _cpu_scalars = _C._dense_ptrs, _C._cpu_scalars


def _contiguous(t) -> bool:
    expected = 1
    for size, stride in zip(reversed(t._shape), reversed(t._stride)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _launcher(name: str, decoupled: bool, maximize: bool, aligned: bool, index: int):
    ptr = "*" + name
    sig = {"p": ptr, "g": ptr, "m": ptr, "v": ptr, "n": "i64", "lr": "fp32", "beta1": "fp32", "beta2": "fp32",
           "eps": "fp32", "wd": "fp32", "step_size": "fp32", "bc2_sqrt": "fp32", "BLOCK": "constexpr",
           "DECOUPLED": "constexpr", "MAXIMIZE": "constexpr"}
    constexprs = {"BLOCK": _BLOCK, "DECOUPLED": decoupled, "MAXIMIZE": maximize}
    return _compile.kernel(_ADAM, "k", sig, constexprs, ("p", "g", "m", "v") if aligned else (), _WARPS, 1, index)


def _chunk_launcher(dtype, decoupled: bool, maximize: bool, uniform: bool, index: int):
    sig = {"table": "*i64", "lr": "fp32", "beta1": "fp32", "beta2": "fp32", "eps": "fp32", "wd": "fp32",
           "step_size_all": "fp32", "bc2_sqrt_all": "fp32", "CHUNK": "constexpr", "BLOCK": "constexpr",
           "DECOUPLED": "constexpr", "MAXIMIZE": "constexpr", "UNIFORM": "constexpr"}
    source = _ADAM_CHUNKS.replace("__ELEM__", TL[dtype])
    constexprs = {"CHUNK": CHUNK, "BLOCK": _CHUNK_BLOCK, "DECOUPLED": decoupled, "MAXIMIZE": maximize,
                  "UNIFORM": uniform}
    return _compile.kernel(source, "k", sig, constexprs, ("table",), _CHUNK_WARPS, 1, index)


def chunk_table(ptrs, sizes, step_sizes, bc2_sqrts, itemsize: int):
    """The (chunks, 7) int64 work table of the chunked kernel: per parameter (addresses ``ptrs``
    (param, grad, m, v), ``sizes`` elements), its chunks of at most CHUNK elements."""
    ptrs = np.asarray(ptrs, dtype=np.int64).reshape(-1, 4)
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = -(-sizes // CHUNK)
    owner = np.repeat(np.arange(len(sizes)), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    offset = (np.arange(len(owner)) - first) * CHUNK
    table = np.empty((len(owner), 7), dtype=np.int64)
    table[:, :4] = ptrs[owner] + (offset * itemsize)[:, None]
    table[:, 4] = np.minimum(sizes[owner] - offset, CHUNK)
    table[:, 5] = np.asarray(step_sizes, dtype=np.float64)[owner].view(np.int64)
    table[:, 6] = np.asarray(bc2_sqrts, dtype=np.float64)[owner].view(np.int64)
    return table


_TABLES: dict = {}  # key -> (rows, device table): the last few work tables
_TABLES_KEPT = 4


def _device_table(key, chunked, size: int, device, stream, rest=()):
    hit = _TABLES.get(key)
    if hit is not None:
        return hit
    table = chunk_table(*chunked, size)
    on_device = new_contiguous((table.size,), (1,), table.size, dt.int64, device)
    # From pageable memory: the driver stages the bytes before returning, so ``table`` may go.
    _fastcall.memcpy_htod(on_device.data_ptr(), table.ctypes.data, table.nbytes, stream)
    while len(_TABLES) >= _TABLES_KEPT:
        _TABLES.pop(next(iter(_TABLES)))  # the oldest (a freed table's block is reused in stream order)
    _TABLES[key] = (len(table), on_device, rest)
    return _TABLES[key]


# Note [fused Adam plans]: a training loop calls the update with the same parameter list every step, and
# the per-parameter Python of the general path below (operand checks, step counters, addresses: ~1 ms a
# step for GPT-2's 148 parameters on the fake host) was most of its host cost. A plan, made once per
# parameter list (kept by the identity of its tensors), groups the parameters by device and dtype and keeps
# each group's shapes; a step then checks and reads every group's four address lists and the step counters
# in native calls (_C._dense_ptrs, _C._cpu_scalars) and launches once per group, the device work table
# found by those addresses (_TABLES). Anything a plan does not take goes to the general path.
_PLANS: dict = {}  # (len, id of first and last param) -> plan
_PLANS_KEPT = 4
_SHAPE = attrgetter("_shape")
_DEVICE, _DTYPE = attrgetter("_device"), attrgetter("dtype")
_DEREF = methodcaller("__call__")


class _Plan:
    __slots__ = ("params", "groups")

    def __init__(self, params, groups):
        # weak references to the parameters (compared by identity): a plan keeps no model's memory alive
        self.params = tuple(map(weakref.ref, params))
        self.groups = groups  # [(device, dtype, pick or None, shapes)]: pick(list) -> the group's items


def _make_plan(params):
    key = {}
    for i, (device, dtype) in enumerate(zip(map(_DEVICE, params), map(_DTYPE, params))):
        key.setdefault((device, dtype), []).append(i)
    if len(key) > 8:
        return None
    groups = []
    for (device, dtype), idx in key.items():
        if getattr(device, "type", None) != "cuda" or TRITON.get(dtype) not in _FLOAT:
            return None
        if len(idx) == len(params):
            pick = None
        elif len(idx) == 1:
            pick = (lambda i: lambda items: [items[i]])(idx[0])
        else:
            getter = itemgetter(*idx)
            pick = (lambda get: lambda items: list(get(items)))(getter)
        shapes = tuple(map(_SHAPE, params if pick is None else pick(params)))
        groups.append((device, dtype, pick, shapes))
    return _Plan(params, groups)


def _plan_for(params):
    n = len(params)
    key = (n, id(params[0]), id(params[-1]))
    plan = _PLANS.get(key)
    if plan is None or len(plan.params) != n or not all(map(is_, map(_DEREF, plan.params), params)):
        plan = _make_plan(params)
        if plan is None:
            return None
        while len(_PLANS) >= _PLANS_KEPT:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan
    return plan


def adam(params, grads, exp_avgs, exp_avg_sqs, maxes, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
         maximize, grad_scale, found_inf, decoupled) -> bool:
    """Runs the update and returns True, or returns False (nothing written) for a case it does not take."""
    if amsgrad or grad_scale is not None or found_inf is not None:
        return False
    plan = _plan_for(params)
    if plan is None:
        return _adam_general(params, grads, exp_avgs, exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps,
                             maximize, decoupled)
    work = []  # every group checked before anything is launched
    for device, dtype, pick, shapes in plan.groups:
        index = device.index or 0
        if allocator(index).capturing:
            break
        lists = (params, grads, exp_avgs, exp_avg_sqs, state_steps)
        if pick is not None:
            lists = tuple(map(pick, lists))
        ptrs = [_dense_ptrs(items, dtype, device, shapes) for items in lists[:4]]
        if None in ptrs:
            break
        steps = _cpu_scalars(lists[4], False)
        if steps is None:
            break
        work.append((device, dtype, index, shapes, ptrs, steps, lists))
    else:
        lr, beta1, beta2 = float(lr), float(beta1), float(beta2)
        eps, wd = float(eps), float(weight_decay)
        for device, dtype, index, shapes, ptrs, steps, lists in work:
            _launch_planned(device, dtype, index, shapes, ptrs, steps, lists, lr, beta1, beta2, eps, wd,
                            bool(decoupled), bool(maximize))
        return True
    return _adam_general(params, grads, exp_avgs, exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps,
                         maximize, decoupled)


def _launch_planned(device, dtype, index, shapes, ptrs, steps, lists, lr, beta1, beta2, eps, wd, decoupled, maximize):
    """One group of a plan: one launch of the chunked kernel over its work table (plus one launch per
    parameter whose operands are not 16-byte aligned)."""
    stream = current_handle(index)
    size = dtype.itemsize
    uniform = steps.count(steps[0]) == len(steps)
    if uniform:
        step = steps[0]
        step_sizes = lr / (1.0 - beta1 ** step)
        bc2_sqrts = math.sqrt(1.0 - beta2 ** step)
        key = (index, size, CHUNK, shapes, *ptrs)
    else:
        step_sizes = [lr / (1.0 - beta1 ** step) for step in steps]
        bc2_sqrts = [math.sqrt(1.0 - beta2 ** step) for step in steps]
        key = (index, size, CHUNK, shapes, *ptrs, tuple(step_sizes), tuple(bc2_sqrts))
    hit = _TABLES.get(key)
    if hit is None:
        numels = [info[1] if (info := _SHAPES.get(shape)) is not None else math.prod(shape) for shape in shapes]
        per_param = len(shapes)
        chunked, rest = _table_rows(numels, zip(*ptrs), (step_sizes,) * per_param if uniform else step_sizes,
                                    (bc2_sqrts,) * per_param if uniform else bc2_sqrts)
        hit = _device_table(key, chunked, size, device, stream, tuple(rest)) if chunked[1] else (0, None, tuple(rest))
    rows, on_device, rest = hit
    if rows:
        launch = _chunk_launcher(dtype, decoupled, maximize, uniform, index)
        if uniform:
            first, first_bc2 = step_sizes, bc2_sqrts
        else:  # not read by the kernel; the first tabled parameter's, as the general path passes
            i = next(i for i, shape in enumerate(shapes) if i not in rest and math.prod(shape))
            first, first_bc2 = step_sizes[i], bc2_sqrts[i]
        launch((rows, 1, 1), stream, on_device.data_ptr(), lr, beta1, beta2, eps, wd, first, first_bc2)
    if rest:
        name = TRITON[dtype]
        params, grads, exp_avgs, exp_avg_sqs = lists[:4]
        for i in rest:
            _adam_general([params[i]], [grads[i]], [exp_avgs[i]], [exp_avg_sqs[i]], [lists[4][i]], lr, beta1,
                          beta2, wd, eps, maximize, decoupled, force_per_param=name)


def _table_rows(numels, quads, step_sizes, bc2_sqrts):
    """The chunked kernel's work rows: for each parameter with elements, its four operand addresses (param,
    grad, exp_avg, exp_avg_sq), its length and its step terms; the indices of parameters whose operands are
    not 16-byte aligned come back apart (the chunked kernel assumes aligned rows)."""
    chunked, rest = ([], [], [], []), []
    for i, (n, four) in enumerate(zip(numels, quads)):
        if n == 0:
            continue
        if (four[0] | four[1] | four[2] | four[3]) & 15:
            rest.append(i)
            continue
        chunked[0].extend(four)
        chunked[1].append(n)
        chunked[2].append(step_sizes[i])
        chunked[3].append(bc2_sqrts[i])
    return chunked, rest


def _adam_general(params, grads, exp_avgs, exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps, maximize,
                  decoupled, force_per_param=None) -> bool:
    """The update with per-parameter checks (any list the plans do not take), one table launch or one launch per
    parameter inside a CUDA-graph capture; False (nothing written) for a case it does not take."""
    p0 = params[0]
    device, dtype = p0._device, p0.dtype
    name = TRITON.get(dtype)
    if device.type != "cuda" or name not in _FLOAT:
        return False
    steps = []
    layout = Tensor._layout
    for items in (params, grads, exp_avgs, exp_avg_sqs):
        for t in items:  # plain contiguous CUDA tensors of the dtype (4 per parameter and step)
            if not (isinstance(t, Tensor) and t._device is device and t.dtype is dtype):
                return False
            info = _SHAPES.get(t._shape)  # (contiguous strides, numel) of shapes seen before
            if (info is None or info[0] != t._stride) and not _contiguous(t):
                return False
            if getattr(t, "_layout", None) is not layout:
                return False
    for s in state_steps:
        if not isinstance(s, Tensor) or s._device.type != "cpu":
            return False
        steps.append(float(s.item()))
    beta1, beta2 = float(beta1), float(beta2)
    lr, eps, wd = float(lr), float(eps), float(weight_decay)
    index = device.index or 0
    stream = current_handle(index)
    size = dtype.itemsize
    if force_per_param is None and not allocator(index).capturing:
        numels = [info[1] if (info := _SHAPES.get(p._shape)) is not None else p.numel() for p in params]
        operands = zip(params, grads, exp_avgs, exp_avg_sqs)
        quads = ([t._storage._ptr + t._offset * size for t in four] for four in operands)
        chunked, rest = _table_rows(numels, quads, [lr / (1.0 - beta1 ** step) for step in steps],
                                    [math.sqrt(1.0 - beta2 ** step) for step in steps])
        if chunked[1]:
            # Every parameter at one step (the usual case): its step size goes in the launch, and
            # the table (addresses and lengths only) is the same as last step's while no tensor
            # moved, so it stays on the device and no copy is made.
            uniform = len(set(chunked[2])) == 1 and len(set(chunked[3])) == 1
            key = (index, size, CHUNK, tuple(chunked[0]), tuple(chunked[1]))
            if not uniform:
                key += (tuple(chunked[2]), tuple(chunked[3]))
            rows, on_device, _ = _device_table(key, chunked, size, device, stream)
            launch = _chunk_launcher(dtype, bool(decoupled), bool(maximize), uniform, index)
            launch((rows, 1, 1), stream, on_device.data_ptr(), lr, beta1, beta2, eps, wd, chunked[2][0],
                   chunked[3][0])
        params = [params[i] for i in rest]
        grads, exp_avgs = [grads[i] for i in rest], [exp_avgs[i] for i in rest]
        exp_avg_sqs, steps = [exp_avg_sqs[i] for i in rest], [steps[i] for i in rest]
    launchers = {}
    for i, p in enumerate(params):
        n = p.numel()
        if n == 0:
            continue
        g, m, v = grads[i], exp_avgs[i], exp_avg_sqs[i]
        ptrs = [t._storage._ptr + t._offset * size for t in (p, g, m, v)]
        aligned = not ((ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3]) & 15)
        launch = launchers.get(aligned)
        if launch is None:
            launch = launchers[aligned] = _launcher(name, bool(decoupled), bool(maximize), aligned, index)
        step = steps[i]
        step_size = lr / (1.0 - beta1 ** step)
        bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
        launch(((n + _BLOCK - 1) // _BLOCK, 1, 1), stream, *ptrs, n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt)
    return True


def register() -> None:
    core_fused.DEVICE_UPDATES[("adam", "cuda")] = adam
