# Numerics programs: torch.special in a small likelihood fit (gammaln/digamma/polygamma for a
# Gamma MLE by Newton steps, erf/erfinv/ndtr/ndtri/log_ndtr, logit/expit, xlogy/xlog1py, i0/i1e,
# bessel_j0, entr, sinc, log_softmax/softmax, zeta), a torch.fft signal program (windowed
# spectrogram by hand and by stft, fftshift/fftfreq, rfft2 filtering, Hilbert envelope through
# complex tensors), torch.masked reductions, and torch.nn.attention.sdpa_kernel selecting the math
# backend (with a causal mask and dropout off).
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)


def r(t, n=5):
    if isinstance(t, torch.Tensor):
        t = t.tolist()
    if isinstance(t, list):
        return [r(v, n) for v in t]
    return round(t, n) if isinstance(t, float) else t


x = torch.linspace(0.1, 3.0, 6, dtype=torch.float64)
print("gammaln", r(torch.special.gammaln(x)))
print("digamma", r(torch.special.digamma(x)))
print("polygamma1", r(torch.special.polygamma(1, x)))
print("multigammaln", r(torch.special.multigammaln(x + 2, 3)))
print("erf erfc erfcx", r(torch.special.erf(x)), r(torch.special.erfc(x)), r(torch.special.erfcx(x)))
p = torch.tensor([0.01, 0.2, 0.5, 0.9, 0.999], dtype=torch.float64)
print("erfinv ndtri", r(torch.special.erfinv(2 * p - 1)), r(torch.special.ndtri(p)))
print("ndtr log_ndtr", r(torch.special.ndtr(x - 1.5)), r(torch.special.log_ndtr(-x * 5)))
print("logit expit", r(torch.special.logit(p)), r(torch.special.expit(torch.special.logit(p))))
print("logit eps", r(torch.special.logit(torch.tensor([0.0, 1.0, 0.3]), eps=1e-6)))
print(
    "xlogy xlog1py",
    r(torch.special.xlogy(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 3.0, 0.5]))),
    r(torch.special.xlog1py(torch.tensor([0.0, 2.0]), torch.tensor([-1.0, 1.0]))),
)
print("bessel", r(torch.special.i0(x)), r(torch.special.i0e(x)), r(torch.special.i1(x)), r(torch.special.i1e(x)))
print("bessel_j0 j1", r(torch.special.bessel_j0(x)), r(torch.special.bessel_j1(x)))
print(
    "entr sinc",
    r(torch.special.entr(torch.tensor([-1.0, 0.0, 0.5, 2.0]))),
    r(torch.special.sinc(torch.tensor([0.0, 0.5, 1.0]))),
)
print("zeta", r(torch.special.zeta(torch.tensor([2.0, 3.0]), torch.tensor([1.0, 2.0]))))
print("log1p expm1 exp2", r(torch.special.log1p(x)), r(torch.special.expm1(x)), r(torch.special.exp2(x)))
print(
    "logsumexp softmax",
    r(torch.special.logsumexp(x, 0)),
    r(torch.special.softmax(x, 0)),
    r(torch.special.log_softmax(x, 0)),
)
print(
    "round gammainc",
    r(torch.special.round(x * 3)),
    r(torch.special.gammainc(x, x + 0.5)),
    r(torch.special.gammaincc(x, torch.ones(()))),
)

# Gamma maximum likelihood: shape k by Newton steps on digamma/polygamma, rate by closed form
data = torch.distributions.Gamma(torch.tensor(2.5, dtype=torch.float64), torch.tensor(1.5, dtype=torch.float64)).sample(
    (400,)
)
s = math.log(data.mean()) - data.log().mean()
k = (3 - s + math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s)
k = torch.tensor(k, dtype=torch.float64)
for it in range(4):
    k = k - (k.log() - torch.special.digamma(k) - s) / (1 / k - torch.special.polygamma(1, k))
    print(f"gamma mle step {it} k {k.item():.6f}")
rate = k / data.mean()
nll = -(k * rate.log() + (k - 1) * data.log() - rate * data - torch.special.gammaln(k)).mean()
print(f"gamma mle rate {rate.item():.6f} nll {nll.item():.6f}")
# gradients through special functions
t = torch.tensor([0.3, 1.2, 2.5], requires_grad=True)
(
    torch.special.gammaln(t).sum()
    + torch.special.erfinv(t / 3).sum()
    + torch.special.i0(t).sum()
    + torch.special.xlogy(t, t + 1).sum()
    + torch.special.log_ndtr(t).sum()
    + torch.special.entr(t / 3).sum()
).backward()
print("special grads", r(t.grad))

# a signal program: two tones in noise
fs, n = 64.0, 256
tt = torch.arange(n) / fs
sig = torch.sin(2 * math.pi * 5 * tt) + 0.5 * torch.sin(2 * math.pi * 12 * tt) + 0.1 * torch.randn(n)
spec = torch.fft.rfft(sig * torch.hann_window(n, periodic=False))
freqs = torch.fft.rfftfreq(n, d=1 / fs)
top = spec.abs().topk(2).indices.sort().values
print("peaks at", freqs[top].tolist())
print(
    "fftfreq shift",
    torch.fft.fftshift(torch.fft.fftfreq(8, d=0.5)).tolist(),
    torch.fft.ifftshift(torch.arange(6)).tolist(),
)
frames = sig.unfold(0, 64, 32) * torch.hann_window(64)
manual = torch.fft.rfft(frames, dim=-1).abs().T
st = torch.stft(sig, n_fft=64, hop_length=32, window=torch.hann_window(64), center=False, return_complex=True)
print("stft vs manual", tuple(st.shape), torch.allclose(st.abs(), manual, atol=1e-4))
stc = torch.stft(sig, n_fft=32, hop_length=8, window=torch.hamming_window(32), return_complex=True, normalized=True)
print("stft centered", tuple(stc.shape), round(stc.abs().sum().item(), 3))
back = torch.istft(
    torch.stft(sig, 32, 8, window=torch.hann_window(32), return_complex=True),
    32,
    8,
    window=torch.hann_window(32),
    length=n,
)
print("istft round trip", round((back - sig).abs().max().item(), 4))
# Hilbert envelope by the analytic signal
X = torch.fft.fft(sig)
h = torch.zeros(n)
h[0] = 1
h[1 : n // 2] = 2
h[n // 2] = 1
analytic = torch.fft.ifft(X * h)
env = analytic.abs()
print(
    "envelope",
    round(env.mean().item(), 4),
    round(env.max().item(), 4),
    analytic.dtype,
    round(analytic.angle()[:4].sum().item(), 4),
)
img = torch.randn(16, 16)
F2 = torch.fft.rfft2(img)
mask = torch.zeros_like(F2.real)
mask[:4, :4] = 1
low = torch.fft.irfft2(F2 * mask, s=img.shape)
print(
    "rfft2 low-pass",
    round(low.std().item(), 5),
    round(torch.fft.fftn(img, dim=(0, 1), norm="ortho").abs().pow(2).sum().item(), 3),
    round(img.pow(2).sum().item(), 3),
)
print("hfft ihfft", r(torch.fft.hfft(torch.fft.ihfft(sig[:10]), n=10) - sig[:10], 4))
z = torch.complex(torch.randn(3), torch.randn(3))
print(
    "complex ops",
    r(torch.view_as_real(z * z.conj()).tolist()),
    r(z.abs()),
    round((torch.polar(z.abs(), z.angle()) - z).abs().max().item(), 4),
)

# torch.masked reductions
vals = torch.tensor([[1.0, 2.0, float("nan"), 4.0], [5.0, -1.0, 3.0, 0.5]])
keep = ~vals.isnan() & (vals > 0)
print("masked sum", torch.masked.sum(vals, dim=1, mask=keep).tolist())
print("masked mean", torch.masked.mean(vals, dim=1, mask=keep).tolist())
print(
    "masked amax amin",
    torch.masked.amax(vals, dim=1, mask=keep).tolist(),
    torch.masked.amin(vals, 1, mask=keep).tolist(),
)
print("masked softmax", r(torch.masked.softmax(vals, dim=1, mask=keep)))
print("masked log_softmax", r(torch.masked.log_softmax(vals, 1, mask=keep)))
print(
    "masked var std", r(torch.masked.var(vals, 1, mask=keep)), r(torch.masked.std(vals, 1, unbiased=False, mask=keep))
)
print(
    "masked norm", r(torch.masked.norm(vals, 2.0, 1, mask=keep)), "prod", torch.masked.prod(vals, 1, mask=keep).tolist()
)
print("masked normalize", r(torch.masked.normalize(vals.nan_to_num(), 1.0, 1, mask=keep)))

# scaled_dot_product_attention under sdpa_kernel
q, k_, v = (torch.randn(2, 2, 5, 4) for _ in range(3))
ref = torch.softmax((q @ k_.transpose(-1, -2)) / 2 + torch.full((5, 5), float("-inf")).triu(1), -1) @ v
with sdpa_kernel(SDPBackend.MATH):
    out = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
    out2 = F.scaled_dot_product_attention(q, k_, v, attn_mask=torch.ones(5, 5, dtype=torch.bool).tril(), scale=0.5)
print("sdpa math", torch.allclose(out, ref, atol=1e-5), torch.allclose(out2, ref, atol=1e-5))
out3 = F.scaled_dot_product_attention(q, k_, v, attn_mask=torch.randn(5, 5), enable_gqa=False)
print("sdpa float mask", round(out3.sum().item(), 4))
qg = torch.randn(1, 4, 3, 4)
kg = torch.randn(1, 2, 3, 4)
print("sdpa gqa", round(F.scaled_dot_product_attention(qg, kg, kg, enable_gqa=True).sum().item(), 4))
