# Complex tensors and torch.fft: an FFT low-pass filter, convolution by FFT against conv1d,
# spectral power, complex arithmetic and views, stft/istft round trip, and autograd through
# rfft/irfft to a real loss.
import math

import torch
import torch.nn.functional as F

torch.manual_seed(0)
t = torch.linspace(0, 1, 64)
signal = torch.sin(2 * math.pi * 5 * t) + 0.5 * torch.sin(2 * math.pi * 20 * t) + 0.1 * torch.randn(64)
spec = torch.fft.rfft(signal)
freqs = torch.fft.rfftfreq(64, d=1 / 64)
filtered = torch.fft.irfft(spec * (freqs < 10), n=64)
print("lowpass", filtered[:5].numpy().round(5).tolist(), spec.dtype, spec.shape)
power = spec.abs() ** 2
print("peaks", power.topk(2).indices.tolist(), round(power.sum().item(), 3))
x = torch.randn(1, 1, 32)
kern = torch.randn(1, 1, 5)
direct = F.conv1d(x, kern.flip(-1), padding=4)
n = 32 + 5 - 1
via_fft = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(kern, n=n), n=n)
print("fft conv", torch.allclose(direct, via_fft, atol=1e-4))
z = torch.complex(torch.tensor([1.0, -2.0]), torch.tensor([3.0, 0.5]))
w = torch.polar(torch.tensor([2.0, 1.0]), torch.tensor([math.pi / 4, -math.pi / 2]))
print("complex", (z * w).numpy().round(5).tolist(), z.conj().resolve_conj().numpy().tolist(),
      z.angle().numpy().round(5).tolist())
print("view_as_real", torch.view_as_real(z).tolist(), torch.view_as_complex(torch.tensor([[1.0, 2.0]])).tolist())
print("real/imag", z.real.tolist(), z.imag.tolist(), z.abs().numpy().round(5).tolist(), z.dtype, (z * 1j).tolist())
img = torch.randn(8, 8)
f2 = torch.fft.fftshift(torch.fft.fft2(img))
print("fft2", torch.allclose(torch.fft.ifft2(torch.fft.ifftshift(f2)).real, img, atol=1e-5), f2.dtype)
print("fftn norm", round(torch.fft.fftn(img, norm="ortho").abs().sum().item(), 4),
      round(torch.fft.hfft(spec[:5]).sum().item(), 4))
window = torch.hann_window(16)
S = torch.stft(signal, n_fft=16, hop_length=4, window=window, return_complex=True)
back = torch.istft(S, n_fft=16, hop_length=4, window=window, length=64)
print("stft", tuple(S.shape), torch.allclose(back, signal, atol=1e-5))
p = torch.randn(32, requires_grad=True)
loss = torch.fft.irfft(torch.fft.rfft(p) * torch.exp(-torch.arange(17.0) / 4), n=32).pow(2).sum()
loss.backward()
print("fft grad", round(loss.item(), 5), p.grad[:4].numpy().round(5).tolist())
c = torch.randn(3, dtype=torch.cfloat, requires_grad=True)
(c.abs() ** 2).sum().backward()
print("complex grad", torch.allclose(c.grad, 2 * c.detach()))
m = torch.randn(3, 3, dtype=torch.complex128)
# (complex LAPACK is a deviation: docs/deviations.md "Complex numbers")
print("complex matmul", (m @ m.mH).diagonal().imag.abs().max().item() < 1e-12, (m @ m.mH).dtype, m.mT.is_contiguous())
try:
    torch.fft.rfft(z)
except RuntimeError as e:
    print("RuntimeError", e)
try:
    torch.view_as_complex(torch.ones(3))
except RuntimeError as e:
    print("RuntimeError", e)
