# Siamese embeddings trained three ways: the Hadsell contrastive loss written by hand over
# F.pairwise_distance (margin, clamp, similar/dissimilar labels), nn.TripletMarginLoss (p=2, swap),
# nn.TripletMarginWithDistanceLoss with a cosine distance, plus nn.CosineEmbeddingLoss,
# nn.HingeEmbeddingLoss and nn.MarginRankingLoss on the same embeddings; a shared tower with
# BatchNorm1d (after a bias-free Linear: a bias there gets a zero gradient up to rounding, which
# Adam would turn into steps of noise) and L2-normalised outputs, Adam with amsgrad, eval-mode
# retrieval by cdist + topk.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 24, bias=False), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 6))

    def forward_once(self, x):
        return F.normalize(self.net(x), dim=1)

    def forward(self, a, b):
        return self.forward_once(a), self.forward_once(b)


def contrastive_loss(o1, o2, label, margin=1.0):
    d = F.pairwise_distance(o1, o2, keepdim=True)
    return torch.mean((1 - label) * torch.pow(d, 2) + label * torch.pow(torch.clamp(margin - d, min=0.0), 2))


x1, x2 = data((6, 16, 10), salt=1), data((6, 16, 10), salt=2)
same = integers((6, 16, 1), 2, salt=3).float()
x2 = torch.where(same.bool(), x1 + 0.1 * x2, x2)
net = seed_free_init(Tower(), salt=2)
opt = torch.optim.Adam(net.parameters(), lr=5e-3, amsgrad=True)
for step in range(6):
    o1, o2 = net(x1[step], x2[step])
    loss = contrastive_loss(o1, o2, 1 - same[step])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('contrastive', step, f'{loss.item():.7f}')

triplet = nn.TripletMarginLoss(margin=0.5, p=2, swap=True)
cos_triplet = nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b),
                                               margin=0.3)
for step in range(5):
    a, p, n = net.forward_once(x1[step]), net.forward_once(x1[step] + 0.05 * x2[step]), net.forward_once(x2[step])
    loss = triplet(a, p, n) + cos_triplet(a, p, n)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('triplet', step, f'{loss.item():.7f}')

net.eval()
with torch.no_grad():
    a, b = net(x1[0], x2[0])
    y = same[0].squeeze(1) * 2 - 1
    print('cosine_emb', nn.CosineEmbeddingLoss(margin=0.2)(a, b, y).item(),
          nn.CosineEmbeddingLoss(reduction='none')(a, b, y)[:4].tolist())
    dist = F.pairwise_distance(a, b)
    print('hinge_emb', nn.HingeEmbeddingLoss(margin=1.5)(dist, y).item())
    print('ranking', nn.MarginRankingLoss(margin=0.1)(dist[:8], dist[8:], y[:8]).item())
    gallery = net.forward_once(x2[1])
    d = torch.cdist(a, gallery)
    vals, idx = d.topk(3, dim=1, largest=False)
    print('retrieval', idx[:4].tolist(), [round(v, 5) for v in vals[0].tolist()])
    print('pdist', F.pdist(a[:4]).shape, torch.allclose(F.pdist(a[:4])[0], (a[0] - a[1]).norm(), atol=1e-6))
print(triplet, cos_triplet, sep='\n')
