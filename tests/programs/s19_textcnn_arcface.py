# Sentence classification as Kim's CNN does it (an Embedding, Conv1d filters of widths 2/3/4 in a
# ModuleList, ReLU, max over time with F.max_pool1d(kernel=length) and with amax, concatenation), a
# head trained with an ArcFace additive angular margin (normalised features and class weights,
# acos of clamped cosines, cos(theta + m), one_hot scatter, scale s), Adadelta, then eval-time top-1
# by plain cosine similarity; gradients stay finite at the clamp.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init


class TextCNN(nn.Module):
    def __init__(self, vocab=40, dim=12, n_filters=6, widths=(2, 3, 4), out=16):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(dim, n_filters, w) for w in widths])
        self.fc = nn.Linear(n_filters * len(widths), out)

    def forward(self, text):
        x = self.embedding(text).permute(0, 2, 1)
        conved = [F.relu(conv(x)) for conv in self.convs]
        pooled = [F.max_pool1d(c, c.shape[2]).squeeze(2) for c in conved]
        assert all(torch.equal(p, c.amax(2)) for p, c in zip(pooled, conved))
        return self.fc(torch.cat(pooled, dim=1))


class ArcMargin(nn.Module):
    def __init__(self, in_features, classes, s=8.0, m=0.3):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(classes, in_features))
        self.s, self.m = s, m

    def forward(self, x, label):
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        theta = torch.acos(cosine.clamp(-1 + 1e-7, 1 - 1e-7))
        target = torch.cos(theta + self.m)
        one_hot = torch.zeros_like(cosine).scatter_(1, label.view(-1, 1), 1.0)
        return self.s * (one_hot * target + (1.0 - one_hot) * cosine), cosine


text = integers((5, 12, 10), 40, salt=131)
text[:, :, 8:] = 0
labels = integers((5, 12), 4, salt=132)
enc = seed_free_init(TextCNN(), salt=131)
head = seed_free_init(ArcMargin(16, 4), salt=132)
opt = torch.optim.Adadelta(list(enc.parameters()) + list(head.parameters()), lr=1.0, rho=0.9)
for epoch in range(2):
    for i in range(5):
        logits, cosine = head(enc(text[i]), labels[i])
        loss = F.cross_entropy(logits, labels[i])
        opt.zero_grad()
        loss.backward()
        finite = all(torch.isfinite(p.grad).all() for p in head.parameters())
        opt.step()
        print('epoch', epoch, i, f'{loss.item():.7f}', finite, f'{cosine.max().item():.6f}')
enc.eval()
with torch.no_grad():
    feats = F.normalize(enc(text.view(-1, 10)))
    pred = (feats @ F.normalize(head.weight).t()).argmax(1)
    acc = (pred == labels.view(-1)).float().mean()
print('accuracy', f'{acc.item():.4f}', pred[:10].tolist(), f'{math.degrees(head.m):.3f}')
print(enc.embedding.weight[0].abs().sum().item(), enc.convs)
