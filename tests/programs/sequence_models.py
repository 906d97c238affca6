# Sequence models from the PyTorch tutorials: an nn.Transformer/TransformerEncoder with causal
# and key-padding masks (batch_first and not, norm_first), nn.MultiheadAttention with kdim/vdim,
# per-head weights and attn_mask, the torchtext tutorial's EmbeddingBag text classifier with
# offsets, bidirectional GRU/LSTM over packed padded sequences (pack_padded_sequence,
# pad_packed_sequence, pack_sequence, enforce_sorted=False), and a CTC-trained recognizer.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=50):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(0)]


class TransformerLM(nn.Module):
    def __init__(self, ntoken=20, d_model=16, nhead=2, d_hid=32, nlayers=2):
        super().__init__()
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask=None, pad_mask=None):
        h = self.pos(self.embedding(src) * math.sqrt(16))
        return self.linear(self.encoder(h, src_mask, src_key_padding_mask=pad_mask, is_causal=src_mask is not None))


lm = TransformerLM()
opt = torch.optim.SGD(lm.parameters(), lr=0.5)
data = torch.randint(0, 20, (9, 4))
mask = nn.Transformer.generate_square_subsequent_mask(8)
print("causal mask", mask[1].tolist())
for step in range(3):
    lm.train()
    out = lm(data[:-1], mask)
    loss = F.cross_entropy(out.view(-1, 20), data[1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(lm.parameters(), 0.5)
    opt.step()
    print("lm step", step, round(loss.item(), 5))
lm.eval()
pad = torch.zeros(4, 8, dtype=torch.bool)
pad[1, 6:] = True
pad[3, 4:] = True
with torch.no_grad():
    print("eval padded", r(lm(data[:-1], mask, pad)[:4, 0, :3]))

tr = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16,
                    dropout=0.0, batch_first=True, norm_first=True)
src, tgt = torch.randn(2, 5, 8), torch.randn(2, 4, 8)
src_pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
out = tr(src, tgt, tgt_mask=tr.generate_square_subsequent_mask(4), src_key_padding_mask=src_pad,
         memory_key_padding_mask=src_pad, tgt_is_causal=True)
print("seq2seq transformer", tuple(out.shape), r(out[1, -1]))
out.pow(2).mean().backward()
print("transformer grad", round(tr.encoder.layers[0].self_attn.in_proj_weight.grad.abs().sum().item(), 5))

mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)
q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 5), torch.randn(2, 6, 3)
kpm = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
o, w = mha(q, k, v, key_padding_mask=kpm)
print("mha kdim/vdim", tuple(o.shape), tuple(w.shape), r(w[1, 0]))
o, w = mha(q, k, v, key_padding_mask=kpm, need_weights=True, average_attn_weights=False,
           attn_mask=torch.triu(torch.ones(4, 6, dtype=torch.bool), 3))
print("per-head weights", tuple(w.shape), r(w[0, 1, 0]), r(o[0, 0]))
mha2 = nn.MultiheadAttention(6, 3, bias=False, add_bias_kv=True, add_zero_attn=True, dropout=0.0)
x = torch.randn(5, 2, 6)
o, w = mha2(x, x, x, attn_mask=torch.zeros(5, 5))
print("bias_kv zero_attn", tuple(o.shape), tuple(w.shape), r(o[0, 0]))
o, w = mha2(x, x, x, need_weights=False)
print("no weights", w, tuple(o.shape))
float_mask = torch.zeros(2 * 3, 5, 5).masked_fill(torch.rand(6, 5, 5) > 0.7, float("-inf"))
float_mask[:, :, 0] = 0
o, _ = nn.MultiheadAttention(6, 3)(x, x, x, attn_mask=float_mask)
print("3d float mask", r(o[1, 1]))


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.embedding.weight.data.uniform_(-0.5, 0.5)
        self.fc.weight.data.uniform_(-0.5, 0.5)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


texts = [torch.randint(1, 30, (n,)) for n in (5, 3, 7, 2, 4, 6)]
labels = torch.tensor([0, 1, 2, 1, 0, 3])
text = torch.cat(texts)
offsets = torch.tensor([0] + [len(t) for t in texts[:-1]]).cumsum(0)
clf = TextClassificationModel(30, 8, 4)
opt = torch.optim.SGD(clf.parameters(), lr=5.0)
sched = torch.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.1)
for epoch in range(3):
    opt.zero_grad()
    logits = clf(text, offsets)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    nn.utils.clip_grad_norm_(clf.parameters(), 0.1)
    opt.step()
    sched.step()
    print("textclf", epoch, round(loss.item(), 6), (logits.argmax(1) == labels).sum().item())
bag = nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
print("bag max 2d", r(bag(torch.tensor([[1, 2, 0], [3, 0, 0]]))))
bag_sum = nn.EmbeddingBag.from_pretrained(torch.arange(12.0).view(4, 3), mode="sum")
print("bag weights", r(bag_sum(torch.tensor([1, 2, 3, 1]), torch.tensor([0, 2]),
                               per_sample_weights=torch.tensor([1.0, 0.5, 2.0, -1.0]))))
print("bag include_last", r(F.embedding_bag(torch.tensor([0, 1, 2, 3]), torch.arange(12.0).view(4, 3),
                                            torch.tensor([0, 1, 4]), mode="mean", include_last_offset=True)))

seqs = [torch.randn(n, 3) for n in (4, 2, 5)]
lengths = torch.tensor([4, 2, 5])
padded = pad_sequence(seqs, batch_first=True)
packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
print("packed", packed.batch_sizes.tolist(), packed.sorted_indices.tolist(), packed.unsorted_indices.tolist())
gru = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True)
out, h = gru(packed)
unpacked, out_lens = pad_packed_sequence(out, batch_first=True, total_length=6)
print("gru packed", tuple(unpacked.shape), out_lens.tolist(), r(h[-1, 1]), r(unpacked[1, 2]))
lstm = nn.LSTM(3, 4, bidirectional=True, proj_size=2)
out, (h, c) = lstm(pack_sequence(seqs, enforce_sorted=False))
unpacked, _ = pad_packed_sequence(out, padding_value=-1.0)
print("lstm packed proj", tuple(unpacked.shape), r(unpacked[:, 1, 0]), r(h[1, 2]), r(c[0, 0]))
(unpacked.clamp(min=0).sum() + h.sum()).backward()
print("lstm grad", round(lstm.weight_hh_l0_reverse.grad.abs().sum().item(), 5))
sorted_packed = pack_padded_sequence(pad_sequence(sorted(seqs, key=len, reverse=True)), torch.tensor([5, 4, 2]))
print("enforce_sorted", sorted_packed.sorted_indices, r(nn.RNN(3, 2)(sorted_packed)[1][0, 2]))

T, N, C, S = 12, 3, 6, 4
rec = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, C))
ctc = nn.CTCLoss(blank=0, zero_infinity=True)
feats = torch.randn(T, N, 5)
targets = torch.randint(1, C, (N, S))
in_lens = torch.tensor([12, 10, 8])
tgt_lens = torch.tensor([4, 3, 2])
opt = torch.optim.Adam(rec.parameters(), lr=0.01)
for step in range(4):
    log_probs = rec(feats).log_softmax(2)
    loss = ctc(log_probs, targets, in_lens, tgt_lens)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("ctc step", step, round(loss.item(), 5))
flat_targets = torch.cat([targets[i, :n] for i, n in enumerate(tgt_lens.tolist())])
lp = rec(feats).log_softmax(2).detach().requires_grad_()
per = F.ctc_loss(lp, flat_targets, in_lens, tgt_lens, reduction="none")
per.sum().backward()
print("ctc flat targets", r(per), round(lp.grad.abs().sum().item(), 4))
print("ctc impossible", r(F.ctc_loss(lp[:2], targets, torch.tensor([2, 2, 2]), tgt_lens, reduction="none")),
      r(F.ctc_loss(lp[:2], targets, torch.tensor([2, 2, 2]), tgt_lens, zero_infinity=True, reduction="sum")))
