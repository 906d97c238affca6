"""FSDP2 (fully_shard) training against single-process full-batch training of the same model.

Every rank builds the same model (same seed), shards it, trains a few steps with an optimizer on
its slice of the batch and compares the gathered parameters with a plain copy trained on the
whole batch. Scenarios: nested fully_shard with Adam, reshard_after_forward False, mixed precision
(bf16 parameters, fp32 reduction), the sharded layout itself, state_dict of DTensors, gradient
accumulation with sync off (set_requires_gradient_sync, set_reshard_after_backward) and explicit
prefetch (set_modules_to_forward/backward_prefetch), unshard(async_op=True).
"""

from prelude import LIB, init, torch, write

if LIB == "torch":
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import DTensor
else:
    from ember.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
    from ember.distributed.tensor import DTensor

nn = torch.nn
rank, world = init()
R = {}


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.LayerNorm(10), nn.Tanh(), nn.Linear(10, 5), nn.Linear(5, 3))


torch.manual_seed(1234)
X = torch.randn(8, 6)
Y = torch.randn(8, 3)
per = 8 // world
Xl, Yl = X[rank * per:(rank + 1) * per], Y[rank * per:(rank + 1) * per]


def train(model, x, y, opt_cls, steps=4, **opt_kw):
    opt = opt_cls(model.parameters(), **opt_kw)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


def full_params(model):
    return [p.full_tensor() if isinstance(p, DTensor) else p.detach() for p in model.parameters()]


def close(a, b, rtol=1e-5, atol=1e-6):
    return all(bool(torch.allclose(x.float(), y.float(), rtol=rtol, atol=atol)) for x, y in zip(a, b))


ref_adam = full_params(train(make(), X, Y, torch.optim.Adam, lr=0.05))
model = make()
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer)
fully_shard(model)
R["is_fsdp_module"] = [isinstance(model, FSDPModule), isinstance(model[0], FSDPModule)]
w = model[0].weight
R["layout"] = [isinstance(w, DTensor), isinstance(w, nn.Parameter), [str(p) for p in w.placements],
               list(w.to_local().shape), list(w.shape)]
# a sharded parameter is a DTensor (its type), flagged as a parameter (isinstance), as in PyTorch
R["param_class"] = [type(w).__name__, type(w) is DTensor, issubclass(type(w), nn.Parameter),
                    [name for name, _ in model.named_parameters()][:2], type(model[0].weight.detach()).__name__]
train(model, Xl, Yl, torch.optim.Adam, lr=0.05)
R["adam_nested"] = close(full_params(model), ref_adam)
R["grad_layout"] = [str(p) for p in model[0].weight.grad.placements]
R["state_dict"] = sorted((k, type(v).__name__ == "DTensor" or isinstance(v, DTensor)) for k, v in
                         model.state_dict().items())

ref_sgd = full_params(train(make(), X, Y, torch.optim.SGD, lr=0.1))
model = fully_shard(make(), reshard_after_forward=False)
R["sgd_keep_gathered"] = close(full_params(train(model, Xl, Yl, torch.optim.SGD, lr=0.1)), ref_sgd)

model = make()
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer, mp_policy=policy)
fully_shard(model, mp_policy=policy)
out = model(Xl)
R["mp_output_dtype"] = str(out.dtype).split(".")[-1]
nn.functional.mse_loss(out.float(), Yl).backward()
R["mp_grad_dtype"] = str(model[0].weight.grad.dtype).split(".")[-1]
train(model, Xl, Yl, torch.optim.SGD, lr=0.1, steps=3)
R["mp_close"] = close(full_params(model), full_params(train(make(), X, Y, torch.optim.SGD, lr=0.1, steps=4)),
                      rtol=5e-2, atol=5e-2)

# Two microbatches per step: the first without gradient sync (and keeping the gathered
# parameters), the last with both back on; explicit prefetch in forward and backward.
ref_accumulate = full_params(train(make(), X, Y, torch.optim.SGD, lr=0.1, steps=2))
model = make()
linears = [layer for layer in model if isinstance(layer, nn.Linear)]
for layer in linears:
    fully_shard(layer)
fully_shard(model)
linears[0].set_modules_to_forward_prefetch([linears[1]])
linears[1].set_modules_to_forward_prefetch([linears[2]])
linears[2].set_modules_to_backward_prefetch([linears[1]])
linears[1].set_modules_to_backward_prefetch([linears[0]])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
half = per // 2
for _ in range(2):
    opt.zero_grad()
    for micro in range(2):
        last = micro == 1
        model.set_requires_gradient_sync(last)
        model.set_reshard_after_backward(last)
        xb, yb = Xl[micro * half:(micro + 1) * half], Yl[micro * half:(micro + 1) * half]
        (nn.functional.mse_loss(model(xb), yb) / 2).backward()
    opt.step()
R["accumulate_no_sync"] = close(full_params(model), ref_accumulate)

handle = linears[0].unshard(async_op=True)
handle.wait()
R["unshard_async"] = [isinstance(linears[0].weight, DTensor), list(linears[0].weight.shape)]
linears[0].reshard()
R["resharded"] = [isinstance(linears[0].weight, DTensor), list(linears[0].weight.to_local().shape)]
write(rank, R)
