# Sparse gradients in recommendation-style models: nn.EmbeddingBag(mode='sum', sparse=True) with
# offsets and per_sample_weights, nn.Embedding(sparse=True) whose .grad is a sparse COO tensor
# (indices/values after coalesce), SparseAdam for the sparse parameters alongside Adam for the
# dense ones, SGD on sparse grads, Embedding.from_pretrained(freeze=...), padding_idx and max_norm.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


class BagModel(nn.Module):
    def __init__(self, num=20, dim=6):
        super().__init__()
        self.bag = nn.EmbeddingBag(num, dim, mode='sum', sparse=True)
        self.item = nn.Embedding(num, dim, sparse=True)
        self.fc = nn.Linear(2 * dim, 1)

    def forward(self, text, offsets, weights, item):
        return self.fc(torch.cat([self.bag(text, offsets, per_sample_weights=weights), self.item(item)], 1)).squeeze(1)


model = seed_free_init(BagModel(), salt=81)
text = integers((5, 14), 20, salt=81)
offsets = torch.tensor([0, 3, 3, 7, 12])
weights = data((5, 14), salt=82, low=0.1, high=1.0)
items = integers((5, 5), 20, salt=83)
y = data((5, 5), salt=84)
sparse_params = list(model.bag.parameters()) + list(model.item.parameters())
sparse_opt = torch.optim.SparseAdam(sparse_params, lr=0.05)
dense_opt = torch.optim.Adam(model.fc.parameters(), lr=0.05)
for step in range(5):
    pred = model(text[step], offsets, weights[step], items[step])
    loss = F.mse_loss(pred, y[step])
    sparse_opt.zero_grad()
    dense_opt.zero_grad()
    loss.backward()
    g = model.item.weight.grad
    print('step', step, f'{loss.item():.7f}', g.is_sparse, g.layout, sorted(set(g.coalesce().indices()[0].tolist())),
          model.bag.weight.grad._nnz())
    sparse_opt.step()
    dense_opt.step()
print(sparse_opt)
print(sorted(sparse_opt.state_dict()['state'][0].keys()), sparse_opt.state[model.item.weight]['step'])

emb = seed_free_init(nn.Embedding(10, 4, sparse=True, padding_idx=0), salt=85)
sgd = torch.optim.SGD(emb.parameters(), lr=0.5)
idx = torch.tensor([[0, 2, 2, 5], [5, 0, 9, 2]])
out = emb(idx)
out.pow(2).sum().backward()
g = emb.weight.grad.coalesce()
print(g.indices().tolist(), [round(v, 5) for v in g.values().sum(1).tolist()])
before = emb.weight[2].clone()
sgd.step()
print('sgd sparse', torch.allclose(emb.weight[2], before - 0.5 * g.to_dense()[2]), emb.weight[0].tolist())

pre = data((6, 3), salt=86) * 4
frozen = nn.Embedding.from_pretrained(pre)
free = nn.Embedding.from_pretrained(pre, freeze=False, max_norm=1.0)
print(frozen.weight.requires_grad, free.weight.requires_grad, frozen)
print(free)
v = free(torch.tensor([1, 3]))
print([round(n, 5) for n in v.norm(dim=1).tolist()], [round(n, 5) for n in free.weight.norm(dim=1).tolist()])
bag = nn.EmbeddingBag.from_pretrained(pre, mode='max')
expected = torch.stack([pre[[0, 1]].max(0).values, pre[[2, 5]].max(0).values])
print(bag(torch.tensor([[0, 1], [2, 5]])).tolist() == expected.tolist())
