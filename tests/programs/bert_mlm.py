# A BERT-style masked language model, as tutorials write one: word + position + token-type
# embeddings with LayerNorm, nn.TransformerEncoder (norm_first=False, gelu, batch_first, a final
# norm, enable_nested_tensor left on) with src_key_padding_mask, the 80/10/10 masking recipe from
# bernoulli draws and randint, a decoder tied to the word embeddings, CrossEntropyLoss with
# ignore_index=-100, a pooled [CLS] output through tanh for a sentence-pair head, AdamW with
# no-decay parameter groups, linear warmup/decay through LambdaLR, gradient accumulation; then
# evaluation under inference_mode (printing only non-padded positions: PyTorch's nested-tensor fast
# path zeroes the padded ones, docs/deviations.md), attention maps from nn.MultiheadAttention with
# need_weights, average_attn_weights=False and a float key_padding_mask, and top-k fills of [MASK].
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
PAD, CLS, SEP, MASK = 0, 1, 2, 3
VOCAB, DIM, MAXLEN = 40, 32, 16


def r(t, n=4):
    return t.detach().numpy().round(n).tolist()


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.position = nn.Embedding(MAXLEN, DIM)
        self.token_type = nn.Embedding(2, DIM)
        self.norm = nn.LayerNorm(DIM, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(MAXLEN).expand(1, -1), persistent=False)

    def forward(self, ids, types):
        pos = self.position_ids[:, : ids.size(1)]
        return self.drop(self.norm(self.word(ids) + self.position(pos) + self.token_type(types)))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()
        layer = nn.TransformerEncoderLayer(DIM, 4, dim_feedforward=64, dropout=0.1, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(DIM), enable_nested_tensor=True)
        self.transform = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.LayerNorm(DIM, eps=1e-12))
        self.decoder = nn.Linear(DIM, VOCAB)
        self.decoder.weight = self.embeddings.word.weight
        self.pooler = nn.Linear(DIM, DIM)
        self.pair_head = nn.Linear(DIM, 2)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
            if m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()

    def forward(self, ids, types):
        pad_mask = ids == PAD
        h = self.encoder(self.embeddings(ids, types), src_key_padding_mask=pad_mask)
        logits = self.decoder(self.transform(h))
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return logits, self.pair_head(pooled), h


def make_batch(n):
    ids = torch.full((n, MAXLEN), PAD)
    types = torch.zeros(n, MAXLEN, dtype=torch.long)
    lengths = torch.randint(6, MAXLEN + 1, (n,))
    for i, length in enumerate(lengths.tolist()):
        first = (length - 3) // 2
        a = torch.randint(4, VOCAB, (first,))
        b = torch.randint(4, VOCAB, (length - 3 - first,))
        seq = torch.cat([torch.tensor([CLS]), a, torch.tensor([SEP]), b, torch.tensor([SEP])])
        ids[i, :length] = seq
        types[i, first + 2:length] = 1
    is_next = torch.randint(0, 2, (n,))
    return ids, types, is_next


def mask_tokens(ids, prob=0.15):
    labels = ids.clone()
    special = (ids == PAD) | (ids == CLS) | (ids == SEP)
    probs = torch.full(ids.shape, prob).masked_fill(special, 0.0)
    masked = torch.bernoulli(probs).bool()
    labels[~masked] = -100
    replace = torch.bernoulli(torch.full(ids.shape, 0.8)).bool() & masked
    inputs = ids.masked_fill(replace, MASK)
    randomize = torch.bernoulli(torch.full(ids.shape, 0.5)).bool() & masked & ~replace
    inputs = torch.where(randomize, torch.randint(4, VOCAB, ids.shape), inputs)
    return inputs, labels


model = Bert()
print("tied", model.decoder.weight is model.embeddings.word.weight, "params",
      sum(p.numel() for p in model.parameters()))
no_decay = ("bias", "norm", "LayerNorm")
groups = [
    {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
]
print("group sizes", [len(g["params"]) for g in groups])
opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
total, warmup = 12, 3
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: s / warmup if s < warmup else max(0.0, (total - s) / (total - warmup)))
accum = 2
model.train()
for step in range(total):
    for micro in range(accum):
        ids, types, is_next = make_batch(6)
        inputs, labels = mask_tokens(ids)
        logits, pair_logits, _ = model(inputs, types)
        mlm = F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1), ignore_index=-100)
        nsp = F.cross_entropy(pair_logits, is_next)
        ((mlm + nsp) / accum).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    if step % 3 == 0:
        print(f"step {step} mlm {mlm.item():.5f} nsp {nsp.item():.5f} lr {sched.get_last_lr()[0]:.6f} "
              f"masked {(labels != -100).sum().item()}")

model.eval()
ids, types, _ = make_batch(4)
inputs, labels = mask_tokens(ids, prob=0.3)
with torch.inference_mode():
    logits, pair_logits, hidden = model(inputs, types)
    valid = inputs != PAD
    print("hidden at tokens", r(hidden[valid].sum(-1)[:8]), "count", int(valid.sum()))
    print("pair probs", r(pair_logits.softmax(-1)))
    where = labels != -100
    top = logits[where].topk(3, dim=-1)
    print("fills", top.indices.tolist()[:4], r(top.values[:4]))
    acc = (logits[where].argmax(-1) == labels[where]).float().mean()
    print("masked accuracy", round(acc.item(), 5), "hidden is inference", hidden.is_inference())

# attention maps from one layer's self-attention module, per head, with a float key padding mask
attn = model.encoder.layers[0].self_attn
x = model.embeddings(inputs, types).detach()
float_mask = torch.zeros(inputs.shape).masked_fill(inputs == PAD, float("-inf"))
with torch.no_grad():
    out, weights = attn(x, x, x, key_padding_mask=float_mask, need_weights=True, average_attn_weights=False)
    _, avg = attn(x, x, x, key_padding_mask=inputs == PAD, need_weights=True)
print("per-head weights", tuple(weights.shape), r(weights[0, :, 0, :4]))
print("rows sum to one", torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1])),
      "padded keys get zero", bool((weights[..., inputs[0] == PAD] == 0).all()) if (inputs[0] == PAD).any() else True)
print("average matches", torch.allclose(weights.mean(1), avg, atol=1e-6))
print("attn out at tokens", r(out[inputs != PAD].sum(-1)[:6]))
print("entropy per head", r(-(weights.clamp_min(1e-12).log() * weights).sum(-1).mean((0, 2)) / math.log(MAXLEN)))
