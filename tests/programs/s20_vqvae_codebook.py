# A VQ-VAE as the zalandoresearch / rosinality / lucidrains vector-quantize code writes it, from memory: an
# encoder of strided convs, VectorQuantizer with distances ||z||^2 + ||e||^2 - 2 z.e (and torch.cdist),
# argmin codes, one_hot / scatter_ encodings, the straight-through estimator z + (z_q - z).detach(),
# commitment loss with detach, perplexity from avg_probs, an EMA codebook update (cluster sizes with
# Laplace smoothing, embed_sum through encodings.t() @ flat and index_add_, requires_grad=False buffers), and
# dead-code restart picking replacement vectors by index.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class VectorQuantizerEMA(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost, decay, epsilon=1e-5):
        super().__init__()
        self._embedding_dim, self._num_embeddings = embedding_dim, num_embeddings
        self._embedding = nn.Embedding(num_embeddings, embedding_dim)
        self._embedding.weight.data.normal_()
        self._commitment_cost = commitment_cost
        self.register_buffer("_ema_cluster_size", torch.zeros(num_embeddings))
        self._ema_w = nn.Parameter(torch.Tensor(num_embeddings, embedding_dim))
        self._ema_w.data.normal_()
        self._decay, self._epsilon = decay, epsilon

    def forward(self, inputs, use_cdist=False):
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)
        if use_cdist:
            distances = torch.cdist(flat_input, self._embedding.weight) ** 2
        else:
            distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True) + torch.sum(self._embedding.weight ** 2, dim=1)
                         - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        if self.training:
            self._ema_cluster_size = self._ema_cluster_size * self._decay + (1 - self._decay) * torch.sum(encodings, 0)
            n = torch.sum(self._ema_cluster_size.data)
            self._ema_cluster_size = ((self._ema_cluster_size + self._epsilon)
                                      / (n + self._num_embeddings * self._epsilon) * n)
            dw = torch.matmul(encodings.t(), flat_input)
            self._ema_w = nn.Parameter(self._ema_w * self._decay + (1 - self._decay) * dw)
            self._embedding.weight = nn.Parameter(self._ema_w / self._ema_cluster_size.unsqueeze(1))
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        loss = self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encoding_indices.view(input_shape[:-1])


class VQVAE(nn.Module):
    def __init__(self, hidden=8, emb_dim=4, codes=6):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, hidden, 4, 2, 1), nn.ReLU(True), nn.Conv2d(hidden, emb_dim, 3, 1, 1))
        self.vq = VectorQuantizerEMA(codes, emb_dim, 0.25, 0.9)
        self.decoder = nn.Sequential(nn.Conv2d(emb_dim, hidden, 3, 1, 1), nn.ReLU(True),
                                     nn.ConvTranspose2d(hidden, 1, 4, 2, 1))

    def forward(self, x, use_cdist=False):
        z = self.encoder(x)
        loss, quantized, perplexity, codes = self.vq(z, use_cdist)
        return loss, self.decoder(quantized), perplexity, codes


model = seed_free_init(VQVAE(), salt=331)
with torch.no_grad():
    model.vq._ema_w.copy_(data((6, 4), salt=332))
    model.vq._embedding.weight.copy_(data((6, 4), salt=333))
images = data((16, 1, 8, 8), salt=334)
opt = torch.optim.Adam(model.parameters(), lr=2e-3, amsgrad=False)
for step in range(6):
    x = images[(step % 2) * 8:(step % 2) * 8 + 8]
    vq_loss, recon, perplexity, codes = model(x, use_cdist=step >= 3)
    recon_error = F.mse_loss(recon, x) / 0.5
    loss = recon_error + vq_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} recon {recon_error.item():.6f} vq {vq_loss.item():.6f} perplexity {perplexity.item():.5f} "
          f"codes {torch.bincount(codes.flatten(), minlength=6).tolist()}")
print("ema buffers", model.vq._ema_cluster_size.requires_grad,
      [round(v, 4) for v in model.vq._ema_cluster_size.tolist()])

# dead-code restart and an index_add_-based EMA (the lucidrains form)
codebook = data((6, 4), salt=335).clone()
cluster_size = torch.zeros(6)
embed_avg = codebook.clone()
flat = data((40, 4), salt=336)
for it in range(3):
    dist = -(flat.pow(2).sum(1, keepdim=True) - 2 * flat @ codebook.t() + codebook.pow(2).sum(1)[None])
    ind = dist.max(dim=-1).indices
    onehot = F.one_hot(ind, 6).type(flat.dtype)
    cluster_size.mul_(0.8).add_(onehot.sum(0), alpha=0.2)
    embed_sum = torch.zeros_like(codebook).index_add_(0, ind, flat)
    embed_avg.mul_(0.8).add_(embed_sum, alpha=0.2)
    n = cluster_size.sum()
    smoothed = (cluster_size + 1e-5) / (n + 6 * 1e-5) * n
    codebook = embed_avg / smoothed.unsqueeze(1)
    dead = cluster_size < 1.0
    if dead.any():
        replace = flat[torch.arange(int(dead.sum())) * 3]
        codebook[dead] = replace
    print(f"ema {it} dead {dead.nonzero().flatten().tolist()} counts {torch.bincount(ind, minlength=6).tolist()} "
          f"codebook {codebook.abs().sum().item():.6f}")
