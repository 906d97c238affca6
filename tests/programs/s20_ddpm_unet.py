# A DDPM training step as the denoising-diffusion-pytorch / annotated-diffusion code writes it, from memory:
# a linear and a cosine beta schedule (torch.linspace, cumprod, F.pad of alphas_cumprod), extract() through
# gather + reshape, q_sample, sinusoidal timestep embeddings, a small UNet with GroupNorm + SiLU residual
# blocks, a linear-attention-free self-attention block (einsum), Downsample/Upsample convs, skip concat,
# an EMA copy of the weights, and the reverse (p_sample) loop with a fixed noise sequence.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


def linear_beta_schedule(timesteps):
    scale = 1000 / timesteps
    return torch.linspace(scale * 0.0001, scale * 0.02, timesteps, dtype=torch.float64)


def cosine_beta_schedule(timesteps, s=0.008):
    steps = timesteps + 1
    t = torch.linspace(0, timesteps, steps, dtype=torch.float64) / timesteps
    alphas_cumprod = torch.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0, 0.999)


def extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        half_dim = self.dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=x.device) * -emb)
        emb = x[:, None] * emb[None, :]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=4):
        super().__init__()
        self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()

    def forward(self, x, scale_shift=None):
        x = self.norm(self.proj(x))
        if scale_shift is not None:
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        return self.act(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2))
        self.block1 = Block(dim, dim_out)
        self.block2 = Block(dim_out, dim_out)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb):
        time_emb = self.mlp(time_emb)
        scale_shift = time_emb[:, :, None, None].chunk(2, dim=1)
        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=2, dim_head=4):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        hidden = dim_head * heads
        self.norm = nn.GroupNorm(1, dim)
        self.to_qkv = nn.Conv2d(dim, hidden * 3, 1, bias=False)
        self.to_out = nn.Conv2d(hidden, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
        q, k, v = (t.reshape(b, self.heads, -1, h * w) for t in qkv)
        q = q * self.scale
        sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-1)
        out = torch.einsum("b h i j, b h d j -> b h i d", attn, v)
        out = out.permute(0, 1, 3, 2).reshape(b, -1, h, w)
        return self.to_out(out) + x


class Unet(nn.Module):
    def __init__(self, dim=8, channels=1):
        super().__init__()
        time_dim = dim * 4
        self.init_conv = nn.Conv2d(channels, dim, 7, padding=3)
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                      nn.Linear(time_dim, time_dim))
        self.down1 = ResnetBlock(dim, dim, time_dim)
        self.downsample = nn.Conv2d(dim, dim * 2, 4, 2, 1)
        self.mid1 = ResnetBlock(dim * 2, dim * 2, time_dim)
        self.mid_attn = Attention(dim * 2)
        self.upsample = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                      nn.Conv2d(dim * 2, dim, 3, padding=1))
        self.up1 = ResnetBlock(dim * 2, dim, time_dim)
        self.final_conv = nn.Conv2d(dim, channels, 1)

    def forward(self, x, time):
        x = self.init_conv(x)
        t = self.time_mlp(time)
        h = self.down1(x, t)
        x = self.downsample(h)
        x = self.mid_attn(self.mid1(x, t))
        x = self.upsample(x)
        x = self.up1(torch.cat((x, h), dim=1), t)
        return self.final_conv(x)


T = 50
for name, betas in (("linear", linear_beta_schedule(T)), ("cosine", cosine_beta_schedule(T))):
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    print(name, betas.dtype, f"{alphas_cumprod[-1].item():.8e} {posterior_variance[1:4].tolist()}",
          f"{torch.log(posterior_variance.clamp(min=1e-20))[0].item():.4f}")

betas = cosine_beta_schedule(T).float()
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
sqrt_ac = torch.sqrt(alphas_cumprod)
sqrt_1mac = torch.sqrt(1.0 - alphas_cumprod)

model = seed_free_init(Unet(), salt=211)
ema = copy.deepcopy(model)
for p in ema.parameters():
    p.requires_grad_(False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
images = data((12, 1, 8, 8), salt=212)
noises = data((6, 4, 1, 8, 8), salt=213)
ts = integers((6, 4), T, salt=214)
for step in range(6):
    x_start = images[(step * 4) % 12: (step * 4) % 12 + 4]
    t = ts[step]
    noise = noises[step]
    x_noisy = extract(sqrt_ac, t, x_start.shape) * x_start + extract(sqrt_1mac, t, x_start.shape) * noise
    pred = model(x_noisy, t.float())
    if step % 2:
        loss = F.smooth_l1_loss(noise, pred)
    else:
        loss = F.mse_loss(pred, noise, reduction="none").mean(dim=[1, 2, 3]).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 0.25)
    print(f"step {step} t {t.tolist()} loss {loss.item():.6f}")


@torch.no_grad()
def p_sample_loop(net, shape, steps):
    img = data(shape, salt=215)
    for i, tt in enumerate(reversed(range(0, steps))):
        t = torch.full((shape[0],), tt, dtype=torch.long)
        beta_t = extract(betas, t, img.shape)
        sqrt_recip = extract(1.0 / torch.sqrt(1.0 - betas), t, img.shape)
        model_mean = sqrt_recip * (img - beta_t * net(img, t.float()) / extract(sqrt_1mac, t, img.shape))
        if tt == 0:
            img = model_mean
        else:
            img = model_mean + torch.sqrt(beta_t) * data(shape, salt=300 + i)
    return img.clamp(-1, 1)


ema.eval()
sample = p_sample_loop(ema, (2, 1, 8, 8), 5)
print("sample", tuple(sample.shape), f"{sample.mean().item():.6f} {sample.std().item():.6f}",
      f"{sample.abs().max().item():.6f}")
print(model.mid_attn)
print(sum(p.numel() for p in model.parameters()), sum(b.numel() for b in model.buffers()))
