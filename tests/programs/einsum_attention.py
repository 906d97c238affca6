# einsum-heavy code: multi-head attention written with einsum (and checked against
# scaled_dot_product_attention), bilinear forms, batched traces and diagonals, ellipsis,
# the sublist form, opt_einsum-style chains, and gradients through them.
import math

import torch
import torch.nn.functional as F

torch.manual_seed(0)
b, h, n, d = 2, 3, 5, 4
q = torch.randn(b, h, n, d, requires_grad=True)
k = torch.randn(b, h, n, d, requires_grad=True)
v = torch.randn(b, h, n, d, requires_grad=True)
scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d)
mask = torch.ones(n, n, dtype=torch.bool).tril()
scores = scores.masked_fill(~mask, float("-inf"))
attn = scores.softmax(-1)
out = torch.einsum("bhij,bhjd->bhid", attn, v)
ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print("sdpa match", torch.allclose(out, ref, atol=1e-6))
merged = torch.einsum("bhnd->bnhd", out).reshape(b, n, h * d)
w = torch.randn(h * d, 6)
y = torch.einsum("bni,io->bno", merged, w)
y.pow(2).mean().backward()
print("grads", round(q.grad.sum().item(), 5), round(k.grad.abs().sum().item(), 5), round(v.grad.norm().item(), 5))
A = torch.randn(4, 3, 3)
print("trace", torch.einsum("bii->b", A).numpy().round(5).tolist(), torch.einsum("bii->bi", A).shape == (4, 3))
x1, x2, W = torch.randn(4, 3), torch.randn(4, 5), torch.randn(2, 3, 5)
print("bilinear", torch.allclose(torch.einsum("bi,oij,bj->bo", x1, W, x2), F.bilinear(x1, x2, W), atol=1e-5))
ell = torch.einsum("...ij,...jk->...ik", torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 2))
print("ellipsis", ell.shape == (2, 3, 4, 2))
print("outer", torch.einsum("i,j->ij", torch.arange(3.), torch.arange(4.)).tolist())
print("sublist", torch.einsum(torch.ones(2, 3), [0, 1], torch.ones(3, 4), [1, 2], [0, 2]).tolist())
print("sum all", torch.einsum("ij->", torch.arange(6.).view(2, 3)).item(), torch.einsum("ij", torch.ones(2, 3)).shape)
print("repeated output", torch.einsum("ii->i", torch.arange(9.).view(3, 3)).tolist())
chain = torch.einsum("ab,bc,cd,de->ae", *[torch.randn(3, 3, dtype=torch.double) for _ in range(4)])
print("chain", chain.numpy().round(8).tolist()[0])
print("int einsum", torch.einsum("ij,jk->ik", torch.arange(6).view(2, 3), torch.arange(6).view(3, 2)).tolist())
print("batch outer", torch.einsum("bi,bj->bij", torch.ones(2, 2), torch.arange(4.).view(2, 2)).sum().item())
for bad in [("ij,jk->ik", torch.ones(2, 3), torch.ones(4, 5)), ("ij->k", torch.ones(2, 2)),
            ("ij,jk", torch.ones(2, 2))]:
    try:
        torch.einsum(*bad)
    except (RuntimeError, ValueError) as e:
        print(type(e).__name__, str(e)[:90])
