# A selective-scan (Mamba-style) layer and an S4D-style diagonal SSM as minimal re-implementations write them,
# from memory: in_proj splitting x/z, a depthwise causal Conv1d (padding=d_conv-1 then slice), dt through
# softplus of a low-rank projection, A = -exp(A_log), the discretisation deltaA = exp(einsum('bld,dn->bldn')),
# a sequential scan and a parallel one through cumsum of log terms, and an S4D kernel computed by
# Vandermonde products of complex exponentials (torch.exp of complex, view_as_real, irfft-free real part) then
# applied by FFT convolution (torch.fft.rfft / irfft with n=2L).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class MambaBlock(nn.Module):
    def __init__(self, d_model=8, d_state=4, expand=2, d_conv=3, dt_rank=2):
        super().__init__()
        d_inner = expand * d_model
        self.d_inner, self.dt_rank, self.d_state = d_inner, dt_rank, d_state
        self.in_proj = nn.Linear(d_model, d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, kernel_size=d_conv, groups=d_inner, padding=d_conv - 1, bias=True)
        self.x_proj = nn.Linear(d_inner, dt_rank + d_state * 2, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        self.norm = nn.RMSNorm(d_model, eps=1e-5)

    def forward(self, x, parallel=False):
        _, seqlen, _ = x.shape
        res = x
        x_and_res = self.in_proj(self.norm(x))
        x, z = x_and_res.split(split_size=[self.d_inner, self.d_inner], dim=-1)
        x = x.transpose(1, 2)
        x = self.conv1d(x)[:, :, :seqlen]
        x = F.silu(x.transpose(1, 2))
        y = self.ssm(x, parallel)
        y = y * F.silu(z)
        return self.out_proj(y) + res

    def ssm(self, x, parallel):
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        x_dbl = self.x_proj(x)
        delta, B, C = x_dbl.split(split_size=[self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
        deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, x)
        if parallel:
            # h_t = sum_{s<=t} prod_{s<r<=t} deltaA_r * deltaB_u_s, via cumulative log-sums (all deltaA > 0)
            log_a = torch.log(deltaA).cumsum(dim=1)
            hs = torch.exp(log_a) * torch.cumsum(deltaB_u * torch.exp(-log_a), dim=1)
            y = torch.einsum("bldn,bln->bld", hs, C)
        else:
            h = torch.zeros(x.size(0), self.d_inner, self.d_state)
            ys = []
            for i in range(x.size(1)):
                h = deltaA[:, i] * h + deltaB_u[:, i]
                ys.append(torch.einsum("bdn,bn->bd", h, C[:, i]))
            y = torch.stack(ys, dim=1)
        return y + x * D


class S4DKernel(nn.Module):
    def __init__(self, d_model, N=8, dt_min=0.001, dt_max=0.1):
        super().__init__()
        H = d_model
        log_dt = torch.linspace(math.log(dt_min), math.log(dt_max), H)
        C = torch.complex(torch.linspace(-1, 1, H * N // 2).view(H, N // 2),
                          torch.linspace(1, -1, H * N // 2).view(H, N // 2))
        self.C = nn.Parameter(torch.view_as_real(C))
        self.register_buffer("log_dt", log_dt)
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(H, N // 2)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(N // 2).float().repeat(H, 1))

    def forward(self, L):
        dt = torch.exp(self.log_dt)
        C = torch.view_as_complex(self.C)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(L)
        C = C * (torch.exp(dtA) - 1.0) / A
        return 2 * torch.einsum("hn, hnl -> hl", C, torch.exp(K)).real


class S4D(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.D = nn.Parameter(torch.linspace(-0.5, 0.5, d_model))
        self.kernel = S4DKernel(d_model)
        self.output_linear = nn.Sequential(nn.Conv1d(d_model, 2 * d_model, kernel_size=1), nn.GLU(dim=-2))

    def forward(self, u):
        L = u.size(-1)
        k = self.kernel(L=L)
        k_f = torch.fft.rfft(k, n=2 * L)
        u_f = torch.fft.rfft(u, n=2 * L)
        y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
        y = y + u * self.D.unsqueeze(-1)
        return self.output_linear(F.gelu(y))


x = data((3, 10, 8), salt=291)
target = data((3, 10, 8), salt=292)
block = seed_free_init(MambaBlock(), salt=293)
with torch.no_grad():
    block.A_log.copy_(torch.log(torch.arange(1, 5, dtype=torch.float32).repeat(16, 1)))
seq, par = block(x), block(x, parallel=True)
print("scan forms agree", torch.allclose(seq, par, atol=1e-5), tuple(seq.shape))
opt = torch.optim.AdamW([{"params": [p for p in block.parameters() if not hasattr(p, "_no_weight_decay")]},
                         {"params": [block.A_log], "weight_decay": 0.0}], lr=5e-3, weight_decay=0.05)
for step in range(5):
    loss = F.mse_loss(block(x, parallel=step % 2 == 1), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"mamba step {step} loss {loss.item():.6f} A_log grad {block.A_log.grad.norm().item():.6e}")

s4 = S4D(8)
seed_free_init(s4.output_linear, salt=294)
k = s4.kernel(10)
print("kernel", tuple(k.shape), k.dtype, f"{k.abs().sum().item():.5f}")
opt = torch.optim.Adam(s4.parameters(), lr=1e-2)
u = x.transpose(1, 2)
for step in range(5):
    y = s4(u)
    loss = F.mse_loss(y, target.transpose(1, 2))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"s4d step {step} loss {loss.item():.6f} C grad {s4.kernel.C.grad.norm().item():.6f} "
          f"A_imag grad {s4.kernel.A_imag.grad.norm().item():.6f}")
