"""Every collective on several dtypes and layouts; run on ember and on PyTorch's gloo."""

import warnings

from prelude import LIB, dist, error_of, init, torch, write

rank, world = init()
R = {}
DTYPES = ["float32", "float64", "int32", "int64", "int8", "uint8", "int16", "bool", "float16", "bfloat16",
          "complex64"]


def sample(dtype_name, n=6, shift=0):
    dtype = getattr(torch, dtype_name)
    base = torch.arange(n, dtype=torch.float64) + 3 * rank + shift
    if dtype_name == "bool":
        return (torch.arange(n) % (rank + 2)) == 0
    if dtype_name == "complex64":
        return torch.complex(base.float(), -base.float())
    if dtype_name in ("int8", "uint8"):
        base = base % 7
    return base.to(dtype)


OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
       "BXOR": dist.ReduceOp.BXOR, "AVG": dist.ReduceOp.AVG}

for name in DTYPES:
    for op_name, op in OPS.items():
        x = sample(name)

        def go(x=x, op=op):
            dist.all_reduce(x, op=op)

        err = error_of(go)
        R[f"all_reduce/{name}/{op_name}"] = x if err == "ok" else err

# non-contiguous inputs and outputs
nc = (torch.arange(12, dtype=torch.float32) + rank).reshape(3, 4).t()
dist.all_reduce(nc)
R["all_reduce/noncontig"] = nc
nci = (torch.arange(12) * (rank + 1)).reshape(4, 3)[:, ::2]
dist.all_reduce(nci, op=dist.ReduceOp.MAX)
R["all_reduce/noncontig_int_max"] = nci
scalar = torch.tensor(2.5 + rank)
dist.all_reduce(scalar)
R["all_reduce/scalar"] = scalar
empty = torch.zeros(0)
dist.all_reduce(empty)
R["all_reduce/empty"] = empty

# messages of several MB: the MPI engine moves their storages onto huge pages before the first
# transfer (synchronous fast path, non-contiguous staging, async_op); checked by exact checksums
n_large = 5 * (1 << 20) // 4 + 3
weights = (torch.arange(2 * n_large) % 7).double()


def checksum(t):
    flat = t.reshape(-1).double()
    return [flat.sum().item(), (flat * weights[:flat.numel()]).sum().item(), flat[-1].item()]


big = (torch.arange(n_large) % 1000).float() + rank
dist.all_reduce(big)
R["all_reduce/large"] = checksum(big)
dist.all_reduce(big, op=dist.ReduceOp.MAX)  # again on the same, by now collapsed, storage
R["all_reduce/large_again"] = checksum(big)
big_nc = ((torch.arange(2 * n_large) % 999).float() + 2 * rank).reshape(n_large, 2).t()
dist.all_reduce(big_nc)
R["all_reduce/large_noncontig"] = checksum(big_nc)
big_async = (torch.arange(n_large) % 1000).double() * (rank + 1)
dist.all_reduce(big_async, async_op=True).wait()
R["all_reduce/large_async"] = checksum(big_async)
big_b = (torch.arange(n_large) % 500).float() + rank
dist.broadcast(big_b, src=world - 1)
R["broadcast/large"] = checksum(big_b)

for name in ("float32", "bfloat16", "int64", "bool", "complex64"):
    b = sample(name)
    dist.broadcast(b, src=world - 1)
    R[f"broadcast/{name}"] = b
bnc = (torch.arange(8.0) + rank).reshape(2, 4).t()
dist.broadcast(bnc, src=1)
R["broadcast/noncontig"] = bnc

red = sample("float32")
dist.reduce(red, dst=1)
R["reduce/dst1"] = red if rank == 1 else "skip"
redm = sample("int32")
dist.reduce(redm, dst=0, op=dist.ReduceOp.MIN)
R["reduce/min_dst0"] = redm if rank == 0 else "skip"

for name in ("float32", "float16", "int64", "bool"):
    out = [torch.zeros(2, 3, dtype=getattr(torch, name)) for _ in range(world)]
    dist.all_gather(out, sample(name).reshape(2, 3))
    R[f"all_gather/{name}"] = out
agt = torch.zeros(world * 4)
dist.all_gather_into_tensor(agt, torch.arange(4.0) * (rank + 1))
R["all_gather_into_tensor/flat"] = agt
agt2 = torch.zeros(world * 2, 2, dtype=torch.int32)
dist.all_gather_into_tensor(agt2, torch.full((2, 2), rank, dtype=torch.int32))
R["all_gather_into_tensor/stacked"] = agt2

gl = [torch.zeros(3) for _ in range(world)] if rank == 0 else None
dist.gather(torch.arange(3.0) + 10 * rank, gl, dst=0)
R["gather"] = gl if rank == 0 else "skip"
sc = torch.zeros(2, dtype=torch.int64)
dist.scatter(sc, [torch.full((2,), 5 * i) for i in range(world)] if rank == 1 else None, src=1)
R["scatter"] = sc

rs = torch.zeros(3)
dist.reduce_scatter(rs, [torch.arange(3.0) + i + rank for i in range(world)])
R["reduce_scatter/list"] = rs
rst = torch.zeros(2, dtype=torch.float64)
dist.reduce_scatter_tensor(rst, torch.arange(2.0 * world, dtype=torch.float64) * (rank + 1), op=dist.ReduceOp.MAX)
R["reduce_scatter_tensor/max"] = rst

a2a_out = [torch.zeros(2) for _ in range(world)]
dist.all_to_all(a2a_out, [torch.full((2,), 10.0 * rank + i) for i in range(world)])
R["all_to_all"] = a2a_out
single = torch.zeros(2 * world, dtype=torch.int64)
dist.all_to_all_single(single, torch.arange(2 * world) + 100 * rank)
R["all_to_all_single/even"] = single
# uneven: rank r sends (i + 1) rows to rank i; receives (r + 1) rows from each
in_splits = [i + 1 for i in range(world)]
out_splits = [rank + 1] * world
uneven_in = (torch.arange(sum(in_splits) * 2, dtype=torch.float32) + 1000 * rank).reshape(-1, 2)
uneven_out = torch.zeros(sum(out_splits), 2)
dist.all_to_all_single(uneven_out, uneven_in, out_splits, in_splits)
R["all_to_all_single/uneven"] = uneven_out

# point to point
if rank == 0:
    dist.send(torch.arange(4.0), dst=1)
    got = torch.zeros(2, dtype=torch.int32)
    sender = dist.recv(got, src=1)
    R["p2p"] = [got, sender]
elif rank == 1:
    got = torch.zeros(4)
    sender = dist.recv(got)
    dist.send(torch.tensor([7, 8], dtype=torch.int32), dst=0)
    R["p2p"] = [got, sender]
peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
send_t = torch.full((3,), float(rank))
recv_t = torch.zeros(3)
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send_t, peer_next), dist.P2POp(dist.irecv, recv_t, peer_prev)])
for w in works:
    w.wait()
R["batch_isend_irecv"] = recv_t

# async work
aw = torch.ones(5) * (rank + 1)
work = dist.all_reduce(aw, async_op=True)
work.wait()
R["async/all_reduce"] = [aw, work.is_completed(), work.result()]
fut_t = torch.ones(2)
fut = dist.all_reduce(fut_t, async_op=True).get_future()
R["async/future"] = fut.wait()
dist.barrier()

# object collectives
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank, "text": "x" * (rank + 1)})
R["all_gather_object"] = objs
blist = [rank, "mine", {"k": rank}] if rank == 0 else [None, None, None]
dist.broadcast_object_list(blist, src=0)
R["broadcast_object_list"] = blist
gobj = [None] * world if rank == 0 else None
dist.gather_object(("g", rank), gobj, dst=0)
R["gather_object"] = gobj if rank == 0 else "skip"
sout = [None]
dist.scatter_object_list(sout, [{"to": i} for i in range(world)] if rank == 0 else None, src=0)
R["scatter_object_list"] = sout

if rank == 0:
    dist.send_object_list(["to one", {"n": 3}], dst=1)
elif rank == 1:
    box = [None, None]
    R["recv_object_list"] = [box, dist.recv_object_list(box, src=0)]
ags = torch.zeros(2 * world)
dist.all_gather_single(ags, torch.full((2,), float(rank)))
R["all_gather_single"] = ags
rss = torch.zeros(1)
dist.reduce_scatter_single(rss, torch.arange(float(world)) + rank)
R["reduce_scatter_single"] = rss

# groups
sub = dist.new_group([0, world - 1])
member = rank in (0, world - 1)
R["group/rank"] = [dist.get_rank(sub), dist.get_world_size(sub)] if member else "skip"
NON_MEMBER = dist.GroupMember.NON_GROUP_MEMBER
R["group/non_member"] = [repr(NON_MEMBER), isinstance(NON_MEMBER, int), sub == NON_MEMBER,
                         dist.get_rank(NON_MEMBER), dist.get_world_size(NON_MEMBER),
                         dist.get_rank(int("-100")), dist.get_world_size(int("-100"))]
gt = torch.ones(2) * rank
dist.all_reduce(gt, group=sub)
R["group/all_reduce"] = gt
R["world"] = [dist.get_rank(), dist.get_world_size(), dist.is_initialized()]

# A synchronous collective while an async one is in flight on one rank and finished on the
# others: every rank must still start both in the same form and order (a rank choosing MPI's
# blocking call and another the nonblocking one never matched: a hang).
big = torch.ones(1 << 22)
pending = dist.all_reduce(big, async_op=True)
if rank != 0:
    pending.wait()
    __import__("time").sleep(0.3)
small = torch.tensor([float(rank)])
dist.all_reduce(small)
pending.wait()
R["sync_beside_async"] = [small, float(big[0]), float(big[-1])]

# expanded (stride-0) tensors: gloo reduces and receives into their memory (each location once, so
# the base shows the result); outputs PyTorch copies into, and AVG's in-place division, raise
def gather_into(out, tensor):
    dist.all_gather(out, tensor)
    return out


def expanded_case(fn, shape=(1, 3)):
    base = torch.full(shape, 2.0 + rank)
    err = error_of(lambda: fn(base, base.expand(2, 3)))
    return base if err == "ok" else err


R["expanded/all_reduce"] = expanded_case(lambda b, e: dist.all_reduce(e))
R["expanded/all_reduce_max"] = expanded_case(lambda b, e: dist.all_reduce(e, op=dist.ReduceOp.MAX), (2, 1))
R["expanded/all_reduce_product_async"] = expanded_case(
    lambda b, e: dist.all_reduce(e, op=dist.ReduceOp.PRODUCT, async_op=True).wait())
R["expanded/all_reduce_avg"] = expanded_case(lambda b, e: dist.all_reduce(e, op=dist.ReduceOp.AVG))
# one element expanded: gloo reduces numel elements from its address, past the view (measured with
# torch 2.13), so only the view's own values are compared
scalar = torch.full((1, 3), 2.0 + rank)[0, :1].expand(2, 3)
dist.all_reduce(scalar)
R["expanded/all_reduce_scalar"] = scalar
R["expanded/broadcast"] = expanded_case(lambda b, e: dist.broadcast(e, src=world - 1), (2, 1))
R["expanded/reduce"] = expanded_case(lambda b, e: dist.reduce(e, dst=0))
if rank != 0:  # gloo leaves scratch values on the other ranks at 3 ranks
    R["expanded/reduce"] = "skip"
R["expanded/scatter_out"] = expanded_case(
    lambda b, e: dist.scatter(e, [torch.full((2, 3), 5.0 + r) for r in range(world)] if rank == 0 else None, src=0))
R["expanded/all_gather_in"] = expanded_case(
    lambda b, e: R.__setitem__("expanded/all_gather_in_out", gather_into([torch.zeros(2, 3) for _ in range(world)], e)))
R["expanded/all_gather_out"] = expanded_case(
    lambda b, e: dist.all_gather([torch.zeros(1, 3).expand(2, 3) for _ in range(world)], torch.ones(2, 3)))
R["expanded/agit_out"] = expanded_case(
    lambda b, e: dist.all_gather_into_tensor(torch.zeros(1, 3).expand(2 * world, 3), torch.ones(2, 3)))
R["expanded/rst_out"] = expanded_case(lambda b, e: dist.reduce_scatter_tensor(e, torch.ones(2 * world, 3)))
R["expanded/after"] = expanded_case(lambda b, e: dist.all_reduce(b))


# errors (type names)
R["err/all_gather_len"] = error_of(lambda: dist.all_gather([torch.zeros(2)], torch.zeros(2)))
R["err/all_gather_size"] = error_of(lambda: dist.all_gather([torch.zeros(3)] * world, torch.zeros(2)))
R["err/broadcast_src"] = error_of(lambda: dist.broadcast(torch.zeros(2), src=world + 3))
R["err/send_self"] = error_of(lambda: dist.send(torch.zeros(2), dst=rank))
R["err/not_tensor"] = error_of(lambda: dist.all_reduce([1, 2]))
R["err/new_group_range"] = error_of(lambda: dist.new_group([0, world + 5]))
R["err/new_group_duplicate"] = error_of(lambda: dist.new_group([0, 0, 1]))
R["err/premul_sum"] = error_of(lambda: dist.all_reduce(torch.ones(2), op=dist._make_nccl_premul_sum(2.0)))
R["err/int_op"] = error_of(lambda: dist.all_reduce(torch.ones(2), op=0))
R["err/str_op"] = error_of(lambda: dist.all_reduce(torch.ones(2), op="sum"))
try:
    dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.AVG)
except RuntimeError as err:
    R["err/int_avg_message"] = str(err)
R["err/agit_size"] = error_of(lambda: dist.all_gather_into_tensor(torch.zeros(3), torch.zeros(2)))
R["err/init_twice"] = error_of(lambda: dist.init_process_group("gloo"))
R["err/a2a_split_sum"] = error_of(
    lambda: dist.all_to_all_single(torch.zeros(4), torch.ones(4), [1] * world, [4] * world))
R["err/a2a_split_count"] = error_of(lambda: dist.all_to_all_single(torch.zeros(4), torch.ones(4), [1] * (world + 1)))
# the default group's rank translations are the identity, unchecked (PyTorch's shortcut)
R["world_rank_identity"] = [dist.get_global_rank(dist.group.WORLD, world + 6),
                            dist.get_group_rank(dist.group.WORLD, world + 6)]


def message_of(fn):
    try:
        fn()
    except ValueError as err:
        return str(err)
    return "ok"


# new_subgroups: no default size without CUDA; PyTorch's messages
R["new_subgroups/default"] = message_of(lambda: dist.new_subgroups())
R["new_subgroups/too_big"] = message_of(lambda: dist.new_subgroups(group_size=world + 1))
R["new_subgroups/zero"] = message_of(lambda: dist.new_subgroups(group_size=0))
R["new_subgroups/indivisible"] = message_of(lambda: dist.new_subgroups(group_size=2)) if world % 2 else "skip"
# PyTorch 2.13 deprecates all_gather_into_tensor/reduce_scatter_tensor for the *_single names
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    dist.all_gather_into_tensor(torch.zeros(2 * world), torch.ones(2))
    dist.reduce_scatter_tensor(torch.zeros(1), torch.ones(world))
    dist.all_gather_single(torch.zeros(2 * world), torch.ones(2))
    dist.reduce_scatter_single(torch.zeros(1), torch.ones(world))
R["deprecations"] = [(w.category.__name__, str(w.message)) for w in caught if "deprecated" in str(w.message)]

# torch.distributed.nn.functional: collectives autograd differentiates (outputs and input gradients)
if LIB == "torch":
    import torch.distributed.nn.functional as DF
else:
    import ember.distributed.nn.functional as DF
weight = torch.arange(3.0) - 1.5


def differentiated(name, fn, outputs=True):
    x = (torch.arange(3.0 * world).reshape(world, 3) + 10 * rank).requires_grad_()
    ys = fn(x)
    ys = ys if isinstance(ys, tuple) else (ys,)
    sum(((y * weight * (i + 1 + rank)).sum() for i, y in enumerate(ys)), torch.tensor(0.0)).backward()
    R[f"nn/{name}"] = [list(ys) if outputs else None, x.grad]


differentiated("all_reduce", lambda x: DF.all_reduce(x))
differentiated("all_gather", lambda x: DF.all_gather(x))
differentiated("broadcast", lambda x: DF.broadcast(x, src=world - 1))
differentiated("reduce", lambda x: DF.reduce(x, dst=0), outputs=rank == 0)  # gloo writes into the others
differentiated("reduce_scatter", lambda x: DF.reduce_scatter(torch.zeros(3), list(x * (rank + 1))))
differentiated("gather", lambda x: DF.gather(x, dst=world - 1))
differentiated("scatter", lambda x: DF.scatter([x * (i + 1) for i in range(world)], src=0))
differentiated("all_to_all", lambda x: DF.all_to_all([torch.zeros(3) for _ in range(world)], list(x)))
differentiated("all_to_all_single", lambda x: DF.all_to_all_single(torch.zeros(world, 3), x))
dist.barrier()
write(rank, R)
dist.destroy_process_group()
R2 = error_of(lambda: dist.get_rank())
write(rank, {**R, "err/after_destroy": R2})
