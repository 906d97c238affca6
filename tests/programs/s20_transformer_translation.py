# The PyTorch "language translation with nn.Transformer" tutorial, from memory: Seq2SeqTransformer built on
# nn.Transformer (batch_first both ways), TokenEmbedding * sqrt(emb_size), PositionalEncoding with a
# registered buffer, create_mask with generate_square_subsequent_mask and src/tgt key padding masks from
# PAD tokens, CrossEntropyLoss(ignore_index=PAD_IDX), pad_sequence-based collate_fn, and greedy_decode
# through model.encode/decode with a growing target.
import math

import torch
import torch.nn as nn
from _seedfree import integers, seed_free_init
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
SRC_VOCAB, TGT_VOCAB = 15, 13


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=50, batch_first=False):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(0 if batch_first else -2)
        self.batch_first = batch_first
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding)

    def forward(self, token_embedding):
        if self.batch_first:
            return self.dropout(token_embedding + self.pos_embedding[:, :token_embedding.size(1), :])
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, batch_first, emb_size=16, nhead=2, layers=2, dim_feedforward=24, dropout=0.0):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=layers,
                                          num_decoder_layers=layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout, batch_first=batch_first)
        self.generator = nn.Linear(emb_size, TGT_VOCAB)
        self.src_tok_emb = TokenEmbedding(SRC_VOCAB, emb_size)
        self.tgt_tok_emb = TokenEmbedding(TGT_VOCAB, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout, batch_first=batch_first)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask,
                                memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src, src_mask):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt, memory, tgt_mask):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


def create_mask(src, tgt, batch_first):
    src_seq_len = src.shape[1 if batch_first else 0]
    tgt_seq_len = tgt.shape[1 if batch_first else 0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
    src_padding_mask = (src == PAD_IDX) if batch_first else (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX) if batch_first else (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


lengths = integers((16, 2), 5, salt=261) + 2
body = integers((16, 2, 8), 9, salt=262) + 4
pairs = []
for i in range(16):
    src = torch.cat([torch.tensor([BOS_IDX]), body[i, 0, :lengths[i, 0]], torch.tensor([EOS_IDX])])
    tgt = torch.cat([torch.tensor([BOS_IDX]), (body[i, 0, :lengths[i, 1]] + 1) % 9 + 4, torch.tensor([EOS_IDX])])
    pairs.append((src, tgt))


def make_collate(batch_first):
    def collate_fn(batch):
        src_batch, tgt_batch = zip(*batch)
        return (pad_sequence(src_batch, padding_value=PAD_IDX, batch_first=batch_first),
                pad_sequence(tgt_batch, padding_value=PAD_IDX, batch_first=batch_first))
    return collate_fn


print(torch.nn.Transformer.generate_square_subsequent_mask(3))
print(generate_square_subsequent_mask(3).equal(nn.Transformer.generate_square_subsequent_mask(3)))
for batch_first in (False, True):
    model = seed_free_init(Seq2SeqTransformer(batch_first), salt=263)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.002, betas=(0.9, 0.98), eps=1e-9)
    loader = DataLoader(pairs, batch_size=4, collate_fn=make_collate(batch_first))
    for epoch in range(2):
        model.train()
        losses = 0
        for src, tgt in loader:
            tgt_input = tgt[:, :-1] if batch_first else tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input, batch_first)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
            optimizer.zero_grad()
            tgt_out = tgt[:, 1:] if batch_first else tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            optimizer.step()
            losses += loss.item()
        print(f"batch_first={batch_first} epoch {epoch} train loss {losses / len(list(loader)):.6f}")

    model.eval()
    src = pairs[0][0].view(-1, 1) if not batch_first else pairs[0][0].view(1, -1)
    num_tokens = src.numel()
    src_mask = torch.zeros(num_tokens, num_tokens).type(torch.bool)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(BOS_IDX).type(torch.long)
    for i in range(num_tokens + 2):
        tgt_mask = generate_square_subsequent_mask(ys.size(1 if batch_first else 0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask)
        step_out = out[:, -1] if batch_first else out.transpose(0, 1)[:, -1]
        prob = model.generator(step_out)
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        nw = torch.ones(1, 1).type_as(src.data).fill_(next_word)
        ys = torch.cat([ys, nw], dim=1 if batch_first else 0)
        if next_word == EOS_IDX:
            break
    print("greedy", ys.flatten().tolist(), tuple(memory.shape))
