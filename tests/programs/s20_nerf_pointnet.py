# NeRF's rendering core as nerf-pytorch (yenchenlin) writes it, from memory, and PointNet's classifier: the
# positional Embedder (sin/cos of 2^k * x, include_input), get_rays through meshgrid(indexing='xy') and a
# camera-to-world matrix, stratified sampling on a linspace with expand, raw2outputs (alpha = 1 - exp(-relu
# (sigma) * dists), the exclusive cumprod of 1 - alpha + 1e-10 via cat of ones, weights @ rgb, depth and
# accumulation maps), hierarchical sample_pdf (cumsum of the pdf, searchsorted(right=True), clamp, gather over
# an expanded cdf, the linear interpolation), img2mse / mse2psnr; PointNet's T-Net with bmm onto an identity,
# max over points, the feature-transform regulariser ||I - A A^T||, trained with SGD + StepLR.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


class Embedder:
    def __init__(self, multires, include_input=True):
        self.embed_fns = [lambda x: x] if include_input else []
        freq_bands = 2. ** torch.linspace(0., multires - 1, steps=multires)
        for freq in freq_bands:
            for p_fn in (torch.sin, torch.cos):
                self.embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
        self.out_dim = 3 * len(self.embed_fns)

    def embed(self, inputs):
        return torch.cat([fn(inputs) for fn in self.embed_fns], -1)


def get_rays(H, W, focal, c2w):
    i, j = torch.meshgrid(torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H), indexing="xy")
    dirs = torch.stack([(i - W * .5) / focal, -(j - H * .5) / focal, -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    return rays_o, rays_d


def raw2outputs(raw, z_vals, rays_d, white_bkgd=False):
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1. - torch.exp(-act_fn(raw) * dists)  # noqa: E731
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = raw2alpha(raw[..., 3], dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1. - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    disp_map = 1. / torch.max(1e-10 * torch.ones_like(depth_map), depth_map / torch.sum(weights, -1))
    acc_map = torch.sum(weights, -1)
    if white_bkgd:
        rgb_map = rgb_map + (1. - acc_map[..., None])
    return rgb_map, disp_map, acc_map, weights, depth_map


def sample_pdf(bins, weights, N_samples, u):
    weights = weights + 1e-5
    pdf = weights / torch.sum(weights, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    u = u.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.max(torch.zeros_like(inds - 1), inds - 1)
    above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
    inds_g = torch.stack([below, above], -1)
    matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


class NeRF(nn.Module):
    def __init__(self, D=3, W=32, input_ch=27, input_ch_views=15, skips=(1,)):
        super().__init__()
        self.skips = skips
        self.pts_linears = nn.ModuleList([nn.Linear(input_ch, W)] + [
            nn.Linear(W, W) if i not in skips else nn.Linear(W + input_ch, W) for i in range(D - 1)])
        self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
        self.feature_linear = nn.Linear(W, W)
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W // 2, 3)
        self.input_ch, self.input_ch_views = input_ch, input_ch_views

    def forward(self, x):
        input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)
        h = input_pts
        for i, layer in enumerate(self.pts_linears):
            h = F.relu(layer(h))
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        alpha = self.alpha_linear(h)
        h = torch.cat([self.feature_linear(h), input_views], -1)
        for layer in self.views_linears:
            h = F.relu(layer(h))
        return torch.cat([self.rgb_linear(h), alpha], -1)


img2mse = lambda x, y: torch.mean((x - y) ** 2)  # noqa: E731
mse2psnr = lambda x: -10. * torch.log(x) / torch.log(torch.Tensor([10.]))  # noqa: E731

embed_pts, embed_views = Embedder(4), Embedder(2)
print("embed dims", embed_pts.out_dim, embed_views.out_dim)
c2w = torch.tensor([[1.0, 0.0, 0.0, 0.1], [0.0, 0.8, -0.6, 0.2], [0.0, 0.6, 0.8, 2.0]])
rays_o, rays_d = get_rays(4, 5, 3.0, c2w)
print("rays", tuple(rays_o.shape), tuple(rays_d.shape), [round(v, 5) for v in rays_d[1, 2].tolist()])
rays_o, rays_d = rays_o.reshape(-1, 3), rays_d.reshape(-1, 3)
viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
target = data((20, 3), salt=351, low=0.0, high=1.0)
model = seed_free_init(NeRF(), salt=352)
opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.999))
N_samples, near, far = 8, 2.0, 6.0
t_vals = torch.linspace(0., 1., steps=N_samples)
z_base = (near * (1. - t_vals) + far * t_vals).expand([20, N_samples])
for it in range(5):
    mids = .5 * (z_base[..., 1:] + z_base[..., :-1])
    upper = torch.cat([mids, z_base[..., -1:]], -1)
    lower = torch.cat([z_base[..., :1], mids], -1)
    z_vals = lower + (upper - lower) * data((20, N_samples), salt=360 + it, low=0.0, high=1.0)
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    dirs = viewdirs[:, None].expand(pts.shape)
    inputs = torch.cat([embed_pts.embed(pts), embed_views.embed(dirs)], -1)
    raw = model(inputs.reshape(-1, inputs.shape[-1])).reshape(20, N_samples, 4)
    rgb_map, disp_map, acc_map, weights, depth_map = raw2outputs(raw, z_vals, rays_d, white_bkgd=it % 2 == 1)
    z_vals_mid = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
    z_samples = sample_pdf(z_vals_mid, weights[..., 1:-1].detach(), 6, data((20, 6), salt=370 + it, low=0, high=1))
    z_all, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
    loss = img2mse(rgb_map, target)
    psnr = mse2psnr(loss)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"iter {it} loss {loss.item():.6f} psnr {psnr.item():.5f} depth {depth_map.mean().item():.5f} "
          f"acc {acc_map.mean().item():.5f} fine z {z_all[0, :4].tolist()}"[:200])
    for pg in opt.param_groups:
        pg["lr"] = 5e-3 * (0.1 ** ((it + 1) / 50))
print("searchsorted", torch.searchsorted(torch.tensor([[0.0, 0.5, 1.0]]), torch.tensor([[0.5, 0.2, 1.0]]),
                                         right=True).tolist(),
      torch.searchsorted(torch.tensor([0.0, 0.5, 1.0]), torch.tensor([0.5, 0.2, 1.0]), side="left").tolist())


class STN3d(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.k = k
        self.conv1, self.conv2 = nn.Conv1d(k, 16, 1), nn.Conv1d(16, 32, 1)
        self.fc1, self.fc2 = nn.Linear(32, 16), nn.Linear(16, k * k)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(16), nn.BatchNorm1d(32), nn.BatchNorm1d(16)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 32)
        x = self.fc2(F.relu(self.bn3(self.fc1(x))))
        iden = torch.eye(self.k).flatten().view(1, self.k * self.k).repeat(batchsize, 1)
        return (x + iden).view(-1, self.k, self.k)


class PointNetCls(nn.Module):
    def __init__(self, k=4):
        super().__init__()
        self.stn = STN3d()
        self.fstn = STN3d(k=16)
        self.conv1, self.conv2 = nn.Conv1d(3, 16, 1), nn.Conv1d(16, 32, 1)
        self.bn1, self.bn2 = nn.BatchNorm1d(16), nn.BatchNorm1d(32)
        self.fc = nn.Sequential(nn.Linear(32, 16), nn.Dropout(p=0.0), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, k))

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        trans_feat = self.fstn(x)
        x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        x = self.bn2(self.conv2(x))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 32)
        return F.log_softmax(self.fc(x), dim=1), trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    I = torch.eye(d)[None, :, :]  # noqa: E741
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))


points = data((12, 3, 20), salt=381)
labels = integers((12,), 4, salt=382)
net = seed_free_init(PointNetCls(), salt=383)
# SGD, not the repository's Adam: the biases in front of BatchNorm have gradients that are rounding noise
# (~1e-8, zero in exact arithmetic), which Adam's first step turns into +-lr updates whose signs differ
# between any two float32 libraries
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
for epoch in range(4):
    net.train()
    pred, trans, trans_feat = net(points)
    loss = F.nll_loss(pred, labels) + feature_transform_regularizer(trans_feat) * 0.001
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    correct = pred.data.max(1)[1].eq(labels.data).cpu().sum()
    print(f"[{epoch}] train loss: {loss.item():.6f} accuracy: {correct.item() / 12.0:.4f} "
          f"reg {feature_transform_regularizer(trans_feat).item():.6f}")
net.eval()
with torch.no_grad():
    pred, _, _ = net(points[:, :, torch.randperm(20, generator=torch.Generator().manual_seed(0))])
    ref, _, _ = net(points)
print("permutation invariant", torch.allclose(pred, ref, atol=1e-5), pred.argmax(1).tolist())
