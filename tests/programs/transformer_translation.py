# The nn.Transformer translation tutorial's shape, from memory, on a synthetic task (the target is
# the source reversed, with BOS/EOS/PAD): TokenEmbedding scaled by sqrt(d_model), sinusoidal
# PositionalEncoding with a registered buffer, Seq2SeqTransformer over nn.Transformer
# (batch_first=False), generate_square_subsequent_mask, src/tgt key padding masks and
# memory_key_padding_mask, CrossEntropyLoss(ignore_index=PAD), greedy_decode through
# encode/decode. Then the data side: a collate_fn that pads with pad_sequence, default_collate of
# namedtuples, nested lists and NumPy arrays, default_convert, random_split by fractions,
# ChainDataset/StackDataset/Subset, an IterableDataset with get_worker_info() (None in the main
# process), batch_size=None, and the nested tensors ember has (nested_tensor, to_padded_tensor).
import collections
import math

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import (
    ChainDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    get_worker_info,
    random_split,
)
from torch.utils.data._utils.collate import default_collate, default_convert

torch.manual_seed(0)
PAD, BOS, EOS = 0, 1, 2
VOCAB = 12


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=64):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pe = torch.zeros((maxlen, emb_size))
        pe[:, 0::2] = torch.sin(pos * den)
        pe[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pe.unsqueeze(-2))

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, layers, emb_size, nhead, vocab, ff=32, dropout=0.1):
        super().__init__()
        self.transformer = nn.Transformer(
            d_model=emb_size,
            nhead=nhead,
            num_encoder_layers=layers,
            num_decoder_layers=layers,
            dim_feedforward=ff,
            dropout=dropout,
        )
        self.generator = nn.Linear(emb_size, vocab)
        self.src_tok_emb = TokenEmbedding(vocab, emb_size)
        self.tgt_tok_emb = TokenEmbedding(vocab, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(
            src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask, memory_key_padding_mask
        )
        return self.generator(outs)

    def encode(self, src, src_mask):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt, memory, tgt_mask):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def create_mask(src, tgt):
    src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
    return src_mask, tgt_mask, (src == PAD).transpose(0, 1), (tgt == PAD).transpose(0, 1)


class ReverseDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(2, 6, (1,), generator=g))
            src = torch.randint(3, VOCAB, (length,), generator=g)
            self.items.append((src, src.flip(0)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate_fn(batch):
    srcs, tgts = [], []
    for s, t in batch:
        srcs.append(torch.cat([torch.tensor([BOS]), s, torch.tensor([EOS])]))
        tgts.append(torch.cat([torch.tensor([BOS]), t, torch.tensor([EOS])]))
    return pad_sequence(srcs, padding_value=PAD), pad_sequence(tgts, padding_value=PAD)


print("square mask", nn.Transformer.generate_square_subsequent_mask(4).tolist())
data = ReverseDataset(48)
train, val = random_split(data, [0.75, 0.25], generator=torch.Generator().manual_seed(2))
print("split sizes", len(train), len(val), train.indices[:5])
model = Seq2SeqTransformer(2, 16, 2, VOCAB)
for p in model.parameters():
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
loader = DataLoader(
    train, batch_size=8, shuffle=True, collate_fn=collate_fn, generator=torch.Generator().manual_seed(3)
)
for epoch in range(3):
    model.train()
    total = 0.0
    for src, tgt in loader:
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_pad, tgt_pad = create_mask(src, tgt_input)
        logits = model(src, tgt_input, src_mask, tgt_mask, src_pad, tgt_pad, src_pad)
        opt.zero_grad()
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        loss.backward()
        opt.step()
        total += loss.item()
    model.eval()
    with torch.no_grad():
        vloss = 0.0
        for src, tgt in DataLoader(val, batch_size=6, collate_fn=collate_fn):
            tgt_input = tgt[:-1, :]
            masks = create_mask(src, tgt_input)
            logits = model(src, tgt_input, *masks, masks[2])
            vloss += loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1)).item()
    print(f"epoch {epoch} train {total / len(loader):.5f} val {vloss:.5f}")


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
    for _ in range(max_len - 1):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask).transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word.item())], dim=0)
        if next_word.item() == EOS:
            break
    return ys


with torch.no_grad():
    src = torch.tensor([BOS, 5, 7, 9, EOS]).view(-1, 1)
    print("greedy", greedy_decode(model, src, torch.zeros(5, 5).bool(), 8, BOS).flatten().tolist())

# the data side
Point = collections.namedtuple("Point", ["x", "y"])
print("collate namedtuple", default_collate([Point(1, 2.0), Point(3, 4.0)]))
print("collate nested", default_collate([[torch.ones(2), 1], [torch.zeros(2), 2]]))
print("collate numpy", default_collate([np.arange(3), np.arange(3) * 2]))
print("collate dict of str", default_collate([{"a": "x", "b": (1, 2)}, {"a": "y", "b": (3, 4)}]))
print("convert", default_convert({"n": np.array([1.5, 2.5]), "t": (np.int64(3), "s")}))
ds = TensorDataset(torch.arange(10.0), torch.arange(10) % 3)
print("subset", [int(t[1]) for t in Subset(ds, [1, 4, 7])])
stack = StackDataset(ds, Subset(ds, list(range(10))[::-1]))
print("stack", stack[2][0][0].item(), stack[2][1][0].item(), len(stack))
stackd = StackDataset(a=ds, b=ds)
print("stack dict", sorted(stackd[3].keys()), len(stackd))


class Counter(IterableDataset):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        print("worker info in main process:", info)
        return iter(range(self.start, self.end))


print("chain", list(ChainDataset([Counter(0, 3), Counter(10, 12)])))
print("iterable batches", [b.tolist() for b in DataLoader(Counter(0, 7), batch_size=3)])
print("batch_size None", [b for b in DataLoader(Counter(0, 3), batch_size=None)])
print("drop_last", [b.tolist() for b in DataLoader(Counter(0, 7), batch_size=3, drop_last=True)])
sizes = [len(s) for s in random_split(range(10), [0.33, 0.33, 0.34])]
print("random_split fractions", sizes)
try:
    random_split(range(10), [3, 3])
except ValueError as e:
    print("random_split bad lengths:", e)

nt = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(5.0)])
print("nested", nt.is_nested, [t.tolist() for t in nt.unbind()], torch.nested.to_padded_tensor(nt, -1.0).tolist())
