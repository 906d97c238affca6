"""nn.SyncBatchNorm over the ranks' slices of a batch against BatchNorm over the whole batch
(every rank checks): outputs, input gradients, summed parameter gradients, running statistics."""

import warnings

from prelude import dist, init, torch, write

nn = torch.nn
rank, world = init()
R = {}

torch.manual_seed(7)
X = torch.randn(4 * world, 3, 5) * 2 + 1
G = torch.randn(4 * world, 3, 5)  # the upstream gradient
rows = slice(4 * rank, 4 * (rank + 1))


def close(a, b):
    return bool(torch.allclose(a, b, rtol=1e-4, atol=1e-5))


reference = nn.BatchNorm1d(3, momentum=0.3)
with torch.no_grad():
    reference.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
    reference.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
synced = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(3, momentum=0.3)))[0]
synced.load_state_dict(reference.state_dict())
R["type"] = type(synced).__name__

x_full = X.clone().requires_grad_()
out_full = reference(x_full)
(out_full * G).sum().backward()
x_local = X[rows].clone().requires_grad_()
with warnings.catch_warnings(record=True) as caught:  # none of its own (PyTorch's gives none)
    warnings.simplefilter("always")
    out_local = synced(x_local)
R["warnings"] = [str(w.message) for w in caught]
(out_local * G[rows]).sum().backward()

R["output"] = close(out_local, out_full[rows])
R["input_grad"] = close(x_local.grad, x_full.grad[rows])
for name in ("weight", "bias"):
    g = getattr(synced, name).grad.clone()
    dist.all_reduce(g)  # each rank holds its share of the parameter gradient, as DDP then sums
    R[name + "_grad"] = close(g, getattr(reference, name).grad)
R["running"] = [close(synced.running_mean, reference.running_mean), close(synced.running_var, reference.running_var),
                int(synced.num_batches_tracked)]
synced.eval()
reference.eval()
R["eval"] = close(synced(X[rows]), reference(X)[rows])
write(rank, R)
