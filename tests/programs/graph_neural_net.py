# Graph neural networks written without a graph library, as tutorials do: an edge_index of
# (source, target) rows, node degrees by bincount and degree normalisation, GCN message passing
# with index_add_, a GAT-style layer whose per-target softmax over incoming edges is built from
# scatter_reduce("amax", include_self=False) + exp + scatter_add, GraphSAGE mean/max aggregation
# with scatter_reduce ("mean", "amax", "amin", "prod"), graph-level pooling of a batch of graphs
# by index_add_ / scatter_reduce over a batch vector, index_reduce_, and gradients through them all.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


def random_graph(num_nodes, num_edges):
    src = torch.randint(0, num_nodes, (num_edges,))
    dst = torch.randint(0, num_nodes, (num_edges,))
    keep = src != dst
    edge_index = torch.stack([src[keep], dst[keep]])
    # make it undirected and drop duplicate edges
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    edge_index = torch.unique(edge_index, dim=1)
    return edge_index


def add_self_loops(edge_index, num_nodes):
    loops = torch.arange(num_nodes).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loops], dim=1)


class GCNLayer(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.lin = nn.Linear(in_ch, out_ch, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_ch))

    def forward(self, x, edge_index):
        n = x.size(0)
        edge_index = add_self_loops(edge_index, n)
        row, col = edge_index
        deg = torch.bincount(col, minlength=n).to(x.dtype)
        deg_inv_sqrt = deg.pow(-0.5)
        deg_inv_sqrt[deg_inv_sqrt == float("inf")] = 0
        norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
        h = self.lin(x)
        msg = h[row] * norm.view(-1, 1)
        out = torch.zeros(n, h.size(1), dtype=h.dtype).index_add_(0, col, msg)
        return out + self.bias


def segment_softmax(scores, index, num_segments):
    # scores: [E, H]; index: [E] target node of every edge
    idx = index.view(-1, 1).expand_as(scores)
    smax = torch.full((num_segments, scores.size(1)), float("-inf")).scatter_reduce(
        0, idx, scores, reduce="amax", include_self=False)
    e = (scores - smax.gather(0, idx)).exp()
    denom = torch.zeros(num_segments, scores.size(1)).scatter_add_(0, idx, e)
    return e / (denom.gather(0, idx) + 1e-16)


class GATLayer(nn.Module):
    def __init__(self, in_ch, out_ch, heads=2):
        super().__init__()
        self.heads, self.out_ch = heads, out_ch
        self.lin = nn.Linear(in_ch, heads * out_ch, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_ch))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_ch))
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x, edge_index):
        n = x.size(0)
        edge_index = add_self_loops(edge_index, n)
        src, dst = edge_index
        h = self.lin(x).view(n, self.heads, self.out_ch)
        a_src = (h * self.att_src).sum(-1)
        a_dst = (h * self.att_dst).sum(-1)
        alpha = F.leaky_relu(a_src[src] + a_dst[dst], 0.2)
        alpha = segment_softmax(alpha, dst, n)
        self.last_alpha = alpha
        alpha = F.dropout(alpha, p=0.1, training=self.training)
        msg = h[src] * alpha.unsqueeze(-1)
        out = torch.zeros(n, self.heads, self.out_ch).index_add_(0, dst, msg)
        return out.mean(1)


class SAGELayer(nn.Module):
    def __init__(self, in_ch, out_ch, aggr="mean"):
        super().__init__()
        self.aggr = aggr
        self.lin_l = nn.Linear(in_ch, out_ch)
        self.lin_r = nn.Linear(in_ch, out_ch, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        idx = dst.view(-1, 1).expand(-1, x.size(1))
        agg = torch.zeros_like(x).scatter_reduce(0, idx, x[src], reduce=self.aggr, include_self=False)
        return self.lin_l(agg) + self.lin_r(x)


class NodeClassifier(nn.Module):
    def __init__(self, in_ch, hidden, classes):
        super().__init__()
        self.conv1 = GCNLayer(in_ch, hidden)
        self.conv2 = GATLayer(hidden, hidden)
        self.conv3 = SAGELayer(hidden, classes, aggr="amax")

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.2, training=self.training)
        x = F.elu(self.conv2(x, edge_index))
        return self.conv3(x, edge_index)


num_nodes, feats, classes = 30, 8, 3
edge_index = random_graph(num_nodes, 70)
print("edges", tuple(edge_index.shape), "first", edge_index[:, :6].tolist())
deg = torch.bincount(edge_index[1], minlength=num_nodes)
print("degree", deg.tolist(), "isolated", int((deg == 0).sum()))
x = torch.randn(num_nodes, feats)
y = torch.randint(0, classes, (num_nodes,))
train_mask = torch.rand(num_nodes) < 0.6
print("train nodes", int(train_mask.sum()))

model = NodeClassifier(feats, 16, classes)
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
for epoch in range(30):
    model.train()
    opt.zero_grad()
    out = model(x, edge_index)
    loss = F.cross_entropy(out[train_mask], y[train_mask])
    loss.backward()
    opt.step()
    if epoch % 5 == 0:
        print(f"epoch {epoch} loss {loss.item():.5f}")
model.eval()
with torch.no_grad():
    pred = model(x, edge_index).argmax(1)
    alpha = model.conv2.last_alpha
acc = (pred[~train_mask] == y[~train_mask]).float().mean()
print("test acc", round(acc.item(), 5), "pred", pred.tolist())
print("alpha sums to one per node", r(torch.zeros(num_nodes, 2).index_add_(
    0, add_self_loops(edge_index, num_nodes)[1], alpha)[:5]))

# every reduction of scatter_reduce, with and without include_self, and their gradients
src = torch.randn(10, 3, requires_grad=True)
index = torch.tensor([0, 1, 0, 2, 2, 2, 4, 1, 0, 4]).view(-1, 1).expand(-1, 3)
base = torch.randn(5, 3, requires_grad=True)
for reduce in ("sum", "prod", "mean", "amax", "amin"):
    for include_self in (True, False):
        out = base.scatter_reduce(0, index, src, reduce=reduce, include_self=include_self)
        gs, gb = torch.autograd.grad((out * torch.arange(15.0).view(5, 3)).sum(), (src, base))
        print(reduce, include_self, r(out[:, 0]), r(gs[:, 0]), r(gb[:, 0]))

# index_reduce_ (the newer API) with every reduction
for reduce in ("prod", "mean", "amax", "amin"):
    t = torch.ones(4, 2).index_reduce_(0, torch.tensor([0, 2, 0, 3]), torch.arange(8.0).view(4, 2) - 3,
                                        reduce, include_self=False)
    print("index_reduce", reduce, t.tolist())

# graph classification: a batch of small graphs, pooled per graph
graphs = [random_graph(n, 2 * n) for n in (5, 7, 4, 6)]
sizes = torch.tensor([5, 7, 4, 6])
offsets = torch.cumsum(sizes, 0) - sizes
batch_edge = torch.cat([g + o for g, o in zip(graphs, offsets.tolist())], dim=1)
batch = torch.repeat_interleave(torch.arange(4), sizes)
print("batch vector", batch.tolist())
bx = torch.randn(int(sizes.sum()), feats)
labels = torch.tensor([0, 1, 1, 0])


class GraphClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNLayer(feats, 16)
        self.conv2 = SAGELayer(16, 16, aggr="mean")
        self.head = nn.Linear(32, 2)

    def forward(self, x, edge_index, batch, num_graphs):
        h = F.relu(self.conv1(x, edge_index))
        h = F.relu(self.conv2(h, edge_index))
        counts = torch.bincount(batch, minlength=num_graphs).clamp(min=1).unsqueeze(1)
        mean_pool = torch.zeros(num_graphs, h.size(1)).index_add_(0, batch, h) / counts
        max_pool = torch.zeros(num_graphs, h.size(1)).scatter_reduce(
            0, batch.unsqueeze(1).expand_as(h), h, reduce="amax", include_self=False)
        return self.head(torch.cat([mean_pool, max_pool], dim=1))


gc = GraphClassifier()
opt = torch.optim.SGD(gc.parameters(), lr=0.05, momentum=0.9)
for step in range(15):
    opt.zero_grad()
    loss = F.cross_entropy(gc(bx, batch_edge, batch, 4), labels)
    loss.backward()
    opt.step()
    if step % 5 == 0:
        print(f"graph step {step} loss {loss.item():.5f}")
print("graph grads", r(gc.conv1.lin.weight.grad.norm()), r(gc.head.bias.grad))

# neighbourhood sampling with a sorted CSR view of the edge list
perm = torch.argsort(edge_index[0] * num_nodes + edge_index[1])
sorted_edges = edge_index[:, perm]
rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
rowptr[1:] = torch.cumsum(torch.bincount(sorted_edges[0], minlength=num_nodes), 0)
print("rowptr", rowptr.tolist())
seeds = torch.tensor([0, 3, 7])
nbrs = [sorted_edges[1, rowptr[s]:rowptr[s + 1]] for s in seeds.tolist()]
print("neighbours", [n.tolist() for n in nbrs])
hop2 = torch.unique(torch.cat(nbrs), sorted=True, return_inverse=True, return_counts=True)
print("two-hop", [t.tolist() for t in hop2])
print("searchsorted", torch.searchsorted(rowptr, torch.tensor([0, 10, 50, 200])).tolist())
