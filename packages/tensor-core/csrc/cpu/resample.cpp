// Kernel family "resample": padding (constant, reflect, replicate, circular) and interpolation
// (nearest, nearest-exact, linear/bilinear/trilinear, bicubic) over the last three dims of
// contiguous (P, D, H, W) tensors (fewer spatial dims are size-1 leading ones), each with its
// backward (a scatter-add through the same index map). float32/float64 only for interpolation;
// padding moves elements of any dtype.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

void need(bool ok, const char* msg) {
  if (!ok) throw std::runtime_error(msg);
}

// -- padding ---------------------------------------------------------------------------

// Source index of every output position along one dim (-1: the constant value).
std::vector<int64_t> pad_map(int64_t n, int64_t out, int64_t before, int mode) {
  std::vector<int64_t> m(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - before;
    if (mode == 0) {
      i = (i >= 0 && i < n) ? i : -1;
    } else if (mode == 1) {  // reflect (the caller checks pad < n)
      if (n == 1) i = 0;
      else {
        int64_t period = 2 * (n - 1);
        i = ((i % period) + period) % period;
        if (i >= n) i = period - i;
      }
    } else if (mode == 2) {
      i = std::min(std::max<int64_t>(i, 0), n - 1);
    } else {  // circular over the kept (cropped) part, as PyTorch's _pad_circular
      int64_t after = out - n - before, lo = std::max<int64_t>(-before, 0);
      int64_t m = n - lo - std::max<int64_t>(-after, 0);
      if (m <= 0) throw std::runtime_error("circular padding: nothing left after cropping");
      int64_t j = o - std::max<int64_t>(before, 0);
      i = lo + ((j % m) + m) % m;
    }
    m[static_cast<size_t>(o)] = i;
  }
  return m;
}

struct PadMaps {
  int64_t planes, in[3], out[3];
  std::vector<int64_t> map[3];
};

PadMaps make_pad(const TensorArg& in, const TensorArg& out, py::handle before, int mode) {
  need(in.ndim() == 4 && out.ndim() == 4 && in.shape[0] == out.shape[0], "pad kernel: bad shapes");
  need(in.dtype == out.dtype && in.is_contiguous() && out.is_contiguous(), "pad kernel: bad layout");
  need(mode >= 0 && mode <= 3, "pad kernel: bad mode");
  auto b = to_int64_vector(before, "pad");
  need(b.size() == 3, "pad kernel: expected 3 pads");
  PadMaps p;
  p.planes = in.shape[0];
  for (int d = 0; d < 3; ++d) {
    p.in[d] = in.shape[1 + d];
    p.out[d] = out.shape[1 + d];
    need(mode == 0 || p.in[d] > 0 || p.out[d] == 0, "pad kernel: empty dim");
    p.map[d] = pad_map(p.in[d], p.out[d], b[static_cast<size_t>(d)], mode);
    for (int64_t v : p.map[d]) need(v < p.in[d], "pad kernel: index out of range");
  }
  return p;
}

template <typename T>
void pad_forward(T* y, const T* x, const PadMaps& p, T value) {
  const int64_t S = p.in[0] * p.in[1] * p.in[2], oW = p.out[2];
  parallel_for(p.planes * p.out[0] * p.out[1], std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, oW)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   int64_t pl = r / (p.out[0] * p.out[1]), od = (r / p.out[1]) % p.out[0], oh = r % p.out[1];
                   T* dst = y + r * oW;
                   int64_t id = p.map[0][od], ih = p.map[1][oh];
                   if (id < 0 || ih < 0) {
                     std::fill(dst, dst + oW, value);
                     continue;
                   }
                   const T* src = x + pl * S + (id * p.in[1] + ih) * p.in[2];
                   const int64_t* mw = p.map[2].data();
                   for (int64_t ow = 0; ow < oW; ++ow) dst[ow] = mw[ow] < 0 ? value : src[mw[ow]];
                 }
               });
}

template <typename T>
void pad_backward(T* gx, const T* gy, const PadMaps& p) {
  const int64_t S = p.in[0] * p.in[1] * p.in[2], oW = p.out[2], oS = p.out[0] * p.out[1] * oW;
  parallel_for(p.planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, oS)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* x = gx + pl * S;
      std::fill(x, x + S, T(0));
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh) {
          int64_t id = p.map[0][od], ih = p.map[1][oh];
          if (id < 0 || ih < 0) continue;
          const T* src = gy + pl * oS + (od * p.out[1] + oh) * oW;
          T* row = x + (id * p.in[1] + ih) * p.in[2];
          for (int64_t ow = 0; ow < oW; ++ow)
            if (p.map[2][ow] >= 0) row[p.map[2][ow]] += src[ow];
        }
    }
  });
}

template <typename T>
T pad_value(py::handle value) {
  if constexpr (std::is_same_v<T, bool>) return value.cast<bool>();
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(value.cast<double>());
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(value.cast<int64_t>());
  else return convert<T>(static_cast<float>(value.cast<double>()));
}

void pad_impl(py::handle out, py::handle in, py::handle before, int mode, py::handle value) {
  TensorArg I = unpack(in), O = unpack(out);
  PadMaps p = make_pad(I, O, before, mode);
  EMBER_DISPATCH_ALL(I.dtype, "pad", [&] {
    using T = scalar_t;
    T v = pad_value<T>(value);
    py::gil_scoped_release release;
    pad_forward<T>(reinterpret_cast<T*>(O.data), reinterpret_cast<const T*>(I.data), p, v);
  });
}

void pad_backward_impl(py::handle grad_in, py::handle grad_out, py::handle before, int mode) {
  TensorArg I = unpack(grad_in), O = unpack(grad_out);
  PadMaps p = make_pad(I, O, before, mode);
  need(I.dtype == DType::Float32 || I.dtype == DType::Float64, "pad backward: float32/float64 only");
  py::gil_scoped_release release;
  if (I.dtype == DType::Float32)
    pad_backward<float>(reinterpret_cast<float*>(I.data), reinterpret_cast<const float*>(O.data), p);
  else
    pad_backward<double>(reinterpret_cast<double*>(I.data), reinterpret_cast<const double*>(O.data), p);
}

// -- interpolation -----------------------------------------------------------------------

enum Mode { kNearest = 0, kNearestExact = 1, kLinear = 2, kCubic = 3 };

// Taps of every output position along one dim: `taps` source indices and weights each.
template <typename T>
struct Taps {
  int taps = 1;
  std::vector<int64_t> idx;
  std::vector<T> w;
};

template <typename T>
T cubic1(T x, T a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
template <typename T>
T cubic2(T x, T a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

// PyTorch's source-index rules (UpSample.h): area_pixel_compute_scale / _source_index, nearest_idx.
template <typename T>
Taps<T> make_taps(int64_t in, int64_t out, int mode, bool align_corners, double scale) {
  Taps<T> t;
  t.taps = mode == kCubic ? 4 : mode == kLinear ? 2 : 1;
  t.idx.resize(static_cast<size_t>(out * t.taps));
  t.w.resize(static_cast<size_t>(out * t.taps));
  if (mode == kNearest || mode == kNearestExact) {
    float s = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t i;
      if (mode == kNearest)
        i = out == in       ? o
            : out == 2 * in ? (o >> 1)
                            : std::min<int64_t>(static_cast<int64_t>(std::floor(o * s)), in - 1);
      else
        i = out == in ? o : std::min<int64_t>(static_cast<int64_t>(std::floor((o + 0.5f) * s)), in - 1);
      t.idx[static_cast<size_t>(o)] = i;
      t.w[static_cast<size_t>(o)] = T(1);
    }
    return t;
  }
  T s;
  if (align_corners) s = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else s = scale > 0 ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / static_cast<T>(out);
  for (int64_t o = 0; o < out; ++o) {
    size_t k = static_cast<size_t>(o * t.taps);
    if (mode == kLinear) {
      T src = align_corners ? s * o : std::max(s * (o + T(0.5)) - T(0.5), T(0));
      int64_t i0 = static_cast<int64_t>(src);
      int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      T l1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
      t.idx[k] = i0, t.idx[k + 1] = i1;
      t.w[k] = T(1) - l1, t.w[k + 1] = l1;
    } else {
      T src = align_corners ? s * o : s * (o + T(0.5)) - T(0.5);
      T fl = std::floor(src);
      int64_t i = static_cast<int64_t>(fl);
      T x = std::min(std::max(src - fl, T(0)), T(1));
      const T A = T(-0.75);
      T ws[4] = {cubic2<T>(x + 1, A), cubic1<T>(x, A), cubic1<T>(1 - x, A), cubic2<T>(2 - x, A)};
      for (int j = 0; j < 4; ++j) {
        t.idx[k + j] = std::min(std::max<int64_t>(i - 1 + j, 0), in - 1);
        t.w[k + j] = ws[j];
      }
    }
  }
  return t;
}

template <typename T>
struct Resample {
  int64_t planes, in[3], out[3];
  Taps<T> taps[3];
};

template <typename T>
Resample<T> make_resample(const TensorArg& in, const TensorArg& out, int mode, bool align, py::handle scales) {
  need(in.ndim() == 4 && out.ndim() == 4 && in.shape[0] == out.shape[0], "interpolate kernel: bad shapes");
  need(in.dtype == out.dtype && in.is_contiguous() && out.is_contiguous(), "interpolate kernel: bad layout");
  need(mode >= 0 && mode <= 3, "interpolate kernel: bad mode");
  auto sc = scales.cast<std::vector<double>>();
  need(sc.size() == 3, "interpolate kernel: expected 3 scales");
  Resample<T> r;
  r.planes = in.shape[0];
  for (int d = 0; d < 3; ++d) {
    r.in[d] = in.shape[1 + d];
    r.out[d] = out.shape[1 + d];
    need(r.in[d] > 0 || r.out[d] * r.planes == 0, "interpolate kernel: empty input");
    // Dims the caller does not resample are size 1 -> 1 with nearest (identity).
    r.taps[d] = make_taps<T>(r.in[d], r.out[d], r.in[d] == 1 && r.out[d] == 1 ? kNearest : mode, align, sc[d]);
  }
  return r;
}

template <typename T>
void resample_forward(T* y, const T* x, const Resample<T>& r) {
  const int64_t S = r.in[0] * r.in[1] * r.in[2], oW = r.out[2];
  const auto &td = r.taps[0], &th = r.taps[1], &tw = r.taps[2];
  parallel_for(r.planes * r.out[0] * r.out[1], std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, oW * 4)),
               [&](int64_t b, int64_t e) {
                 for (int64_t row = b; row < e; ++row) {
                   int64_t pl = row / (r.out[0] * r.out[1]), od = (row / r.out[1]) % r.out[0], oh = row % r.out[1];
                   const T* xp = x + pl * S;
                   T* dst = y + row * oW;
                   for (int64_t ow = 0; ow < oW; ++ow) {
                     T acc = 0;
                     for (int a = 0; a < td.taps; ++a) {
                       T accd = 0;
                       for (int bb = 0; bb < th.taps; ++bb) {
                         const T* src = xp + (td.idx[od * td.taps + a] * r.in[1] + th.idx[oh * th.taps + bb]) * r.in[2];
                         T acch = 0;
                         for (int c = 0; c < tw.taps; ++c)
                           acch += tw.w[ow * tw.taps + c] * src[tw.idx[ow * tw.taps + c]];
                         accd += th.w[oh * th.taps + bb] * acch;
                       }
                       acc += td.w[od * td.taps + a] * accd;
                     }
                     dst[ow] = acc;
                   }
                 }
               });
}

template <typename T>
void resample_backward(T* gx, const T* gy, const Resample<T>& r) {
  const int64_t S = r.in[0] * r.in[1] * r.in[2], oS = r.out[0] * r.out[1] * r.out[2];
  const auto &td = r.taps[0], &th = r.taps[1], &tw = r.taps[2];
  parallel_for(r.planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, oS)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* xp = gx + pl * S;
      std::fill(xp, xp + S, T(0));
      const T* g = gy + pl * oS;
      for (int64_t od = 0; od < r.out[0]; ++od)
        for (int64_t oh = 0; oh < r.out[1]; ++oh)
          for (int64_t ow = 0; ow < r.out[2]; ++ow) {
            T v = g[(od * r.out[1] + oh) * r.out[2] + ow];
            for (int a = 0; a < td.taps; ++a)
              for (int bb = 0; bb < th.taps; ++bb) {
                T* dst = xp + (td.idx[od * td.taps + a] * r.in[1] + th.idx[oh * th.taps + bb]) * r.in[2];
                T wdh = td.w[od * td.taps + a] * th.w[oh * th.taps + bb] * v;
                for (int c = 0; c < tw.taps; ++c) dst[tw.idx[ow * tw.taps + c]] += wdh * tw.w[ow * tw.taps + c];
              }
          }
    }
  });
}

void interpolate_impl(py::handle out, py::handle in, int mode, bool align, py::handle scales, bool backward) {
  // forward: out is the resampled tensor; backward: `out` is grad_input, `in` grad_output.
  TensorArg O = unpack(out), I = unpack(in);
  const TensorArg& small = backward ? O : I;
  const TensorArg& big = backward ? I : O;
  need(small.dtype == DType::Float32 || small.dtype == DType::Float64, "interpolate kernel: float32/float64 only");
  if (small.dtype == DType::Float32) {
    auto r = make_resample<float>(small, big, mode, align, scales);
    py::gil_scoped_release release;
    if (backward) resample_backward<float>((float*)O.data, (const float*)I.data, r);
    else resample_forward<float>((float*)O.data, (const float*)I.data, r);
  } else {
    auto r = make_resample<double>(small, big, mode, align, scales);
    py::gil_scoped_release release;
    if (backward) resample_backward<double>((double*)O.data, (const double*)I.data, r);
    else resample_forward<double>((double*)O.data, (const double*)I.data, r);
  }
}

// -- one_hot -----------------------------------------------------------------------------

// (min, max) of an int64 tensor (any layout is fine: contiguous is required).
py::tuple index_range_impl(py::handle idx) {
  TensorArg I = unpack(idx);
  need(I.dtype == DType::Int64 && I.is_contiguous() && I.numel() > 0, "index_range kernel: bad input");
  const int64_t* p = reinterpret_cast<const int64_t*>(I.data);
  int64_t lo = p[0], hi = p[0], n = I.numel();
  {
    py::gil_scoped_release release;
    for (int64_t i = 1; i < n; ++i) {
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
  }
  return py::make_tuple(lo, hi);
}

// out (M, K) int64 = one-hot rows of idx (M); indices outside [0, K) raise.
void one_hot_impl(py::handle out, py::handle idx) {
  TensorArg O = unpack(out), I = unpack(idx);
  need(O.dtype == DType::Int64 && I.dtype == DType::Int64 && O.ndim() == 2 && O.is_contiguous() &&
           I.is_contiguous() && I.numel() == O.shape[0],
       "one_hot kernel: bad arguments");
  const int64_t M = O.shape[0], K = O.shape[1];
  const int64_t* ix = reinterpret_cast<const int64_t*>(I.data);
  int64_t* o = reinterpret_cast<int64_t*>(O.data);
  for (int64_t i = 0; i < M; ++i) {
    if (ix[i] < 0) throw std::runtime_error("Class values must be non-negative.");
    if (ix[i] >= K) throw std::runtime_error("Class values must be smaller than num_classes.");
  }
  py::gil_scoped_release release;
  std::fill(o, o + M * K, int64_t(0));
  for (int64_t i = 0; i < M; ++i) o[i * K + ix[i]] = 1;
}

}  // namespace

void bind_resample(py::module_& m) {
  m.def("index_range", &index_range_impl, py::arg("indices"), "(min, max) of a non-empty int64 tensor.");
  m.def("one_hot", &one_hot_impl, py::arg("out"), py::arg("indices"), "out (M, K) = one-hot rows of indices (M).");
  m.def("pad_nd", &pad_impl, py::arg("out"), py::arg("input"), py::arg("before"), py::arg("mode"), py::arg("value"),
        "Pads (P,D,H,W) into out; mode 0 constant, 1 reflect, 2 replicate, 3 circular; before: leading pads.");
  m.def("pad_nd_backward", &pad_backward_impl, py::arg("grad_input"), py::arg("grad_output"), py::arg("before"),
        py::arg("mode"), "Scatter-adds grad_output through pad_nd's index map.");
  m.def(
      "interpolate",
      [](py::handle o, py::handle i, int m, bool a, py::handle s) { interpolate_impl(o, i, m, a, s, false); },
      py::arg("out"), py::arg("input"), py::arg("mode"), py::arg("align_corners"), py::arg("scales"),
      "Resamples (P,D,H,W) into out; mode 0 nearest, 1 nearest-exact, 2 linear, 3 cubic; scales (0: none).");
  m.def(
      "interpolate_backward",
      [](py::handle gi, py::handle go, int m, bool a, py::handle s) { interpolate_impl(gi, go, m, a, s, true); },
      py::arg("grad_input"), py::arg("grad_output"), py::arg("mode"), py::arg("align_corners"), py::arg("scales"),
      "The input gradient of interpolate.");
}

}  // namespace ember
