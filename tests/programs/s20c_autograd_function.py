# Custom autograd.Function inside a compiled region: forward values and gradients equal eager's, with
# save_for_backward, ctx attributes, needs_input_grad, mark_non_differentiable, a straight-through
# estimator and a Function applied inside a compiled module's training step.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        y = torch.tanh(x) * scale
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy * (ctx.scale - y * y / ctx.scale), None


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, g):
        return g


class SortWithIdx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        vals, idx = torch.sort(x, dim=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return vals, idx

    @staticmethod
    def backward(ctx, gv, gi):
        (idx,) = ctx.saved_tensors
        out = torch.zeros_like(gv)
        return out.scatter(-1, idx, gv)


class MulPair(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g * b if ctx.needs_input_grad[0] else None
        gb = g * a if ctx.needs_input_grad[1] else None
        return ga, gb


def f(x, w):
    h = ScaledTanh.apply(x @ w, 2.0)
    q = RoundSTE.apply(h)
    vals, idx = SortWithIdx.apply(q + h)
    return (vals * torch.arange(vals.shape[-1], dtype=vals.dtype)).sum() + MulPair.apply(h, q).mean(), idx


x0, w0 = data((4, 5), 1), data((5, 6), 2)
results = {}
for name, fn in (("eager", f), ("compiled", torch.compile(f)), ("aot_eager", torch.compile(f, backend="aot_eager"))):
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    out, idx = fn(x, w)
    out.backward()
    results[name] = (out.detach(), idx, x.grad, w.grad)
    print(name, round(out.item(), 5), idx[0].tolist(), idx.requires_grad)
for name in ("compiled", "aot_eager"):
    print(name, "grads", all(torch.allclose(a, b, atol=1e-5) for a, b in zip(results["eager"][2:], results[name][2:])))

a = data((3,), 4).requires_grad_()
b = data((3,), 5)
out = torch.compile(lambda p, q: MulPair.apply(p, q).sum())(a, b)
out.backward()
print("needs_input_grad", a.grad.tolist() == b.tolist(), b.grad)


class Quantized(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        return RoundSTE.apply(self.fc(x)).pow(2).sum()


m1, m2 = seed_free_init(Quantized(), 3), seed_free_init(Quantized(), 3)
cm2 = torch.compile(m2)
for step in range(3):
    for m in (m1, cm2):
        m.zero_grad()
        m(x0).backward()
    print("ste step", step, torch.allclose(m1.fc.weight.grad, m2.fc.weight.grad, atol=1e-5))
    with torch.no_grad():
        for p, q in zip(m1.parameters(), m2.parameters()):
            p -= 0.1 * p.grad
            q -= 0.1 * q.grad
print("ste final", round(m1(x0).item(), 4), round(cm2(x0).item(), 4))
