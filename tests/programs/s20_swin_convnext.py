# Swin Transformer's window attention and ConvNeXt's block as the microsoft/Swin-Transformer and
# facebookresearch/ConvNeXt code (and timm) write them, from memory: window_partition / window_reverse with
# view/permute, the relative_position_index built from meshgrid(indexing='ij'), flatten, broadcasting
# subtraction and sum, a relative_position_bias_table (trunc_normal_), a shifted-window mask through
# torch.roll + slices + masked_fill; ConvNeXt's depthwise 7x7 conv, LayerNorm channels_first by hand and
# channels_last through permute, a layer-scale gamma, DropPath with x.new_empty().bernoulli_(keep_prob)
# .div_(keep_prob) (eval mode and a drop_prob of 0 in training here, so outputs match), and the timm-style
# parameter groups without weight decay for norm/bias/gamma, trained with AdamW + cosine.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads))
        coords_h = torch.arange(self.window_size[0])
        coords_w = torch.arange(self.window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1)
        self.register_buffer("relative_position_index", relative_position_index)
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class SwinBlock(nn.Module):
    def __init__(self, dim, resolution, num_heads, window_size, shift_size):
        super().__init__()
        self.H = self.W = resolution
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (window_size, window_size), num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        if self.shift_size > 0:
            img_mask = torch.zeros((1, self.H, self.W, 1))
            cnt = 0
            slices = (slice(0, -window_size), slice(-window_size, -shift_size), slice(-shift_size, None))
            for h in slices:
                for w in slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, window_size).view(-1, window_size * window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, (-100.0)).masked_fill(attn_mask == 0, 0.0)
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, self.H, self.W, C)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        x_windows = window_partition(x, self.window_size).view(-1, self.window_size * self.window_size, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)
        x = window_reverse(attn_windows.view(-1, self.window_size, self.window_size, C), self.window_size, self.H,
                           self.W)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        x = shortcut + x.view(B, self.H * self.W, C)
        return x + self.mlp(self.norm2(x))


def drop_path(x, drop_prob=0.0, training=False, scale_by_keep=True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class LayerNorm2d(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps, self.data_format = eps, data_format
        self.normalized_shape = (normalized_shape,)

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm2d(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones(dim), requires_grad=True)
        self.drop_path = drop_path

    def forward(self, x):
        inp = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        return inp + drop_path(x, self.drop_path, self.training)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, kernel_size=2, stride=2),
                                  LayerNorm2d(8, data_format="channels_first"))
        self.convnext = ConvNeXtBlock(8, layer_scale_init_value=0.5)
        self.swin = nn.Sequential(SwinBlock(8, 4, 2, 2, 0), SwinBlock(8, 4, 2, 2, 1))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        x = self.convnext(self.stem(x))
        x = self.swin(x.flatten(2).transpose(1, 2))
        return self.head(x.mean(1))


def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


blk = SwinBlock(8, 4, 2, 2, 1)
print(blk.attn.relative_position_index.tolist())
print(blk.attn_mask.shape, blk.attn_mask.unique().tolist(), (blk.attn_mask != 0).sum(dim=(1, 2)).tolist())
x = data((2, 16, 3), salt=341)
print("partition roundtrip", torch.equal(window_reverse(window_partition(x.view(2, 4, 4, 3), 2), 2, 4, 4),
                                         x.view(2, 4, 4, 3)))
model = seed_free_init(Net(), salt=342)
groups = param_groups_weight_decay(model, 0.05, ("swin.0.attn.relative_position_bias_table",))
print("groups", [len(g["params"]) for g in groups])
opt = torch.optim.AdamW(groups, lr=2e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-5)
imgs = data((12, 3, 8, 8), salt=343)
labels = integers((12,), 3, salt=344)
for step in range(7):
    sl = slice((step % 3) * 4, (step % 3) * 4 + 4)
    loss = F.cross_entropy(model(imgs[sl]), labels[sl], label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step(step + 1)
    print(f"step {step} loss {loss.item():.6f} lr {opt.param_groups[0]['lr']:.6e} "
          f"rpb grad {model.swin[1].attn.relative_position_bias_table.grad.norm().item():.6e}")
model.eval()
with torch.no_grad():
    out = model(imgs)
print("eval", out.argmax(1).tolist(), f"{out.abs().mean().item():.6f}")
kept = drop_path(torch.ones(4, 2), 0.0, True)
print(kept.sum().item(), drop_path(torch.ones(3, 2), 0.5, False).sum().item())
