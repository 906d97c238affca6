# Representation learning and recommendation: SimCLR's NT-Xent (InfoNCE) loss over two random
# augmentations (F.normalize, a cosine-similarity matrix with its diagonal masked by
# masked_fill/fill_diagonal_, cross entropy against shifted labels, a temperature), a MoCo-style
# momentum encoder with a negative queue (in-place lerp under no_grad, queue slicing), triplet
# losses with hard-negative mining (cdist, topk, TripletMarginLoss and
# TripletMarginWithDistanceLoss with a cosine distance, CosineEmbeddingLoss, MarginRankingLoss),
# then a recommender: nn.EmbeddingBag in sum/mean/max modes with offsets, include_last_offset,
# per_sample_weights, padding_idx, a 2-D bag input and F.embedding_bag, a factorization machine,
# DLRM-style pairwise interactions through bmm + triu_indices, a BPR loss with sampled negatives,
# sparse embedding gradients with SparseAdam, and recall@k with topk and isin.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


def augment(x):
    # random horizontal flip, random shift, gaussian noise and random brightness per image
    flip = torch.rand(x.size(0)) < 0.5
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    shift = int(torch.randint(-2, 3, (1,)))
    x = torch.roll(x, shifts=shift, dims=-2)
    x = x + 0.1 * torch.randn_like(x)
    return x * torch.empty(x.size(0), 1, 1, 1).uniform_(0.8, 1.2)


class Encoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projector = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, dim))

    def forward(self, x):
        return self.projector(self.backbone(x))


def nt_xent(z1, z2, temperature=0.5):
    n = z1.size(0)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, labels)


def nt_xent_cosine(z1, z2, temperature=0.5):
    # the same loss written with F.cosine_similarity over broadcast pairs and fill_diagonal_
    z = torch.cat([z1, z2])
    sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=-1) / temperature
    sim.fill_diagonal_(-1e9)
    n = z1.size(0)
    pos = torch.cat([sim.diagonal(n), sim.diagonal(-n)])
    return (-pos + torch.logsumexp(sim, dim=1)).mean()


images = torch.rand(12, 1, 8, 8)
enc = Encoder()
opt = torch.optim.Adam(enc.parameters(), lr=3e-3)
for step in range(6):
    v1, v2 = augment(images), augment(images)
    z1, z2 = enc(v1), enc(v2)
    loss = nt_xent(z1, z2)
    alt = nt_xent_cosine(z1, z2)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"simclr step {step} loss {loss.item():.5f} cosine form {alt.item():.5f}")

# MoCo: key encoder follows the query encoder by momentum, negatives from a queue
key_enc = Encoder()
key_enc.load_state_dict(enc.state_dict())
for p in key_enc.parameters():
    p.requires_grad_(False)
queue = F.normalize(torch.randn(36, 16), dim=1)
ptr = 0
opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
for step in range(4):
    q = F.normalize(enc(augment(images)), dim=1)
    with torch.no_grad():
        for pq, pk in zip(enc.parameters(), key_enc.parameters()):
            pk.lerp_(pq, 0.01)
        k = F.normalize(key_enc(augment(images)), dim=1)
    l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
    l_neg = torch.einsum("nc,kc->nk", q, queue.clone().detach())
    logits = torch.cat([l_pos, l_neg], dim=1) / 0.07
    loss = F.cross_entropy(logits, torch.zeros(logits.size(0), dtype=torch.long))
    opt.zero_grad()
    loss.backward()
    opt.step()
    queue[ptr:ptr + k.size(0)] = k
    ptr = (ptr + k.size(0)) % queue.size(0)
    print(f"moco step {step} loss {loss.item():.5f} ptr {ptr}")

# metric learning with hard-negative mining
emb = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 8))
feats = torch.randn(24, 10)
cls = torch.arange(24) % 4
opt = torch.optim.Adam(emb.parameters(), lr=1e-2)
triplet = nn.TripletMarginLoss(margin=0.5, p=2, swap=True)
cos_triplet = nn.TripletMarginWithDistanceLoss(
    distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.3)
for step in range(5):
    e = emb(feats)
    d = torch.cdist(e, e)
    same = cls.unsqueeze(0) == cls.unsqueeze(1)
    hardest_pos = d.masked_fill(~same, -1.0).max(1).indices
    hardest_neg = d.masked_fill(same, float("inf")).topk(1, largest=False).indices.squeeze(1)
    loss = triplet(e, e[hardest_pos], e[hardest_neg]) + cos_triplet(e, e[hardest_pos], e[hardest_neg])
    opt.zero_grad()
    loss.backward()
    opt.step()
    neg_dist = d.masked_fill(same, 0).sum().item() / (~same).sum().item()
    print(f"triplet step {step} loss {loss.item():.5f} mean neg dist {neg_dist:.5f}")
a, b = torch.randn(6, 8), torch.randn(6, 8)
print("cosine embedding", r(nn.CosineEmbeddingLoss(margin=0.2)(a, b, torch.tensor([1, -1, 1, -1, 1, -1]))))
print("cosine embedding none", r(F.cosine_embedding_loss(a, b, torch.tensor([1, -1, 1, -1, 1, -1]), reduction="none")))
print("margin ranking", r(nn.MarginRankingLoss(margin=0.1)(a[:, 0], b[:, 0], torch.tensor([1, -1, 1, 1, -1, -1.0]))))
print("pairwise distance", r(F.pairwise_distance(a, b, p=1.5, keepdim=True).squeeze(1)))
print("pdist", r(F.pdist(a[:4])))

# --- recommendation ---
num_items, dim = 20, 6
bag = nn.EmbeddingBag(num_items, dim, mode="sum")
items = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7])
offsets = torch.tensor([0, 4, 4, 6])  # the third bag is empty
print("bag sum", r(bag(items, offsets).sum(1)))
w = torch.rand(items.numel())
print("bag weighted", r(bag(items, offsets, per_sample_weights=w).sum(1)))
for mode in ("mean", "max"):
    m = nn.EmbeddingBag.from_pretrained(bag.weight.detach().clone(), mode=mode, freeze=False)
    out = m(items, offsets)
    out.sum().backward()
    print("bag", mode, r(out[:, :3]), "grad rows", r(m.weight.grad.sum(1)))
last = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="mean", include_last_offset=True)
print("include_last_offset", r(last(items, torch.tensor([0, 4, 6, 9])).sum(1)))
padded = nn.EmbeddingBag(num_items, dim, mode="mean", padding_idx=0)
print("padding_idx row", r(padded.weight[0]), "bags", r(padded(torch.tensor([[0, 3, 5], [0, 0, 7]])).sum(1)))
print("functional bag", r(F.embedding_bag(items, bag.weight, offsets, mode="max").sum(1)))


class DLRM(nn.Module):
    def __init__(self, n_users, n_items, n_dense, dim=8):
        super().__init__()
        self.user = nn.Embedding(n_users, dim)
        self.item_hist = nn.EmbeddingBag(n_items, dim, mode="mean")
        self.item = nn.Embedding(n_items, dim)
        self.bottom = nn.Sequential(nn.Linear(n_dense, dim), nn.ReLU())
        n_feat = 4
        self.register_buffer("li", torch.triu_indices(n_feat, n_feat, offset=1)[0], persistent=False)
        self.register_buffer("lj", torch.triu_indices(n_feat, n_feat, offset=1)[1], persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + n_feat * (n_feat - 1) // 2, 16), nn.ReLU(), nn.Linear(16, 1))
        for m in self.modules():
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
                nn.init.normal_(m.weight, std=0.1)

    def forward(self, users, hist, hist_offsets, items, dense):
        feats = torch.stack([self.user(users), self.item_hist(hist, hist_offsets), self.item(items),
                             self.bottom(dense)], dim=1)
        inter = torch.bmm(feats, feats.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([self.bottom(dense), inter], dim=1)).squeeze(1)


n_users = 10
users = torch.randint(0, n_users, (16,))
hist = torch.randint(0, num_items, (40,))
hist_offsets = torch.sort(torch.randperm(39)[:15] + 1).values
hist_offsets = torch.cat([torch.zeros(1, dtype=torch.long), hist_offsets])
pos_items = torch.randint(0, num_items, (16,))
dense = torch.randn(16, 3)
model = DLRM(n_users, num_items, 3)
opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=1e-3, initial_accumulator_value=0.1)
for step in range(6):
    neg_items = torch.randint(0, num_items, (16,))
    pos = model(users, hist, hist_offsets, pos_items, dense)
    neg = model(users, hist, hist_offsets, neg_items, dense)
    loss = -F.logsigmoid(pos - neg).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"bpr step {step} loss {loss.item():.5f}")

# matrix factorization with sparse gradients
user_emb = nn.Embedding(n_users, 4, sparse=True)
item_emb = nn.Embedding(num_items, 4, sparse=True, max_norm=1.0)
biases = nn.Embedding(num_items, 1)
sparse_opt = torch.optim.SparseAdam(list(user_emb.parameters()) + list(item_emb.parameters()), lr=0.05)
dense_opt = torch.optim.Adam(biases.parameters(), lr=0.05)
ratings = torch.rand(30) * 4 + 1
u_idx, i_idx = torch.randint(0, n_users, (30,)), torch.randint(0, num_items, (30,))
for step in range(8):
    pred = (user_emb(u_idx) * item_emb(i_idx)).sum(1) + biases(i_idx).squeeze(1) + 3.0
    loss = F.mse_loss(pred, ratings)
    sparse_opt.zero_grad()
    dense_opt.zero_grad()
    loss.backward()
    if step == 0:
        g = user_emb.weight.grad
        print("sparse grad", g.is_sparse, tuple(g.coalesce().indices().shape), r(g.to_dense().sum(1)))
    sparse_opt.step()
    dense_opt.step()
    if step % 2 == 0:
        print(f"mf step {step} loss {loss.item():.5f} max item norm {item_emb.weight.norm(dim=1).max().item():.5f}")

# recall@k: score every item for every user, mask seen items, take the top k
with torch.no_grad():
    scores = user_emb.weight @ item_emb.weight.t()
    seen = torch.zeros_like(scores, dtype=torch.bool)
    seen[u_idx, i_idx] = True
    scores[seen] = float("-inf")
    topk = scores.topk(5, dim=1).indices
    held_out = torch.randint(0, num_items, (n_users, 2))
    hits = torch.stack([torch.isin(held_out[u], topk[u]).any() for u in range(n_users)])
    print("top5", topk[:3].tolist(), "recall@5", hits.float().mean().item())
