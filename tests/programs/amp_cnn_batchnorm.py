# A CNN trained under CPU bfloat16 autocast: convolutions run in bf16, so BatchNorm2d and GroupNorm
# (float32 weights and running stats) see bf16 activations (PyTorch's "mixed type" norms: float32
# statistics and weight gradients); a few SGD steps, running stats, then eval under autocast.
import torch
import torch.nn as nn

torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.GroupNorm(2, 8),
                  nn.Flatten(), nn.Linear(8 * 4 * 4, 4))
# lr 0.01 keeps the loss away from 0, where bf16 roundings of near-zero gradients amplify last-ulp differences.
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(4, 3, 8, 8)
y = torch.randint(0, 4, (4,))
for step in range(4):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = m[1](m[0](x))
        out = m[6](m[5](m[4](m[3](m[2](h)))))
    loss = nn.functional.cross_entropy(out.float(), y)
    opt.zero_grad()
    loss.backward()
    print(f"step {step} {h.dtype} {out.dtype} loss {loss.item():.6f}",
          [round(p.grad.abs().sum().item(), 5) for p in m.parameters()], m[1].weight.grad.dtype)
    opt.step()
print(m[1].running_mean.dtype, m[1].running_mean.numpy().round(5).tolist(), int(m[1].num_batches_tracked))
m.eval()
with torch.autocast("cpu", dtype=torch.bfloat16):
    print("eval", round(m(x).float().sum().item(), 4))
