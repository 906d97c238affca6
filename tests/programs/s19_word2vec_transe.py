# Embedding-learning programs as tutorials write them: word2vec skip-gram with negative sampling
# (two nn.Embedding tables, bmm of context against center vectors, F.logsigmoid, negatives drawn by
# NumPy from a unigram^0.75 table, SparseAdam on sparse=True tables), nearest words by cosine
# similarity (F.normalize + mm + topk); then TransE for a tiny knowledge graph (entity/relation
# embeddings, L1/L2 translation distance via torch.norm(p=...), nn.MarginRankingLoss over corrupted
# triples, entity renormalisation with torch.renorm / Embedding max_norm).
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import seed_free_init

rs = np.random.RandomState(5)
vocab = 30
corpus = rs.zipf(1.6, size=400) % vocab
counts = np.bincount(corpus, minlength=vocab).astype(np.float64)
unigram = counts ** 0.75 / (counts ** 0.75).sum()
pairs = [(corpus[i], corpus[j]) for i in range(len(corpus))
         for j in range(max(0, i - 2), min(len(corpus), i + 3)) if i != j]
pairs = np.array(pairs[:960])


class SkipGram(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.u = nn.Embedding(vocab, dim, sparse=True)
        self.v = nn.Embedding(vocab, dim, sparse=True)

    def forward(self, center, context, negatives):
        u = self.u(center)                       # (B, D)
        v = self.v(context)                      # (B, D)
        n = self.v(negatives)                    # (B, K, D)
        pos = F.logsigmoid((u * v).sum(1))
        neg = F.logsigmoid(-torch.bmm(n, u.unsqueeze(2)).squeeze(2)).sum(1)
        return -(pos + neg).mean()


model = seed_free_init(SkipGram(vocab, 8), salt=121)
opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
for step in range(8):
    batch = pairs[step * 120:(step + 1) * 120]
    neg = torch.from_numpy(rs.choice(vocab, size=(len(batch), 5), p=unigram))
    loss = model(torch.from_numpy(batch[:, 0]), torch.from_numpy(batch[:, 1]), neg)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('skipgram', step, f'{loss.item():.7f}')
with torch.no_grad():
    emb = F.normalize(model.u.weight, dim=1)
    sims = emb[:3] @ emb.t()
    sims[torch.arange(3), torch.arange(3)] = -2
    vals, idx = sims.topk(3, dim=1)
print('neighbours', idx.tolist(), [[round(v, 5) for v in row] for row in vals.tolist()])


class TransE(nn.Module):
    def __init__(self, n_ent, n_rel, dim, p):
        super().__init__()
        self.ent = nn.Embedding(n_ent, dim, max_norm=1.0)
        self.rel = nn.Embedding(n_rel, dim)
        self.p = p

    def score(self, h, r, t):
        return torch.norm(self.ent(h) + self.rel(r) - self.ent(t), p=self.p, dim=1)


triples = torch.from_numpy(rs.randint(0, [12, 3, 12], size=(48, 3)))
corrupt = triples.clone()
corrupt[:, 2] = torch.from_numpy(rs.randint(0, 12, size=48))
for p in (1, 2):
    kg = seed_free_init(TransE(12, 3, 6, p), salt=122)
    opt = torch.optim.SGD(kg.parameters(), lr=0.05)
    crit = nn.MarginRankingLoss(margin=1.0)
    for step in range(6):
        pos = kg.score(triples[:, 0], triples[:, 1], triples[:, 2])
        neg = kg.score(corrupt[:, 0], corrupt[:, 1], corrupt[:, 2])
        loss = crit(neg, pos, torch.ones_like(pos))
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            kg.rel.weight.copy_(torch.renorm(kg.rel.weight, p=2, dim=0, maxnorm=1.0))
        print('transe', p, step, f'{loss.item():.7f}', f'{kg.ent.weight.norm(dim=1).max().item():.6f}')
    with torch.no_grad():
        ranks = (kg.score(triples[:5, 0].repeat_interleave(12), triples[:5, 1].repeat_interleave(12),
                          torch.arange(12).repeat(5)).view(5, 12).argsort(1) == triples[:5, 2:3]).nonzero()[:, 1]
    print('ranks', (ranks + 1).tolist(), f'MRR {(1.0 / (ranks + 1).float()).mean().item():.6f}')
