"""DDP training against single-process full-batch training of the same model (every rank checks).

Each rank starts from a different random init (DDP must broadcast rank 0's), trains 5 SGD steps on
its slice of an 8-sample batch, and compares its parameters with a plain model trained on the
whole batch. Scenarios: several buckets, no_sync accumulation, find_unused_parameters, fp16
compression hook, buffer broadcast, the error for an unused parameter without detection.
"""

import dataclasses

from prelude import LIB, dist, error_of, init, torch, write

if LIB == "torch":
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
    from ember.nn.parallel import DistributedDataParallel as DDP

nn = torch.nn
rank, world = init()
R = {}


class Net(nn.Module):
    def __init__(self, with_unused=False):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)
        self.unused = nn.Linear(3, 3) if with_unused else None

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make(seed, with_unused=False):
    torch.manual_seed(seed)
    return Net(with_unused)


torch.manual_seed(1234)
X = torch.randn(8, 4)
Y = torch.randn(8, 3)
per = 8 // world
Xl, Yl = X[rank * per:(rank + 1) * per], Y[rank * per:(rank + 1) * per]


def reference(steps=5):
    model = make(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(X), Y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def train(ddp, micro=False, steps=5):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        if micro:
            half = per // 2
            with ddp.no_sync():
                (nn.functional.mse_loss(ddp(Xl[:half]), Yl[:half]) / 2).backward()
            (nn.functional.mse_loss(ddp(Xl[half:]), Yl[half:]) / 2).backward()
        else:
            nn.functional.mse_loss(ddp(Xl), Yl).backward()
        opt.step()
    return [p.detach().clone() for n, p in ddp.module.named_parameters() if not n.startswith("unused")]


def max_rel(a, b):
    return max(float(((x - y).abs() / (y.abs() + 1e-6)).max()) for x, y in zip(a, b))


def close(a, b, rtol):
    return all(bool(torch.allclose(x, y, rtol=rtol, atol=1e-6)) for x, y in zip(a, b))


ref = reference()
R["basic"] = close(train(DDP(make(rank), bucket_cap_mb=0.0001)), ref, 1e-5)
R["default_buckets"] = close(train(DDP(make(rank))), ref, 1e-5)
R["no_sync"] = close(train(DDP(make(rank)), micro=True), ref, 1e-5)
# gradient_as_bucket_view: the same training; afterwards each .grad is a view into its bucket's
# flat buffer (consecutive parameters of a bucket sit back to back, in reverse order)
as_view = DDP(make(rank), gradient_as_bucket_view=True)
R["bucket_view"] = close(train(as_view), ref, 1e-5)
grads = [p.grad for p in as_view.module.parameters()]
R["bucket_view_layout"] = all(
    g.data_ptr() == h.data_ptr() + h.numel() * h.element_size() for g, h in zip(grads, grads[1:])
)

unused_model = make(rank, with_unused=True)
ddp_unused = DDP(unused_model, find_unused_parameters=True)
R["find_unused"] = close(train(ddp_unused), ref, 1e-5)
R["find_unused_grad_none"] = unused_model.unused.weight.grad is None



class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

    def forward(self, x, use_b):
        h = self.a(x)
        return self.b(h) if use_b else h


# find_unused_parameters with no_sync: a parameter used in an accumulation step (on rank 0 only)
# but not in the synced one still counts as used there: its accumulated gradient is averaged
# and written on every rank, so replicas stay equal (PyTorch's local used map)
branchy = Branchy()
with torch.no_grad():
    for i, p in enumerate(branchy.parameters()):
        p.fill_((i + 1) * 0.1)
ddp_branchy = DDP(branchy, find_unused_parameters=True)
with ddp_branchy.no_sync():
    ddp_branchy(torch.ones(1, 2) * (rank + 1), rank == 0).sum().backward()
ddp_branchy(torch.ones(1, 2), False).sum().backward()
R["no_sync_unused"] = [None if p.grad is None else [round(v * world, 5) for v in p.grad.reshape(-1).tolist()]
                       for p in branchy.b.parameters()]



@dataclasses.dataclass
class Output:  # a model output dataclass (as Hugging Face models return)
    logits: object
    aux: object = None


class WithOutput(Branchy):
    def forward(self, x):
        return Output(self.a(x))


# find_unused_parameters looks into dataclass outputs: a.weight's gradient averaged (sum over
# inputs of rank + 1: 2 * (world + 1)), b unused
with_output = WithOutput()
ddp_output = DDP(with_output, find_unused_parameters=True)
ddp_output(torch.ones(1, 2) * (rank + 1)).logits.sum().backward()
R["dataclass_output"] = [round(with_output.a.weight.grad.sum().item() / (world + 1), 5),
                         with_output.b.weight.grad is None]

fp16 = DDP(make(rank))
fp16.register_comm_hook(None, default_hooks.fp16_compress_hook)
R["fp16_hook"] = close(train(fp16), ref, 2e-2)
if LIB == "ember":  # PyTorch's bf16 hook needs NCCL
    bf16 = DDP(make(rank))
    bf16.register_comm_hook(None, default_hooks.bf16_compress_hook)
    got = train(bf16)
    R["bf16_hook"] = all(bool(torch.allclose(x, y, rtol=5e-2, atol=2e-2)) for x, y in zip(got, ref))

# broadcast_buffers: rank 0's running stats reach every rank at forward
bn_model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
with torch.no_grad():
    bn_model[1].running_mean.fill_(float(rank + 1))
bn = DDP(bn_model)
bn.eval()
bn(Xl)
R["broadcast_buffers"] = bn_model[1].running_mean.tolist()

# a parameter that gets no gradient, without find_unused_parameters: the next forward raises
bad = DDP(make(rank, with_unused=True))
nn.functional.mse_loss(bad(Xl), Yl).backward()
try:
    bad(Xl)
    R["unused_error"] = "none"
except RuntimeError as err:
    R["unused_error"] = ["RuntimeError", "find_unused_parameters=True" in str(err)]
# join(): every rank sees the same batches, rank r trains on the first 2 + r of them. At step s
# the average is (active ranks / world) times that batch's gradient (joined ranks add zeros), and
# at the end every rank holds the model of the rank that trained longest (the last one).
joined = DDP(make(rank))
opt = torch.optim.SGD(joined.parameters(), lr=0.1)
torch.manual_seed(99)
batches = [(torch.randn(2, 4), torch.randn(2, 3)) for _ in range(1 + world)]
with joined.join():
    for xb, yb in batches[:2 + rank]:
        opt.zero_grad()
        nn.functional.mse_loss(joined(xb), yb).backward()
        opt.step()
model = make(0)
ref_opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1 + world):
    active = sum(1 for r in range(world) if step < 2 + r)
    ref_opt.zero_grad()
    (nn.functional.mse_loss(model(batches[step][0]), batches[step][1]) * (active / world)).backward()
    ref_opt.step()
R["join"] = close([p.detach() for p in joined.module.parameters()], [p.detach() for p in model.parameters()], 1e-5)
# the same through the Join context manager (PyTorch's spelling in its uneven-inputs tutorial)
if LIB == "torch":
    from torch.distributed.algorithms.join import Join
else:
    from ember.distributed.algorithms.join import Join
joined = DDP(make(rank))
opt = torch.optim.SGD(joined.parameters(), lr=0.1)
with Join([joined]):
    for xb, yb in batches[:2 + rank]:
        opt.zero_grad()
        nn.functional.mse_loss(joined(xb), yb).backward()
        opt.step()
R["join_context"] = close([p.detach() for p in joined.module.parameters()], [p.detach() for p in model.parameters()],
                          1e-5)
R["join_empty"] = error_of(lambda: Join([]))
# device_ids on a CPU module (the DDP tutorial's GPU spelling) and more than one device id are
# refused before any communication, with PyTorch's ValueError
R["device_id_errors"] = [error_of(lambda: DDP(make(rank), device_ids=[rank])),
                         error_of(lambda: DDP(make(rank), device_ids=[0, 1])),
                         error_of(lambda: DDP(make(rank), output_device=1)),
                         DDP(make(rank), device_ids=[]).device_ids]
dist.barrier()
write(rank, R)
dist.destroy_process_group()
