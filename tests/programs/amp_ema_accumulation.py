# CPU autocast with bfloat16 (which ops run in bf16, which stay float32), gradient accumulation
# over micro-batches, clip_grad_norm_ (its returned total norm), clip_grad_value_, and an EMA copy
# of the weights updated with torch.no_grad() + lerp_ / mul_().add_(), plus AveragedModel.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
x = torch.randn(12, 16)
y = torch.randint(0, 4, (12,))
with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    h = model[0](x)
    a = model[1](h)
    n = model[2](a)
    logits = model[3](n)
    sm = torch.softmax(logits, -1)
    loss = F.cross_entropy(logits, y)
    mm = x @ x.t()
    s = x.sum()
    print("autocast dtypes", h.dtype, a.dtype, n.dtype, logits.dtype, sm.dtype, loss.dtype, mm.dtype, s.dtype)
    print("is_autocast_enabled", torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    with torch.autocast(device_type="cpu", enabled=False):
        print("disabled inside", model[0](x).dtype)
print("loss bf16-path {:.3f}".format(loss.item()))
loss.backward()
print("grad dtype", model[0].weight.grad.dtype)
model.zero_grad()

ema = copy.deepcopy(model)
for p in ema.parameters():
    p.requires_grad_(False)
swa = torch.optim.swa_utils.AveragedModel(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
accum = 3
for step in range(6):
    for micro in range(accum):
        xb = x[micro * 4:(micro + 1) * 4]
        yb = y[micro * 4:(micro + 1) * 4]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(xb)
        loss = F.cross_entropy(out.float(), yb) / accum
        loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    opt.step()
    opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 0.1)
        for be, bm in zip(ema.buffers(), model.buffers()):
            be.copy_(bm)
    swa.update_parameters(model)
    print("step {} total_norm {:.5f} loss {:.5f}".format(step, total.item(), loss.item() * accum))
with torch.no_grad():
    print("ema out {:.5f}".format(ema(x).sum().item()), "swa n_averaged", int(swa.n_averaged))
    print("swa out {:.5f}".format(swa(x).sum().item()))
ema2 = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
ema2.update_parameters(model)
print("grads none", all(p.grad is None for p in model.parameters()))
norms = [torch.tensor(3.0), torch.tensor(4.0)]
print("get_total_norm", torch.nn.utils.get_total_norm(norms).item())
p = torch.nn.Parameter(torch.ones(3))
p.grad = torch.tensor([float("nan"), 1.0, 1.0])
try:
    torch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
except RuntimeError as e:
    print("RuntimeError", str(e)[:70])
print("nonfinite norm", torch.nn.utils.clip_grad_norm_([p], 1.0).item())
