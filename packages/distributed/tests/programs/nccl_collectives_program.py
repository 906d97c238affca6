"""Every collective on CUDA tensors through NCCL, against the MPI engine's result on CPU tensors
and against the value computed here (any world size; one GPU per rank, ``LOCAL_RANK``).

The group is "cpu:gloo,cuda:nccl": the same call on a CPU tensor runs on MPI, on a CUDA tensor on
NCCL. Each check records True, or a text saying what differed; the test asserts all are True.
"""

import os
import sys
import traceback
from datetime import timedelta

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

from prelude import write  # noqa: E402

import ember as torch  # noqa: E402
import ember.distributed as dist  # noqa: E402

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("cpu:gloo,cuda:nccl", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
DEV = f"cuda:{local}"
R = {"backend": dist.get_backend(), "nccl_available": dist.is_nccl_available()}


def check(name):
    def run(fn):
        try:
            result = fn()
            R[name] = True if result is None else result
        except Exception:  # noqa: BLE001 - the test shows what failed
            R[name] = traceback.format_exc(limit=4)[-1500:]
    return run


def same(cuda_result, cpu_result, rtol=1e-5, atol=1e-6):
    got = cuda_result.cpu()
    if got.dtype != cpu_result.dtype or tuple(got.shape) != tuple(cpu_result.shape):
        return f"dtype/shape {got.dtype}{tuple(got.shape)} vs {cpu_result.dtype}{tuple(cpu_result.shape)}"
    if got.dtype.is_floating_point or got.dtype.is_complex:
        ok = torch.allclose(got, cpu_result, rtol=rtol, atol=atol)
    else:
        ok = torch.equal(got, cpu_result)
    return True if ok else f"{got.tolist()} != {cpu_result.tolist()}"


def both(make, run, rtol=1e-5, atol=1e-6):
    """``run(tensor)`` on a CPU tensor (MPI) and on its CUDA copy (NCCL); compare the results."""
    cpu = make()
    gpu = cpu.to(DEV)
    out_cpu, out_gpu = run(cpu), run(gpu)
    if out_cpu is None:
        out_cpu, out_gpu = cpu, gpu
    if isinstance(out_cpu, (list, tuple)):
        for a, b in zip(out_gpu, out_cpu):
            verdict = same(a, b, rtol, atol)
            if verdict is not True:
                return verdict
        return True
    return same(out_gpu, out_cpu, rtol, atol)


def ramp(n=6, dtype=torch.float32):
    return (torch.arange(n, dtype=torch.float64) + 1 + rank * 0.5).to(dtype)


Op = dist.ReduceOp
for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
    check(f"all_reduce_{op}")(lambda op=op: both(ramp, lambda t: dist.all_reduce(t, op=getattr(Op, op))))
for dtype in ("float64", "int64", "int32", "uint8", "int8"):
    check(f"all_reduce_SUM_{dtype}")(lambda dtype=dtype: both(
        lambda: (torch.arange(5) + rank).to(getattr(torch, dtype)), lambda t: dist.all_reduce(t)))
for dtype in ("float16", "bfloat16"):
    check(f"all_reduce_SUM_{dtype}")(lambda dtype=dtype: both(
        lambda: ramp(8, getattr(torch, dtype)), lambda t: dist.all_reduce(t), rtol=1e-2, atol=1e-2))
check("all_reduce_bool_MAX")(lambda: both(lambda: torch.tensor([rank == 0, False, True]),
                                          lambda t: dist.all_reduce(t, op=Op.MAX)))
check("all_reduce_complex64")(lambda: both(lambda: torch.complex(ramp(4), -ramp(4)), lambda t: dist.all_reduce(t)))
check("all_reduce_noncontiguous")(lambda: both(lambda: ramp(12).reshape(3, 4).t(), lambda t: dist.all_reduce(t)))
check("all_reduce_empty")(lambda: both(lambda: torch.empty(0), lambda t: dist.all_reduce(t)))


@check("all_reduce_premul_sum")
def _():
    expected = sum(torch.arange(7, dtype=torch.float64) + 1 + r * 0.5 for r in range(world)) * 0.25
    for factor in (0.25, torch.tensor(0.25, device=DEV)):
        t = ramp(7).to(DEV)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        verdict = same(t.double(), expected, rtol=1e-6)
        if verdict is not True:
            return verdict
    return True


@check("all_reduce_async_work")
def _():
    t = ramp(1 << 16).to(DEV)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    torch.cuda.synchronize()
    states = [work.is_completed(), work.is_success(), work.exception() is None]
    fut = dist.all_reduce(torch.ones(4, device=DEV), async_op=True).get_future()
    value = fut.wait()[0]
    expected = sum(torch.arange(1 << 16, dtype=torch.float64) + 1 + r * 0.5 for r in range(world)).float()
    if not all(states):
        return f"states {states}"
    return same(t, expected, rtol=1e-5) if same(value, torch.full((4,), float(world))) is True else "future"


@check("all_reduce_wait_timeout_arg")
def _():
    t = torch.ones(3, device=DEV)
    work = dist.all_reduce(t, async_op=True)
    return work.wait(timeout=timedelta(seconds=30)) is True and same(t, torch.full((3,), float(world)))


def _gather(t, dst):
    out = [torch.zeros_like(t) for _ in range(world)] if rank == dst else None
    dist.gather(t, out, dst=dst)
    return out if rank == dst else [t]


def _scatter(t, src):
    pieces = [torch.arange(3, dtype=t.dtype, device=t.device) + 10 * i for i in range(world)] if rank == src else None
    dist.scatter(t, pieces, src=src)


for src in range(world):
    check(f"broadcast_from_{src}")(lambda src=src: both(lambda: ramp(5) * (rank + 1), lambda t: dist.broadcast(t, src)))
    check(f"reduce_to_{src}")(lambda src=src: both(ramp, lambda t: dist.reduce(t, src, op=Op.SUM)))
    check(f"gather_to_{src}")(lambda src=src: both(ramp, lambda t: _gather(t, src)))
    check(f"scatter_from_{src}")(lambda src=src: both(lambda: torch.zeros(3), lambda t: _scatter(t, src)))


def _all_gather(t):
    out = [torch.zeros_like(t) for _ in range(world)]
    dist.all_gather(out, t)
    return out


def _all_gather_into(t):
    out = torch.zeros(world * t.numel(), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(out, t)
    return out


def _reduce_scatter(t, op):
    out = torch.zeros(3, dtype=t.dtype, device=t.device)
    dist.reduce_scatter(out, list(t.reshape(world, 3).unbind(0)), op=op)
    return out


def _reduce_scatter_tensor(t, op):
    out = torch.zeros(3, dtype=t.dtype, device=t.device)
    dist.reduce_scatter_tensor(out, t, op=op)
    return out


def _all_to_all_single(t, uneven):
    if not uneven:
        out = torch.zeros_like(t)
        dist.all_to_all_single(out, t)
        return out
    # rank r sends (r + j + 1) rows to rank j
    in_splits = [rank + j + 1 for j in range(world)]
    out_splits = [j + rank + 1 for j in range(world)]
    src = torch.arange(sum(in_splits) * 2, dtype=t.dtype).reshape(-1, 2).to(t.device) + 100 * rank
    out = torch.zeros(sum(out_splits), 2, dtype=t.dtype, device=t.device)
    dist.all_to_all_single(out, src, out_splits, in_splits)
    return out


def _all_to_all(t):
    ins = [t[i:i + 1].clone() + 10 * i for i in range(world)]
    outs = [torch.zeros(1, dtype=t.dtype, device=t.device) for _ in range(world)]
    dist.all_to_all(outs, ins)
    return outs


check("all_gather")(lambda: both(ramp, _all_gather))
check("all_gather_into_tensor")(lambda: both(ramp, _all_gather_into))
check("all_gather_bfloat16")(lambda: both(lambda: ramp(4, torch.bfloat16), _all_gather_into))
for op in ("SUM", "AVG", "MAX"):
    check(f"reduce_scatter_{op}")(lambda op=op: both(
        lambda: ramp(3 * world), lambda t: _reduce_scatter(t, getattr(Op, op))))
    check(f"reduce_scatter_tensor_{op}")(lambda op=op: both(
        lambda: ramp(3 * world), lambda t: _reduce_scatter_tensor(t, getattr(Op, op))))
check("all_to_all_single")(lambda: both(lambda: ramp(2 * world), lambda t: _all_to_all_single(t, False)))
check("all_to_all_single_uneven")(lambda: both(lambda: ramp(2), lambda t: _all_to_all_single(t, True)))
check("all_to_all")(lambda: both(lambda: ramp(world), _all_to_all))


@check("barrier")
def _():
    dist.barrier()
    nccl_only = dist.new_group(list(range(world)), backend="nccl")
    dist.barrier(group=nccl_only, device_ids=[local])
    return True


if world >= 2:
    peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world

    def _ring(t):
        out = torch.zeros_like(t)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, peer_next), dist.P2POp(dist.irecv, out, peer_prev)])
        for w in works:
            w.wait()
        return out

    def _send_recv(t):
        if rank == 0:
            dist.send(t * 3, dst=1)
            return t
        if rank == 1:
            got = torch.zeros_like(t)
            source = dist.recv(got, src=0)
            return got if source == 0 else None
        return t

    check("batch_isend_irecv_ring")(lambda: both(ramp, _ring))
    check("send_recv")(lambda: both(ramp, _send_recv))

    @check("isend_irecv_async")
    def _():
        t = ramp(4).to(DEV)
        if rank == 0:
            dist.isend(t, dst=1).wait()
            return True
        if rank == 1:
            got = torch.zeros(4, device=DEV)
            dist.irecv(got, src=0).wait()
            return same(got, (torch.arange(4, dtype=torch.float64) + 1).float())
        return True


@check("new_group_and_subgroups")
def _():
    whole = dist.new_group(list(range(world)))
    t = torch.ones(4, device=DEV) * (rank + 1)
    dist.all_reduce(t, group=whole)
    verdict = same(t, torch.full((4,), float(sum(range(1, world + 1)))))
    if verdict is not True:
        return verdict
    mine, _ = dist.new_subgroups_by_enumeration([[r] for r in range(world)])
    u = torch.ones(2, device=DEV) * (rank + 1)
    dist.all_reduce(u, group=mine)  # a group of one: unchanged
    return same(u, torch.full((2,), float(rank + 1)))


@check("nccl_only_group_rules")
def _():
    g = dist.new_group(list(range(world)), backend="nccl")
    problems = []
    try:
        dist.all_reduce(torch.ones(2), group=g)
        problems.append("a CPU tensor on an NCCL-only group did not raise")
    except RuntimeError as err:
        if "No backend type associated with device type cpu" not in str(err):
            problems.append(str(err))
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank}, group=g)
    if objects != [{"rank": r} for r in range(world)]:
        problems.append(f"all_gather_object {objects}")
    for fn, kind in ((lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16, device=DEV), group=g), TypeError),
                     (lambda: dist.all_reduce(torch.ones(2, device=DEV), op=Op.BAND, group=g), ValueError)):
        try:
            fn()
            problems.append(f"no {kind.__name__}")
        except kind:
            pass
    if dist.get_backend(g) != "nccl":
        problems.append(dist.get_backend(g))
    return problems or True


@check("all_reduce_large_side_stream")
def _():
    # 64 MiB through NCCL while the current stream keeps working: the result is the sum.
    t = torch.full((1 << 24,), float(rank + 1), device=DEV)
    work = dist.all_reduce(t, async_op=True)
    other = torch.randn(512, 512, device=DEV) @ torch.randn(512, 512, device=DEV)
    work.wait()
    total = float(sum(range(1, world + 1)))
    return bool((t == total).all().item()) and other.shape == (512, 512)


R["nccl_version"] = list(__import__("ember.distributed._nccl_lib", fromlist=["version"]).version())
dist.destroy_process_group()
write(rank, R)
sys.exit(0)
