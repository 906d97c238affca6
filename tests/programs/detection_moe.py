# Detection heads and sparse mixtures, written by hand as papers' reference code does: anchor
# generation with meshgrid (both indexings) and cartesian_prod, box IoU/GIoU, non-maximum
# suppression by an argsort loop and a batched-NMS offset trick, anchor matching by IoU (max/argmax
# over both axes, low-quality matches kept), box encoding/decoding, sigmoid focal loss, smooth-L1
# and GIoU losses, an FCOS-style size assignment with bucketize, RoI crops through grid_sample;
# then a mixture-of-experts layer with top-2 routing (softmax + topk, capacity from cumsum over
# one_hot, tokens dispatched by index_select/index_add_, dropped tokens), the Switch load-balancing
# loss and the router z-loss, trained together with sequence reductions (cummax, logcumsumexp,
# aminmax, take_along_dim, kthvalue, mode, nanmean, diff, tril_indices, combinations).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def r(t, n=4):
    return t.detach().numpy().round(n).tolist()


def make_anchors(feat_h, feat_w, stride, sizes, ratios):
    ys, xs = torch.meshgrid(torch.arange(feat_h), torch.arange(feat_w), indexing="ij")
    centers = torch.stack([xs, ys], -1).reshape(-1, 2).float().add(0.5).mul(stride)
    shapes = torch.cartesian_prod(torch.tensor(sizes, dtype=torch.float), torch.tensor(ratios))
    w = shapes[:, 0] * shapes[:, 1].sqrt()
    h = shapes[:, 0] / shapes[:, 1].sqrt()
    half = torch.stack([-w, -h, w, h], 1) / 2
    return (centers.repeat(1, 2)[:, None, :] + half[None]).reshape(-1, 4)


def box_area(b):
    return (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)


def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = box_area(a)[:, None] + box_area(b)[None] - inter
    return inter / union, union


def generalized_iou(a, b):
    iou, union = box_iou(a, b)
    lt = torch.min(a[:, None, :2], b[None, :, :2])
    rb = torch.max(a[:, None, 2:], b[None, :, 2:])
    hull = (rb - lt).clamp(min=0).prod(-1)
    return iou - (hull - union) / hull


def nms(boxes, scores, thresh):
    order = scores.argsort(descending=True, stable=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(int(i))
        if order.numel() == 1:
            break
        iou, _ = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])
        order = order[1:][iou[0] <= thresh]
    return torch.tensor(keep, dtype=torch.long)


def batched_nms(boxes, scores, classes, thresh):
    offsets = classes.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, thresh)


def encode(anchors, gt, weights=(10.0, 10.0, 5.0, 5.0)):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    wx, wy, ww, wh = weights
    return torch.stack([wx * (gx - ax) / aw, wy * (gy - ay) / ah, ww * torch.log(gw / aw), wh * torch.log(gh / ah)], 1)


def decode(anchors, deltas, weights=(10.0, 10.0, 5.0, 5.0)):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    dx, dy = deltas[:, 0] / weights[0], deltas[:, 1] / weights[1]
    dw = (deltas[:, 2] / weights[2]).clamp(max=math.log(1000.0 / 16))
    dh = (deltas[:, 3] / weights[3]).clamp(max=math.log(1000.0 / 16))
    cx, cy, w, h = ax + dx * aw, ay + dy * ah, aw * dw.exp(), ah * dh.exp()
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(inputs)
    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * loss).sum()


anchors = make_anchors(4, 4, 8, [8.0, 16.0], [0.5, 1.0, 2.0])
print("anchors", tuple(anchors.shape), r(anchors[:3]))
xy_y, xy_x = torch.meshgrid(torch.arange(2), torch.arange(3), indexing="xy")
print("meshgrid xy", xy_y.tolist(), xy_x.tolist())
gt_boxes = torch.tensor([[2.0, 3.0, 14.0, 20.0], [16.0, 10.0, 30.0, 28.0], [5.0, 18.0, 12.0, 26.0]])
gt_labels = torch.tensor([0, 1, 1])
iou, _ = box_iou(anchors, gt_boxes)
best_iou, best_gt = iou.max(dim=1)
matched = torch.full((anchors.size(0),), -1, dtype=torch.long)
matched[best_iou >= 0.5] = best_gt[best_iou >= 0.5]
matched[(best_iou >= 0.3) & (best_iou < 0.5)] = -2  # ignored
# low-quality matches: every gt gets the anchors that overlap it most
gt_best = iou.max(dim=0).values
extra = (iou == gt_best[None]).nonzero()
matched[extra[:, 0]] = extra[:, 1]
print("matched", int((matched >= 0).sum()), int((matched == -2).sum()), "extra", extra.tolist())
print("giou", r(generalized_iou(gt_boxes, gt_boxes[[1, 2, 0]])))

num_classes = 2
head = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, num_classes + 4))
anchor_feats = torch.cat([anchors / 32.0], 1)
pos = matched >= 0
targets_cls = torch.zeros(anchors.size(0), num_classes)
targets_cls[pos, gt_labels[matched[pos]]] = 1.0
valid = matched != -2
reg_targets = encode(anchors[pos], gt_boxes[matched[pos]])
print("reg targets", r(reg_targets[:2]))
opt = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9)
for step in range(8):
    out = head(anchor_feats)
    cls_logits, deltas = out[:, :num_classes], out[:, num_classes:]
    loss_cls = sigmoid_focal_loss(cls_logits[valid], targets_cls[valid]) / max(1, int(pos.sum()))
    loss_reg = F.smooth_l1_loss(deltas[pos], reg_targets, beta=1 / 9, reduction="sum") / max(1, int(pos.sum()))
    pred_boxes = decode(anchors[pos], deltas[pos])
    loss_giou = (1 - torch.diagonal(generalized_iou(pred_boxes, gt_boxes[matched[pos]]))).mean()
    loss = loss_cls + loss_reg + loss_giou
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 2 == 0:
        print(f"det step {step} cls {loss_cls.item():.5f} reg {loss_reg.item():.5f} giou {loss_giou.item():.5f}")

with torch.no_grad():
    out = head(anchor_feats)
    scores, labels = out[:, :num_classes].sigmoid().max(1)
    boxes = decode(anchors, out[:, num_classes:])
    keep = scores > scores.quantile(0.5)
    kept = batched_nms(boxes[keep], scores[keep], labels[keep], 0.5)
    print("nms kept", kept.tolist()[:10], len(kept))
    print("top detections", r(boxes[keep][kept[:2]], 2), r(scores[keep][kept[:2]]))

# FCOS-style: which pyramid level regresses each box, by its size
sizes = (gt_boxes[:, 2:] - gt_boxes[:, :2]).max(1).values
bounds = torch.tensor([8.0, 16.0, 32.0])
print("levels", torch.bucketize(sizes, bounds).tolist(), torch.bucketize(sizes, bounds, right=True).tolist(),
      torch.searchsorted(bounds, sizes, side="right").tolist())

# RoI crops through an affine grid per box (RoIAlign's idea with grid_sample)
feat = torch.arange(2 * 32 * 32, dtype=torch.float).view(1, 2, 32, 32) / 100.0
rois = gt_boxes / 32.0 * 2 - 1
theta = torch.zeros(3, 2, 3)
theta[:, 0, 0] = (rois[:, 2] - rois[:, 0]) / 2
theta[:, 0, 2] = (rois[:, 2] + rois[:, 0]) / 2
theta[:, 1, 1] = (rois[:, 3] - rois[:, 1]) / 2
theta[:, 1, 2] = (rois[:, 3] + rois[:, 1]) / 2
grid = F.affine_grid(theta, (3, 2, 3, 3), align_corners=False)
crops = F.grid_sample(feat.expand(3, -1, -1, -1), grid, align_corners=False)
print("roi crops", tuple(crops.shape), r(crops[:, 0, 1, 1], 3))


# --- mixture of experts ---
class Top2MoE(nn.Module):
    def __init__(self, dim, n_experts=4, hidden=16, capacity_factor=1.0):
        super().__init__()
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(n_experts, dim, hidden) * dim ** -0.5)
        self.w2 = nn.Parameter(torch.randn(n_experts, hidden, dim) * hidden ** -0.5)
        self.n_experts, self.capacity_factor = n_experts, capacity_factor

    def forward(self, x):
        tokens = x.reshape(-1, x.size(-1))
        n = tokens.size(0)
        logits = self.router(tokens)
        probs = logits.softmax(-1)
        gate, expert = probs.topk(2, dim=-1)
        gate = gate / gate.sum(-1, keepdim=True)
        capacity = int(self.capacity_factor * 2 * n / self.n_experts)
        onehot = F.one_hot(expert.t().reshape(-1), self.n_experts)  # first choices, then second
        position = (onehot.cumsum(0) - 1) * onehot
        position = position.sum(-1).view(2, n).t()
        kept = position < capacity
        out = torch.zeros_like(tokens)
        for e in range(self.n_experts):
            sel = (expert == e) & kept
            tok, slot = sel.nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            h = F.gelu(tokens.index_select(0, tok) @ self.w1[e]) @ self.w2[e]
            out = out.index_add(0, tok, h * gate[tok, slot].unsqueeze(-1))
        frac = F.one_hot(expert[:, 0], self.n_experts).float().mean(0)
        balance = self.n_experts * (frac * probs.mean(0)).sum()
        z_loss = torch.logsumexp(logits, -1).pow(2).mean()
        return out.view_as(x), balance, z_loss, int((~kept).sum())


moe = Top2MoE(8)
proj = nn.Linear(8, 1)
opt = torch.optim.AdamW(list(moe.parameters()) + list(proj.parameters()), lr=5e-3)
seqs = torch.randn(4, 6, 8)
target = seqs.sum(-1, keepdim=True).tanh()
for step in range(8):
    y, balance, z_loss, dropped = moe(seqs)
    loss = F.mse_loss(proj(y + seqs), target) + 0.01 * balance + 1e-3 * z_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 2 == 0:
        print(f"moe step {step} loss {loss.item():.5f} balance {balance.item():.5f} z {z_loss.item():.5f} "
              f"dropped {dropped}")
print("router grad", r(moe.router.weight.grad.abs().sum()), "expert grads", r(moe.w1.grad.abs().sum((1, 2))))

# sequence reductions used around such layers
v = torch.tensor([[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], [2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0]])
print("cummax", [t.tolist() for t in v.cummax(1)], "cummin", v.cummin(1).indices.tolist())
print("logcumsumexp", r(torch.logcumsumexp(v, 1)))
print("aminmax", [t.tolist() for t in torch.aminmax(v, dim=1)])
idx = v.argsort(dim=1, descending=True, stable=True)
print("take_along_dim", torch.take_along_dim(v, idx[:, :3], dim=1).tolist(), "stable order", idx.tolist())
print("kthvalue", [t.tolist() for t in v.kthvalue(3, dim=1)], "mode", [t.tolist() for t in v.mode(1)])
with_nan = torch.tensor([1.0, float("nan"), 3.0, 4.0])
print("nanmean", with_nan.nanmean().item(), "nansum", with_nan.nansum().item(),
      "nanquantile", round(with_nan.nanquantile(0.5).item(), 5), "nanmedian", with_nan.nanmedian().item())
print("diff", torch.diff(v, dim=1).tolist()[0], torch.diff(v[0], n=2, prepend=torch.tensor([0.0])).tolist())
print("tril_indices", torch.tril_indices(3, 4, offset=1).tolist(), "combinations",
      torch.combinations(torch.arange(4), r=2).tolist(), torch.combinations(torch.arange(3), 2, True).shape)
print("unique_consecutive", [t.tolist() for t in torch.unique_consecutive(
    torch.tensor([1, 1, 2, 2, 3, 1, 1]), return_inverse=True, return_counts=True)])
print("histc", torch.histc(v, bins=4, min=0, max=10).tolist(), "bincount weights",
      torch.bincount(torch.tensor([0, 2, 2]), weights=torch.tensor([0.5, 1.0, 2.0])).tolist())
