"""Signal processing: the window functions (hann, hamming, blackman, bartlett, kaiser) and the
short-time Fourier transform ``stft``/``istft``.

Windows evaluate PyTorch's formulas in the same order and dtype (so float results match); stft
frames the (padded) signal with ``unfold`` and runs ``fft.rfft``/``fft.fft``; istft inverts each
frame and overlap-adds with ``index_add``. All are compositions, differentiable through those ops.
"""

from __future__ import annotations

import math
import warnings

from ... import dtypes
from ...autocast import composite as _autocast_composite
from ...optable import declare
from ...shapes import numel
from ...tensor import Tensor
from .._common import HALF_TYPES, type_name
from ..creation import factories
from ..indexing.gather_scatter import index_add
from ..nn.resample import constant_pad_nd
from ..nn.resample import pad as _pad
from ..pointwise import elementwise
from ..pointwise.complex import complex as _complex
from ..pointwise.complex import imag, real, view_as_complex, view_as_real
from ..pointwise.special import i0
from ..reduction import reduce as reductions
from ..shape import joining, views


def _window_dtype(name: str, window_length: int, dtype):
    dtype = dtypes.get_default_dtype() if dtype is None else dtype
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype={dtype.name})")
    return dtype


def _window(name: str, window_length: int, periodic: bool, dtype, requires_grad: bool, body, device=None) -> Tensor:
    """Shared edge cases: N == 0 is empty, N == 1 is [1], periodic windows drop the last of N + 1. Computed
    on the CPU, then moved to ``device`` (its values are the CPU's)."""
    dtype = _window_dtype(name, window_length, dtype)
    if window_length == 0:
        w = factories.empty((0,), dtype=dtype)
    elif window_length == 1:
        w = factories.ones((1,), dtype=dtype)
    else:
        n = window_length + 1 if periodic else window_length
        w = body(n, dtype)
        if periodic:
            w = views.narrow(w, 0, 0, n - 1).contiguous()
    if device is not None:
        w = w.to(device)
    return w.requires_grad_(True) if requires_grad else w


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """alpha - beta * cos(2 pi n / (N - 1))."""
    def body(n, dtype):
        w = elementwise.cos(elementwise.mul(factories.arange(n, dtype=dtype), math.pi * 2.0 / (n - 1)))
        return elementwise.add(elementwise.mul(w, -beta), alpha)

    return _window("hamming_window", window_length, periodic, dtype, requires_grad, body, device)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:
    """0.5 - 0.5 * cos(2 pi n / (N - 1))."""
    _window_dtype("hann_window", window_length, dtype)
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    def body(n, dtype):
        w = elementwise.mul(factories.arange(n, dtype=dtype), math.pi / (n - 1))
        return elementwise.add(
            elementwise.sub(
                elementwise.mul(elementwise.cos(elementwise.mul(w, 4)), 0.08),
                elementwise.mul(elementwise.cos(elementwise.mul(w, 2)), 0.5),
            ),
            0.42,
        )

    return _window("blackman_window", window_length, periodic, dtype, requires_grad, body, device)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """Triangular window: 2n / (N - 1) rising, then 2 - 2n / (N - 1)."""
    def body(n, dtype):
        w = elementwise.mul(factories.arange(n, dtype=dtype), 2.0 / (n - 1))
        half = ((n - 1) >> 1) + 1
        return joining.cat(
            [
                views.narrow(w, 0, 0, half),
                elementwise.add(elementwise.mul(views.narrow(w, 0, half, n - half), -1), 2),
            ]
        )

    return _window("bartlett_window", window_length, periodic, dtype, requires_grad, body, device)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False) -> Tensor:
    """i0(beta * sqrt(1 - ((n - alpha) / alpha)^2)) / i0(beta), alpha = (N - 1) / 2."""
    def body(n, dtype):
        work = dtypes.float32 if dtype in HALF_TYPES else dtype
        alpha = (n - 1) / 2.0
        ratio = elementwise.div(elementwise.sub(factories.arange(n, dtype=work), alpha), alpha)
        arg = elementwise.mul(
            elementwise.sqrt(elementwise.abs(elementwise.sub(1.0, elementwise.mul(ratio, ratio)))), beta
        )
        return elementwise.div(i0(arg), i0(factories.scalar_tensor(beta, dtype=work))).to(dtype)

    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, body, device)


# -- stft / istft ----------------------------------------------------------------------------------

def _centered_window(window, win_length: int, n_fft: int, dtype, device=None) -> Tensor | None:
    """The window zero-padded on both sides to n_fft (None: rectangular over n_fft), on the signal's device."""
    if window is None and win_length == n_fft:
        return None
    if window is None:
        window = factories.ones((win_length,), dtype=dtype, device=device)
    if win_length == n_fft:
        return window

    left = (n_fft - win_length) // 2
    return constant_pad_nd(window, [left, n_fft - win_length - left], 0)


@_autocast_composite("fp32")
def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: bool | None = None, return_complex: bool | None = None, align_to_window: bool | None = None):
    """Short-time Fourier transform: (..., n_fft // 2 + 1 or n_fft, n_frames) complex frames."""
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.To suppress this warning and use a rectangular window, "
                      "explicitly set `window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=2)
    if align_to_window is not None:
        if center:
            raise RuntimeError("stft: align_to_window should only be set when center = false")
        if align_to_window:
            raise NotImplementedError("stft: align_to_window=True is not supported by ember yet")
    complex_input = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_input:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                      "complex tensors for all inputs, and return_complex=False will raise an error.", UserWarning,
                      stacklevel=2)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"stft: expected a tensor of floating point or complex values, got "
                           f"{type_name(input.dtype)}")
    if center:
        if input.ndim not in (1, 2):
            raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")

        ndim = input.ndim
        half = n_fft // 2

        def padded(x):
            extended = views.reshape(x, (1,) * (3 - ndim) + x._shape)
            return views.reshape(_pad(extended, [half, half], pad_mode), x._shape[:-1] + (-1,))

        if input.dtype.is_complex:  # the padding kernels are real: pad both parts

            input = _complex(padded(real(input).contiguous()), padded(imag(input).contiguous()))
        else:
            input = padded(input)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    signal = views.unsqueeze(input, 0) if input.ndim == 1 else input
    length = signal._shape[1]
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.ndim != 1 or window._shape[0] != win):
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win}, but got window "
                           f"with size {list(window._shape)}")
    frames = views.unfold(signal, -1, n_fft, hop)  # (batch, n_frames, n_fft)
    full_window = _centered_window(window, win, n_fft, input.dtype.to_real() if input.dtype.is_complex
                                   else input.dtype, input._device)
    if full_window is not None:
        frames = elementwise.mul(frames, full_window)
    from .... import fft as _fft

    norm = "ortho" if normalized else "backward"
    if frames.dtype.is_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        spec = _fft.fft(frames, dim=-1, norm=norm)
    elif onesided is None or onesided:
        spec = _fft.rfft(frames, dim=-1, norm=norm)
    else:
        spec = _fft.fft(frames, dim=-1, norm=norm)
    spec = views.transpose(spec, 1, 2)
    if input.ndim == 1:
        spec = views.squeeze(spec, 0)
    if not return_complex:
        return view_as_real(spec.contiguous())
    return spec


def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Tensor | None = None, center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False) -> Tensor:
    """Inverse of :func:`stft` by windowed overlap-add, normalized by the summed squared window."""
    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied.Please provide the same "
                      "window used by stft to make the inversion lossless.To suppress this warning and use a "
                      "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.",
                      UserWarning, stacklevel=2)
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if _numel(input) == 0:
        raise RuntimeError("istft input tensor cannot be empty")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected a tensor with 3 or 4 dimensions of complex dtype, but got {input.ndim + 1}")
    n_frames, fft_size = input._shape[-1], input._shape[-2]
    one_sided = fft_size != n_fft if onesided is None else onesided
    if one_sided and n_fft // 2 + 1 != fft_size:
        raise RuntimeError(f"istft expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    if not one_sided and n_fft != fft_size:
        raise RuntimeError(f"istft expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {fft_size}")
    if not 0 < hop <= win:
        raise RuntimeError("istft expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise RuntimeError("istft expected 0 < win_length <= n_fft")
    if window is not None and (window.ndim != 1 or window._shape[0] != win):
        raise RuntimeError("Invalid window shape. window has to be 1D and length of `win_length`")
    real_dtype = input.dtype.to_real()
    full_window = _centered_window(
        window if window is not None else factories.ones((win,), dtype=real_dtype, device=input._device), win, n_fft,
        real_dtype)
    spec = views.unsqueeze(input, 0) if input.ndim == 2 else input
    spec = views.transpose(spec, 1, 2)  # (channel, n_frames, fft_size)
    from .... import fft as _fft

    norm = "ortho" if normalized else "backward"
    if return_complex:
        if one_sided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = _fft.ifft(spec, dim=-1, norm=norm)
    else:
        if window is not None and window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not one_sided:
            spec = views.narrow(spec, -1, 0, n_fft // 2 + 1)
        frames = _fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    frames = elementwise.mul(frames, full_window)
    expected = n_fft + hop * (n_frames - 1)
    y = _overlap_add(frames, expected, hop)
    envelope = _overlap_add(views.expand(views.reshape(elementwise.mul(full_window, full_window), (1, 1, n_fft)),
                                      (1, n_frames, n_fft)), expected, hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    stop = min(end, expected)
    y = views.narrow(y, 1, start, max(stop - start, 0))
    envelope = views.narrow(envelope, 1, start, max(stop - start, 0))

    if _numel(envelope) and bool(elementwise.lt(reductions.amin(elementwise.abs(envelope)), 1e-11)):
        raise RuntimeError("istft: window overlap add min: 1")
    y = elementwise.div(y, envelope)
    if input.ndim == 2:
        y = views.squeeze(y, 0)
    if end > expected:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with zeros "
                      "in the tail. Please check your center and hop_length settings.", UserWarning, stacklevel=2)

        y = constant_pad_nd(y, [0, end - expected], 0)
    return y


def _numel(t: Tensor) -> int:
    return numel(t._shape)


def _overlap_add(frames: Tensor, total: int, hop: int) -> Tensor:
    """Sums (channel, n_frames, n_fft) frames placed hop apart into (channel, total) signals."""

    channels, n_frames, n_fft = frames._shape
    device = frames._device  # the index and the sums on the frames' device
    starts = views.unsqueeze(elementwise.mul(factories.arange(n_frames, device=device), hop), 1)
    index = views.reshape(elementwise.add(starts, views.unsqueeze(factories.arange(n_fft, device=device), 0)), (-1,))
    if frames.dtype.is_complex:  # index_add is real: add the (real, imag) pairs
        parts = views.reshape(view_as_real(frames.contiguous()), (channels, n_frames * n_fft, 2))
        zeros = factories.zeros((channels, total, 2), dtype=parts.dtype, device=device)
        return view_as_complex(index_add(zeros, 1, index, parts))
    zeros = factories.zeros((channels, total), dtype=frames.dtype, device=device)
    return index_add(zeros, 1, index, views.reshape(frames, (channels, n_frames * n_fft)))


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
bartlett_window             function
blackman_window             function
hamming_window              function
hann_window                 function
istft                       function method
kaiser_window               function
stft                        function method
""")
