# Sparse tensors as programs use them: a COO adjacency built from an edge list (duplicates
# summed by coalesce), row-normalized, used in torch.sparse.mm inside a training loop with
# gradients to the dense side, CSR conversion and matmul, sparse sums, to_dense, index_select,
# and the errors for bad indices.
import torch
import torch.nn as nn

torch.manual_seed(0)
n = 6
edges = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 0, 0], [1, 0, 2, 1, 4, 3, 0, 5, 1]])
vals = torch.ones(edges.size(1))
adj = torch.sparse_coo_tensor(edges, vals, (n, n))
print("coalesced?", adj.is_coalesced(), adj._nnz())
adj = (adj + torch.sparse_coo_tensor(torch.arange(n).repeat(2, 1), torch.ones(n), (n, n))).coalesce()
print("indices", adj.indices().tolist(), adj.values().tolist())
deg = torch.sparse.sum(adj, dim=1).to_dense()
print("degree", deg.tolist())
r, c = adj.indices()
norm_adj = torch.sparse_coo_tensor(adj.indices(), adj.values() / deg[r], adj.shape).coalesce()
x = torch.randn(n, 4)
y = torch.tensor([0, 1, 0, 1, 1, 0])
lin1, lin2 = nn.Linear(4, 8), nn.Linear(8, 2)
opt = torch.optim.Adam(list(lin1.parameters()) + list(lin2.parameters()), lr=0.05)
for epoch in range(5):
    opt.zero_grad()
    h = torch.relu(torch.sparse.mm(norm_adj, lin1(x)))
    out = torch.sparse.mm(norm_adj, lin2(h))
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    print("epoch {} loss {:.6f}".format(epoch, loss.item()))
csr = norm_adj.to_sparse_csr()
print("csr", csr.crow_indices().tolist(), csr.col_indices().tolist(), csr.layout)
dense = torch.randn(n, 3)
print("csr mm", torch.allclose(csr @ dense, norm_adj.to_dense() @ dense, atol=1e-6))
print("dense + sparse", (torch.eye(n) + norm_adj).layout, (torch.eye(n) + norm_adj).trace().item())
print("index_select", adj.index_select(0, torch.tensor([0, 2])).to_dense().tolist())
print("transpose", adj.t().coalesce().indices()[0].tolist())
print("mul scalar", (adj * 2).coalesce().values().tolist()[:4], torch.sparse.sum(adj).item())
print("to_sparse", torch.tensor([[0, 1.5], [0, 0]]).to_sparse().indices().tolist(), x.to_sparse(1).values().shape)
w = torch.randn(n, n, requires_grad=True)
s = torch.sparse_coo_tensor(edges[:, :4], torch.tensor([1.0, 2.0, 3.0, 4.0]), (n, n), requires_grad=True)
torch.sparse.mm(s, w).sum().backward()
print("sparse grads", s.grad.coalesce().values().numpy().round(5).tolist(), w.grad.sum(1).tolist())
# (ember checks indices whatever check_invariants says: docs/deviations.md "Sparse tensors")
for bad in [lambda: torch.sparse_coo_tensor(torch.tensor([[0, 7]]), torch.ones(2), (3,), check_invariants=True),
            lambda: torch.sparse_coo_tensor(torch.tensor([[0, -1]]), torch.ones(2), (3,), check_invariants=True),
            lambda: torch.sparse_coo_tensor(torch.tensor([0, 1]), torch.ones(2), (3,)),
            lambda: torch.sparse.mm(adj, torch.ones(4, 2)),
            lambda: torch.mm(torch.ones(2, 5), adj),
            lambda: adj.to_sparse_csr() @ torch.ones(4),
            lambda: torch.mm(adj, torch.ones(6, 2, dtype=torch.double))]:
    try:
        print("no error", bad())
    except (RuntimeError, ValueError, IndexError) as e:
        print(type(e).__name__, e)
