"""DDP comm hooks written as PyTorch's documentation and tutorials write them (a ``Future`` built
by hand, ``fut.then(...)``, ``process_group.allreduce(t).get_future()``, ``collect_all``),
``Work.get_future()`` of collectives, and the errors of malformed hooks; one report on ember and
on PyTorch's gloo."""

from prelude import dist, error_of, init, torch, write

nn = torch.nn
DDP = torch.nn.parallel.DistributedDataParallel
rank, world = init()
R = {}


# -- hooks as the tutorials write them ----------------------------------------------------------

def noop(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def allreduce(process_group: dist.ProcessGroup, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    group_to_use = process_group if process_group is not None else dist.group.WORLD
    tensor = bucket.buffer().div_(group_to_use.size())
    return dist.all_reduce(tensor, group=group_to_use, async_op=True).get_future().then(lambda fut: fut.value()[0])


def fp16_compress(process_group, bucket):
    group_to_use = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.float16).div_(group_to_use.size())
    fut = dist.all_reduce(compressed, group=group_to_use, async_op=True).get_future()

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer

    return fut.then(decompress)


def encode_and_decode(process_group, bucket):
    # the DDP docs' example: ProcessGroup.allreduce, then decode in a callback
    encoded = bucket.buffer() * 2.0
    fut = process_group.allreduce(encoded).get_future()

    def decode(fut):
        return fut.value()[0] / (2.0 * process_group.size())

    return fut.then(decode)


def per_parameter(state, bucket):
    # one all_reduce per gradient, combined with collect_all; the calls counted in the state
    state["calls"] += 1
    futures = [dist.all_reduce(g.div(world), async_op=True).get_future() for g in bucket.gradients()]
    return torch.futures.collect_all(futures).then(
        lambda fut: torch.cat([f.value()[0].reshape(-1) for f in fut.value()]))


def chained(state, bucket):
    # then().then() and add_done_callback on the way
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    fut.add_done_callback(lambda f: state["seen"].append(bucket.index()))
    return fut.then(lambda f: f.value()[0]).then(lambda f: f.wait() / world)


def waited(state, bucket):
    # waits itself (wait_all), returns a completed future
    works = [dist.all_reduce(bucket.buffer(), async_op=True)]
    [reduced] = torch.futures.wait_all([w.get_future() for w in works])[0]
    fut = torch.futures.Future()
    fut.set_result(reduced / world)
    return fut


torch.manual_seed(7)
X = torch.randn(8, 6)
Y = torch.randn(8, 2)
per = 8 // world


def model_with(hook=None, state=None, **kwargs):
    torch.manual_seed(3)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)), **kwargs)
    if hook is not None:
        model.register_comm_hook(state, hook)
    return model


def trained(hook=None, state=None, steps=3, **kwargs):
    model = model_with(hook, state, **kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(X[rank * per:(rank + 1) * per]), Y[rank * per:(rank + 1) * per]).backward()
        opt.step()
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


R["train/none"] = trained()
R["train/noop"] = trained(noop)
R["train/allreduce"] = trained(allreduce)
R["train/fp16"] = trained(fp16_compress)
R["train/encode_decode"] = trained(encode_and_decode, dist.group.WORLD)
state = {"calls": 0}
R["train/per_parameter"] = trained(per_parameter, state)
R["per_parameter/calls"] = state["calls"]
state = {"seen": []}
R["train/chained"] = trained(chained, state)
R["chained/seen"] = state["seen"]
R["train/waited"] = trained(waited, {})


# -- malformed hooks: PyTorch's error types -------------------------------------------------------

def returns_tensor(state, bucket):
    return bucket.buffer()


def returns_work_future(state, bucket):  # its value is a list, not a tensor
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future()


def returns_failed(state, bucket):
    fut = torch.futures.Future()
    fut.set_exception(ValueError("hook failed"))
    return fut


def returns_wrong_size(state, bucket):
    fut = torch.futures.Future()
    fut.set_result(torch.zeros(3))
    return fut


def no_bucket_name(state, grads):
    return noop(state, grads)


def bad_bucket_annotation(state, bucket: torch.Tensor):
    return noop(state, bucket)


def bad_return_annotation(state, bucket) -> torch.Tensor:
    return noop(state, bucket)


for name, hook in [("tensor", returns_tensor), ("work_future", returns_work_future), ("failed", returns_failed),
                   ("wrong_size", returns_wrong_size)]:
    R[f"error/{name}"] = error_of(lambda hook=hook: trained(hook, steps=1))
    dist.barrier()  # a rank that failed before its all_reduce: keep the next collectives paired
for name, hook in [("no_bucket_name", no_bucket_name), ("bucket_annotation", bad_bucket_annotation),
                   ("return_annotation", bad_return_annotation), ("not_callable", 3)]:
    R[f"register/{name}"] = error_of(lambda hook=hook: model_with(hook))
twice = model_with(noop)
R["register/twice"] = error_of(lambda: twice.register_comm_hook(None, noop))

# -- Work.get_future() --------------------------------------------------------------------------

work = dist.all_reduce(torch.ones(3) * (rank + 1), async_op=True)
fut = work.get_future()
R["future/all_reduce"] = [t.tolist() for t in fut.wait()]
R["future/done"] = fut.done()  # (not work.is_completed(): gloo may still say False here)
R["future/then"] = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
    lambda f: f.value()[0].sum().item()).wait()
R["future/broadcast"] = [t.tolist() for t in dist.broadcast(torch.ones(2) * rank, 1, async_op=True).get_future().wait()]
outs = [torch.zeros(2) for _ in range(world)]
gathered = dist.all_gather(outs, torch.ones(2) * rank, async_op=True).get_future().wait()
R["future/all_gather"] = [t.tolist() for t in gathered]
R["future/barrier"] = dist.barrier(async_op=True).get_future().wait()
pg = dist.group.WORLD
R["pg/allreduce"] = [t.tolist() for t in pg.allreduce([torch.ones(2) * (rank + 1)]).get_future().wait()]
maxed = pg.allreduce([torch.ones(2) * (rank + 1)], dist.ReduceOp.MAX).get_future().wait()
R["pg/allreduce_op"] = [t.tolist() for t in maxed]
opts = dist.AllreduceOptions()
opts.reduceOp = dist.ReduceOp.MIN
R["pg/allreduce_opts"] = [t.tolist() for t in pg.allreduce([torch.ones(2) * (rank + 1)], opts).get_future().wait()]
sent = pg.broadcast([torch.ones(2) * rank], dist.BroadcastOptions()).get_future().wait()
R["pg/broadcast"] = [t.tolist() for t in sent]
R["pg/broadcast_root"] = [t.tolist() for t in pg.broadcast(torch.ones(2) * rank, 1).get_future().wait()]
outs = [[torch.zeros(2) for _ in range(world)]]
pg.allgather(outs, [torch.ones(2) * rank]).wait()
R["pg/allgather"] = [t.tolist() for t in outs[0]]
pg.barrier().wait()
# futures of several works together
works = [dist.all_reduce(torch.ones(1) * i, async_op=True) for i in range(3)]
R["future/wait_all"] = [v[0].tolist() for v in torch.futures.wait_all([w.get_future() for w in works])]

dist.destroy_process_group()
write(rank, R)
