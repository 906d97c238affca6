"""Every collective in a world of one rank (``init_process_group`` with world_size=1, as a
single-GPU/CPU script run without a launcher does), values and the errors of bad calls; the
same report on ember and on PyTorch's gloo."""

from prelude import dist, encode, error_of, init, torch, write

rank, world = init()
R = {}
R["world"] = [rank, world, dist.is_initialized(), dist.get_backend()]

for name in ("float32", "float64", "int32", "int64", "uint8", "bool"):
    dtype = getattr(torch, name)
    t = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    for op in ("SUM", "MAX", "MIN", "PRODUCT"):
        if name == "bool" and op != "MAX":
            continue
        x = t.clone()
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
        R[f"all_reduce/{name}/{op}"] = encode(x)
x = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
dist.all_reduce(x)
R["all_reduce/noncontig"] = encode(x)
x = torch.arange(4.0)
dist.all_reduce(x, op=dist.ReduceOp.AVG)
R["all_reduce/avg"] = encode(x)
x = torch.tensor([5, 3], dtype=torch.int64)
dist.all_reduce(x, op=dist.ReduceOp.BAND)
R["all_reduce/band"] = encode(x)

b = torch.arange(3.0)
dist.broadcast(b, src=0)
dist.reduce(b, dst=0)
R["broadcast_reduce"] = encode(b)
out = [torch.zeros(3)]
dist.all_gather(out, torch.arange(3.0))
R["all_gather"] = encode(out)
agt = torch.zeros(4)
dist.all_gather_into_tensor(agt, torch.arange(4.0))
R["all_gather_into_tensor"] = encode(agt)
gl = [torch.zeros(2)]
dist.gather(torch.ones(2), gl, dst=0)
R["gather"] = encode(gl)
sc = torch.zeros(2)
dist.scatter(sc, [torch.full((2,), 7.0)], src=0)
R["scatter"] = encode(sc)
rs = torch.zeros(3)
dist.reduce_scatter(rs, [torch.arange(3.0)])
R["reduce_scatter"] = encode(rs)
rst = torch.zeros(2)
dist.reduce_scatter_tensor(rst, torch.arange(2.0))
R["reduce_scatter_tensor"] = encode(rst)
a2a = [torch.zeros(2)]
dist.all_to_all(a2a, [torch.ones(2)])
R["all_to_all"] = encode(a2a)
single = torch.zeros(3, dtype=torch.int64)
dist.all_to_all_single(single, torch.arange(3))
R["all_to_all_single"] = encode(single)
objs = [None]
dist.all_gather_object(objs, {"r": rank})
R["all_gather_object"] = objs
bol = [{"a": 1}, 2]
dist.broadcast_object_list(bol, src=0)
R["broadcast_object_list"] = bol
dist.barrier()
w = dist.all_reduce(torch.ones(2), async_op=True)
R["async"] = [w.wait(), w.is_completed(), encode(w.get_future().wait())]
w = dist.all_reduce(torch.ones(2), async_op=True)
chained = w.get_future().then(lambda f: f.value()[0] * 2)
w.wait()  # waiting on the work completes its future and runs the callbacks
R["future/after_work_wait"] = [w.get_future().done(), chained.done(), encode(chained.wait())]
R["monitored_barrier"] = error_of(lambda: dist.monitored_barrier())

# bad calls
R["err/broadcast_src"] = error_of(lambda: dist.broadcast(torch.ones(2), src=1))
R["err/all_gather_len"] = error_of(lambda: dist.all_gather([torch.zeros(2), torch.zeros(2)], torch.ones(2)))
R["err/agt_size"] = error_of(lambda: dist.all_gather_into_tensor(torch.zeros(3), torch.ones(2)))
R["err/rst_size"] = error_of(lambda: dist.reduce_scatter_tensor(torch.zeros(3), torch.ones(2)))
R["err/scatter_len"] = error_of(lambda: dist.scatter(torch.zeros(2), [torch.ones(2)] * 2, src=0))
R["err/scatter_missing"] = error_of(lambda: dist.scatter(torch.zeros(2), [], src=0))
R["err/gather_len"] = error_of(lambda: dist.gather(torch.zeros(2), [torch.ones(2)] * 2, dst=0))
R["err/reduce_scatter_len"] = error_of(lambda: dist.reduce_scatter(torch.zeros(2), [torch.ones(2)] * 2))
R["err/send_self"] = error_of(lambda: dist.send(torch.ones(2), dst=0))
R["err/group_rank"] = error_of(lambda: dist.get_global_rank(dist.group.WORLD, 3))
R["new_group"] = dist.get_process_group_ranks(dist.new_group([0]))

dist.destroy_process_group()
R["after_destroy"] = dist.is_initialized()
write(rank, R)
