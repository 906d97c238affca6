# Karpathy's makemore lectures, from memory: bigram counts in an int32 table filled by N[ix1, ix2] += 1, smoothed
# probabilities P /= P.sum(1, keepdim=True), sampling names with torch.multinomial from a Generator seeded
# 2147483647, the negative log-likelihood; then the MLP (C = torch.randn(..., generator=g), emb = C[X], hidden
# layer with a hand-written BatchNorm and running statistics updated under no_grad, manual SGD p.data += -lr *
# p.grad with a learning-rate step, minibatches from torch.randint(generator=g)), "backprop ninja" manual gradients
# of the cross-entropy and batchnorm compared with autograd's (torch.allclose), and sampling from the trained model.
import torch
import torch.nn.functional as F

words = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia", "harper", "evelyn", "abigail",
         "emily", "elizabeth", "mila", "ella", "avery", "sofia", "camila", "aria", "scarlett", "victoria", "madison",
         "luna", "grace", "chloe", "penelope", "layla", "riley", "zoey", "nora", "lily", "eleanor", "hannah"]
chars = sorted(set("".join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
itos = {i: s for s, i in stoi.items()}
V = len(stoi)
print("vocab", V, "".join(itos[i] for i in range(V)))

N = torch.zeros((V, V), dtype=torch.int32)
for w in words:
    chs = ["."] + list(w) + ["."]
    for ch1, ch2 in zip(chs, chs[1:]):
        N[stoi[ch1], stoi[ch2]] += 1
print(N.dtype, N.sum().item(), N[0].tolist()[:10], N.max().item())
P = (N + 1).float()
P /= P.sum(1, keepdim=True)  # the lecture writes keepdims=True: ember lacks NumPy's keyword aliases (deviations.md)
g = torch.Generator().manual_seed(2147483647)
for _ in range(5):
    out, ix = [], 0
    while True:
        ix = torch.multinomial(P[ix], num_samples=1, replacement=True, generator=g).item()
        out.append(itos[ix])
        if ix == 0:
            break
    print("".join(out))
log_likelihood, n = 0.0, 0
for w in words:
    chs = ["."] + list(w) + ["."]
    for ch1, ch2 in zip(chs, chs[1:]):
        log_likelihood += torch.log(P[stoi[ch1], stoi[ch2]])
        n += 1
print(f"nll {(-log_likelihood / n).item():.6f}")

block_size = 3


def build_dataset(ws):
    X, Y = [], []
    for w in ws:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y)


Xtr, Ytr = build_dataset(words[:28])
Xdev, Ydev = build_dataset(words[28:])
print(Xtr.shape, Ytr.shape, Xdev.shape, Xtr.dtype)

n_embd, n_hidden = 6, 32
g = torch.Generator().manual_seed(2147483647)
C = torch.randn((V, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5 / 3) / ((n_embd * block_size) ** 0.5)
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, V), generator=g) * 0.1
b2 = torch.randn(V, generator=g) * 0.1
bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
bnbias = torch.randn((1, n_hidden)) * 0.1
bnmean_running = torch.zeros((1, n_hidden))
bnstd_running = torch.ones((1, n_hidden))
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
print("params", sum(p.nelement() for p in parameters))
for p in parameters:
    p.requires_grad = True

batch_size = 16
for i in range(12):
    ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
    Xb, Yb = Xtr[ix], Ytr[ix]
    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmeani = hprebn.mean(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bnvar = (bndiff ** 2).sum(0, keepdim=True) / (batch_size - 1)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    with torch.no_grad():
        bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
        bnstd_running = 0.999 * bnstd_running + 0.001 * hprebn.std(0, keepdim=True)
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    loss = F.cross_entropy(logits, Yb)
    for p in parameters:
        p.grad = None
    for t in (hprebn, hpreact, logits, h):
        t.retain_grad()
    loss.backward()
    if i == 0:
        dlogits = F.softmax(logits, 1)
        dlogits[range(batch_size), Yb] -= 1
        dlogits /= batch_size
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h ** 2) * dh
        dhprebn = bngain * bnvar_inv / batch_size * (batch_size * dhpreact - dhpreact.sum(0) - batch_size / (
            batch_size - 1) * bnraw * (dhpreact * bnraw).sum(0))
        for name, mine, ref in (("logits", dlogits, logits.grad), ("h", dh, h.grad), ("W2", dW2, W2.grad),
                                ("b2", db2, b2.grad), ("hpreact", dhpreact, hpreact.grad),
                                ("hprebn", dhprebn, hprebn.grad)):
            # (the lecture's "exact" column depends on the BLAS's rounding, so only the approximate one)
            print(f"{name:8s} | approximate: {torch.allclose(mine, ref, atol=1e-6)!s:5} | "
                  f"maxdiff below 1e-6: {((mine - ref).abs().max() < 1e-6).item()} | shape {tuple(mine.shape)}")
    lr = 0.1 if i < 8 else 0.01
    for p in parameters:
        p.data += -lr * p.grad
    print(f"{i:7d}/{12:7d}: {loss.item():.4f}")


@torch.no_grad()
def split_loss(x, y):
    emb = C[x]
    hpreact = emb.view(emb.shape[0], -1) @ W1 + b1
    hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
    logits = torch.tanh(hpreact) @ W2 + b2
    return F.cross_entropy(logits, y).item()


print(f"train {split_loss(Xtr, Ytr):.6f} val {split_loss(Xdev, Ydev):.6f}")
g = torch.Generator().manual_seed(2147483647 + 10)
for _ in range(4):
    out, context = [], [0] * block_size
    with torch.no_grad():
        while True:
            emb = C[torch.tensor([context])]
            hpreact = emb.view(1, -1) @ W1 + b1
            hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
            probs = F.softmax(torch.tanh(hpreact) @ W2 + b2, dim=1)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 12:
                break
    print("".join(itos[i] for i in out))
