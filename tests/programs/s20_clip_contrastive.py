# CLIP-style contrastive training as openai/CLIP's model.py and open_clip's loss write it, from memory: an
# image tower (conv stem + attention pooling with a class embedding) and a text tower (token + positional
# embedding, a causal nn.TransformerEncoder, features taken at the argmax (EOT) token), L2-normalised
# features, logit_scale = nn.Parameter(ones([]) * log(1/0.07)) clamped after each step, symmetric
# cross-entropy over the logits, a zero-shot classifier built from averaged text embeddings, and the
# accuracy/recall@k metrics computed with topk and eq.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


class AttentionPool2d(nn.Module):
    def __init__(self, spacial_dim, embed_dim, num_heads, output_dim):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(spacial_dim ** 2 + 1, embed_dim) / embed_dim ** 0.5)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.c_proj = nn.Linear(embed_dim, output_dim)
        self.num_heads = num_heads

    def forward(self, x):
        x = x.flatten(start_dim=2).permute(2, 0, 1)  # NCHW -> (HW)NC
        x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
        x = x + self.positional_embedding[:, None, :].to(x.dtype)
        x, _ = F.multi_head_attention_forward(
            query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=self.num_heads,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
            in_proj_weight=None, in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0, out_proj_weight=self.c_proj.weight,
            out_proj_bias=self.c_proj.bias, use_separate_proj_weight=True, training=self.training,
            need_weights=False)
        return x.squeeze(0)


class CLIP(nn.Module):
    def __init__(self, embed_dim=8, width=12, vocab=19, context=7):
        super().__init__()
        self.context_length = context
        self.visual = nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width),
                                    nn.ReLU(inplace=True), AttentionPool2d(4, width, 2, embed_dim))
        layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, activation="gelu", batch_first=False,
                                           norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.empty(context, width))
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.register_buffer("attn_mask", self.build_attention_mask(), persistent=False)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        nn.init.normal_(self.text_projection, std=width ** -0.5)

    def build_attention_mask(self):
        mask = torch.empty(self.context_length, self.context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)
        return mask

    def encode_image(self, image):
        return self.visual(image)

    def encode_text(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = x.permute(1, 0, 2)
        x = self.transformer(x, mask=self.attn_mask)
        x = x.permute(1, 0, 2)
        x = self.ln_final(x)
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        text_features = text_features / text_features.norm(dim=1, keepdim=True)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        return logits_per_image, logits_per_image.t()


model = CLIP()
seed_free_init(model, salt=221)
with torch.no_grad():
    model.logit_scale.fill_(np.log(1 / 0.07))
print("logit_scale", f"{model.logit_scale.item():.6f}", model.logit_scale.shape, model.logit_scale.dim())
params = [{"params": [p for n, p in model.named_parameters() if p.ndim < 2 or "embedding" in n], "weight_decay": 0.0},
          {"params": [p for n, p in model.named_parameters() if not (p.ndim < 2 or "embedding" in n)],
           "weight_decay": 0.2}]
opt = torch.optim.AdamW(params, lr=2e-3, betas=(0.9, 0.98), eps=1e-6)
images = data((16, 3, 8, 8), salt=222)
texts = integers((16, 7), 18, salt=223)
texts[torch.arange(16), integers((16,), 7, salt=224)] = 18  # the EOT token, the largest id
for step in range(6):
    sl = slice((step * 4) % 16, (step * 4) % 16 + 8) if step % 2 == 0 else slice(8, 16)
    img, txt = images[sl], texts[sl]
    logits_per_image, logits_per_text = model(img, txt)
    labels = torch.arange(len(img), dtype=torch.long)
    loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        model.logit_scale.clamp_(0, np.log(100))
    acc = (logits_per_image.argmax(-1) == labels).float().mean()
    print(f"step {step} loss {loss.item():.6f} scale {model.logit_scale.exp().item():.5f} acc {acc.item():.3f}")

model.eval()
with torch.no_grad():
    img_f = F.normalize(model.encode_image(images), dim=-1)
    txt_f = F.normalize(model.encode_text(texts), dim=-1)
    classes = txt_f.view(4, 4, -1).mean(dim=1)
    classes /= classes.norm(dim=-1, keepdim=True)
    zero_shot = (100.0 * img_f @ classes.T).softmax(dim=-1)
    top_probs, top_labels = zero_shot.cpu().topk(2, dim=-1)
    print("zero-shot", top_labels[:6].tolist(), f"{top_probs.sum().item():.5f}")
    sims = img_f @ txt_f.t()
    ranking = torch.argsort(sims, dim=1, descending=True)
    preds = torch.where(ranking == torch.arange(16).view(-1, 1))[1]
    for k in (1, 5):
        print(f"image_to_text_R@{k}", np.mean(preds.numpy() < k).round(4))
    print("mean rank", preds.float().mean().item() + 1, "median", torch.floor(torch.median(preds.float())).item() + 1)
