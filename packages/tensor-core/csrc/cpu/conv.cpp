// Kernel family "conv": convolution by im2col + OpenBLAS gemm, its two backward kernels, and
// im2col/col2im as ops (unfold/fold).
//
// Every kernel works on one relation between a large "image" tensor X (N, Cx, D, H, W) and a
// small "output" tensor Y (N, Cy, oD, oH, oW) with weight (Cy, Cx/groups, kd, kh, kw):
//   conv_forward:         Y  = W @ im2col(X)            (conv forward)
//   conv_backward_input:  X  = col2im(W^T @ Y)          (conv grad-input, conv_transpose forward)
//   conv_backward_weight: gW = sum_n Y[n] @ im2col(X[n])^T
// 1-d and 2-d convolutions are 3-d ones with size-1 leading spatial dims. Tensors arrive
// contiguous in float32/float64 (the Python caller converts). Padding is the front padding
// only: output sizes are given, so the asymmetric padding of 'same' needs nothing special.
//
// Each image is processed in column chunks of whole output rows, so the im2col buffer stays
// in cache while BLAS packs it. Images run in parallel on OpenMP threads with single-threaded
// BLAS when the batch covers the threads; otherwise one image at a time with threaded BLAS.
#include <cblas.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"
#include "conv_direct.h"

namespace py = pybind11;

// The im2col/col2im runs are a few dozen elements (often one or two at the padded edges): gcc
// must not turn those loops into memset/memcpy calls, which cost more than the copy.
#pragma GCC optimize("no-tree-loop-distribute-patterns")

namespace ember {

namespace {

struct Geometry {
  int64_t n, cx, cy, groups;
  int64_t in[3], out[3], k[3], stride[3], pad[3], dil[3];
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kvol() const { return k[0] * k[1] * k[2]; }
  int64_t rows() const { return cx * kvol(); }  // im2col rows over all groups
  // A 1x1x1 kernel with stride 1 and no padding reads X itself as the column matrix.
  bool identity() const {
    for (int i = 0; i < 3; ++i)
      if (k[i] != 1 || stride[i] != 1 || pad[i] != 0 || in[i] != out[i]) return false;
    return true;
  }
};

template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS may skip the beta scaling when k == 0; keep the zero-fill explicit
    if (beta == T(0))
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c,
                      (int)ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c,
                      (int)ldc);
}

// Output rows (of oW columns each) per chunk: about 512 KiB of columns (fits L2 beside BLAS's
// packed panels; whole-image buffers measured 20-50% slower), at least one row.
int64_t chunk_rows(const Geometry& g, int64_t elem) {
  int64_t row_bytes = std::max<int64_t>(1, g.rows() * g.out[2] * elem);
  return std::max<int64_t>(1, (int64_t(512) << 10) / row_bytes);
}

// The walk im2col and col2im share, for the output rows [r0, r0 + nrows) of one image (a row
// is one (od, oh) pair): fn(r, rr, src_row, lo, hi, sw) for every im2col row r (a (channel,
// tap) pair) and output row rr, with src_row the image row the tap reads (nullptr when it lies
// in the padding) shifted so that output column ow reads src_row[ow * sw], valid for ow in
// [lo, hi). Row positions are computed once per (a, b) tap pair and column bounds once per
// column tap, not per element: for small images (14x14, 5x5 taps) the old per-row divisions
// and library copy calls cost as much as the GEMM.
template <typename T, typename F>
void for_each_tap_row(T* x, const Geometry& g, int64_t r0, int64_t nrows, std::vector<int64_t>& rowoff,
                      const F& fn) {
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], oH = g.out[1], oW = g.out[2];
  const int64_t sw = g.stride[2], pw = g.pad[2], dw = g.dil[2];
  const int64_t kd = g.k[0], kh = g.k[1], kw = g.k[2], plane = D * H * W;
  rowoff.resize(static_cast<size_t>(nrows));
  for (int64_t a = 0; a < kd; ++a)
    for (int64_t b = 0; b < kh; ++b) {
      int64_t od = r0 / oH, oh = r0 % oH;
      for (int64_t rr = 0; rr < nrows; ++rr) {
        const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
        const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
        rowoff[rr] = (id < 0 || id >= D || ih < 0 || ih >= H) ? -1 : (id * H + ih) * W;
        if (++oh == oH) {
          oh = 0;
          ++od;
        }
      }
      for (int64_t e = 0; e < kw; ++e) {
        // Columns ow with 0 <= ow*sw - pw + e*dw < W: [lo, hi).
        const int64_t off = e * dw - pw;
        const int64_t lo = off >= 0 ? 0 : std::min(oW, (-off + sw - 1) / sw);
        const int64_t hi = std::max(lo, W - off <= 0 ? 0 : std::min(oW, (W - off + sw - 1) / sw));
        for (int64_t c = 0; c < g.cx; ++c) {
          const int64_t r = ((c * kd + a) * kh + b) * kw + e;
          T* xc = x + c * plane + off;
          for (int64_t rr = 0; rr < nrows; ++rr) fn(r, rr, rowoff[rr] < 0 ? nullptr : xc + rowoff[rr], lo, hi, sw);
        }
      }
    }
}

// cols (rows x cols_ld, first nrows * oW columns used) <- im2col of image x over output rows
// [r0, r0 + nrows). Plain loops, not memcpy/fill: the runs are a few dozen elements.
template <typename T>
void im2col_rows(const T* x, const Geometry& g, int64_t r0, int64_t nrows, T* cols, int64_t cols_ld) {
  thread_local std::vector<int64_t> rowoff;
  const int64_t oW = g.out[2];
  for_each_tap_row(const_cast<T*>(x), g, r0, nrows, rowoff,
                   [&](int64_t r, int64_t rr, const T* src, int64_t lo, int64_t hi, int64_t sw) {
    T* dst = cols + r * cols_ld + rr * oW;
    if (!src) {
      for (int64_t ow = 0; ow < oW; ++ow) dst[ow] = T(0);
      return;
    }
    for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = T(0);
    if (sw == 1)
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow];
    else
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sw];
    for (int64_t ow = hi; ow < oW; ++ow) dst[ow] = T(0);
  });
}

// x (image) += col2im of cols over output rows [r0, r0 + nrows): the adjoint of im2col_rows.
template <typename T>
void col2im_rows(T* x, const Geometry& g, int64_t r0, int64_t nrows, const T* cols, int64_t cols_ld) {
  thread_local std::vector<int64_t> rowoff;
  const int64_t oW = g.out[2];
  for_each_tap_row(x, g, r0, nrows, rowoff, [&](int64_t r, int64_t rr, T* dst, int64_t lo, int64_t hi, int64_t sw) {
    if (!dst) return;
    const T* src = cols + r * cols_ld + rr * oW;
    if (sw == 1)
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += src[ow];
    else
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow * sw] += src[ow];
  });
}

// Runs fn(image, scratch) for every image: in parallel with single-threaded BLAS when the batch
// covers the threads, else sequentially with BLAS using all threads.
template <typename F>
void for_each_image(int64_t n, const F& fn) {
  int threads = get_num_threads();
  if (threads > 1 && n >= threads) {
    BlasSingleThread guard;
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

template <typename T>
void conv_forward(T* y, const T* x, const T* w, const T* bias, const Geometry& g) {
  const int64_t L = g.out_size(), K = g.rows() / g.groups, cyg = g.cy / g.groups, oW = g.out[2];
  const int64_t nrows_total = g.out[0] * g.out[1];
  const bool ident = g.identity();
  const int64_t step = chunk_rows(g, sizeof(T));
  for_each_image(g.n, [&](int64_t i) {
    const T* xi = x + i * g.cx * g.in_size();
    T* yi = y + i * g.cy * L;
    std::vector<T> cols(ident ? 0 : static_cast<size_t>(g.rows() * std::min(step, nrows_total) * oW));
    for (int64_t r0 = 0; r0 < nrows_total; r0 += step) {
      int64_t nr = std::min(step, nrows_total - r0), len = nr * oW;
      const T* B = xi + r0 * oW;
      int64_t ldb = L;
      if (!ident) {
        im2col_rows(xi, g, r0, nr, cols.data(), len);
        B = cols.data();
        ldb = len;
      }
      T beta = T(0);
      if (bias) {
        for (int64_t co = 0; co < g.cy; ++co) std::fill(yi + co * L + r0 * oW, yi + co * L + r0 * oW + len, bias[co]);
        beta = T(1);
      }
      for (int64_t gi = 0; gi < g.groups; ++gi)
        gemm<T>(CblasNoTrans, CblasNoTrans, cyg, len, K, w + gi * cyg * K, K, B + gi * K * ldb, ldb, beta,
                yi + gi * cyg * L + r0 * oW, L);
    }
  });
}

template <typename T>
void conv_backward_input(T* x, const T* y, const T* w, const T* bias, const Geometry& g) {
  const int64_t L = g.out_size(), K = g.rows() / g.groups, cyg = g.cy / g.groups, oW = g.out[2];
  const int64_t nrows_total = g.out[0] * g.out[1], S = g.in_size();
  const bool ident = g.identity();
  const int64_t step = chunk_rows(g, sizeof(T));
  for_each_image(g.n, [&](int64_t i) {
    T* xi = x + i * g.cx * S;
    const T* yi = y + i * g.cy * L;
    if (ident) {
      for (int64_t gi = 0; gi < g.groups; ++gi)
        gemm<T>(CblasTrans, CblasNoTrans, K, L, cyg, w + gi * cyg * K, K, yi + gi * cyg * L, L, T(0),
                xi + gi * K * L, L);
    } else {
      std::fill(xi, xi + g.cx * S, T(0));
      std::vector<T> cols(static_cast<size_t>(g.rows() * std::min(step, nrows_total) * oW));
      for (int64_t r0 = 0; r0 < nrows_total; r0 += step) {
        int64_t nr = std::min(step, nrows_total - r0), len = nr * oW;
        for (int64_t gi = 0; gi < g.groups; ++gi)
          gemm<T>(CblasTrans, CblasNoTrans, K, len, cyg, w + gi * cyg * K, K, yi + gi * cyg * L + r0 * oW, L, T(0),
                  cols.data() + gi * K * len, len);
        col2im_rows(xi, g, r0, nr, cols.data(), len);
      }
    }
    if (bias)
      for (int64_t c = 0; c < g.cx; ++c)
        for (T *p = xi + c * S, *e = p + S; p < e; ++p) *p += bias[c];
  });
}

template <typename T>
void conv_backward_weight(T* gw, const T* x, const T* y, const Geometry& g) {
  const int64_t L = g.out_size(), K = g.rows() / g.groups, cyg = g.cy / g.groups, oW = g.out[2];
  const int64_t nrows_total = g.out[0] * g.out[1], wsize = g.cy * K;
  const bool ident = g.identity();
  const int64_t step = chunk_rows(g, sizeof(T));
  int threads = get_num_threads();
  bool par = threads > 1 && g.n >= threads;
  int nbuf = par ? threads : 1;
  // One accumulator per thread (the first is gw itself), summed at the end.
  std::vector<std::vector<T>> partial(static_cast<size_t>(nbuf - 1), std::vector<T>(static_cast<size_t>(wsize)));
  std::fill(gw, gw + wsize, T(0));
  auto body = [&](int64_t b, int64_t e, T* acc) {
    std::vector<T> cols(ident ? 0 : static_cast<size_t>(g.rows() * std::min(step, nrows_total) * oW));
    for (int64_t i = b; i < e; ++i) {
      const T* xi = x + i * g.cx * g.in_size();
      const T* yi = y + i * g.cy * L;
      for (int64_t r0 = 0; r0 < nrows_total; r0 += step) {
        int64_t nr = std::min(step, nrows_total - r0), len = nr * oW;
        const T* B = xi + r0 * oW;
        int64_t ldb = L;
        if (!ident) {
          im2col_rows(xi, g, r0, nr, cols.data(), len);
          B = cols.data();
          ldb = len;
        }
        for (int64_t gi = 0; gi < g.groups; ++gi)
          gemm<T>(CblasNoTrans, CblasTrans, cyg, K, len, yi + gi * cyg * L + r0 * oW, L, B + gi * K * ldb, ldb,
                  T(1), acc + gi * cyg * K, K);
      }
    }
  };
  if (!par) {
    body(0, g.n, gw);
    return;
  }
  {
    BlasSingleThread guard;
    // One part of the batch per accumulator; parallel_for carries exceptions out of the region.
    const int64_t chunk = (g.n + nbuf - 1) / nbuf;
    parallel_for(nbuf, 1, [&](int64_t first, int64_t last) {
      for (int64_t part = first; part < last; ++part) {
        int64_t b = part * chunk, e = std::min(g.n, b + chunk);
        if (b < e) body(b, e, part == 0 ? gw : partial[static_cast<size_t>(part - 1)].data());
      }
    });
  }
  for (auto& p : partial)
    for (int64_t j = 0; j < wsize; ++j) gw[j] += p[static_cast<size_t>(j)];
}

// -- argument plumbing ------------------------------------------------------------------

// The geometry as a direct 2-d convolution (conv_direct.h) when it is one: float32, one group,
// no depth. The caller still asks direct_conv_fits / direct_conv_input_fits.
bool as_direct(const Geometry& g, DType dtype, DirectConv& c) {
  if (dtype != DType::Float32 || g.groups != 1 || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.pad[0] != 0)
    return false;
  c = DirectConv{g.n, g.cx, g.cy, g.in[1], g.in[2], g.out[1], g.out[2], g.k[1], g.k[2],
                 g.stride[1], g.stride[2], g.pad[1], g.pad[2], g.dil[1], g.dil[2]};
  return true;
}

void read3(py::handle seq, int64_t* dst, const char* what) {
  auto v = to_int64_vector(seq, what);
  if (v.size() != 3) throw std::invalid_argument(std::string(what) + " must have 3 entries");
  for (int i = 0; i < 3; ++i) dst[i] = v[static_cast<size_t>(i)];
}

constexpr int64_t kMaxParam = int64_t(1) << 31;

void need(bool ok, const char* msg) {
  if (!ok) throw std::runtime_error(msg);
}

// Validates X (N,Cx,D,H,W), Y (N,Cy,oD,oH,oW), W (Cy,Cx/g,k...) and the geometry, so a bad call
// from Python raises instead of reading outside memory.
Geometry make_geometry(const TensorArg& X, const TensorArg& Y, const TensorArg& Wt, py::handle stride,
                       py::handle padding, py::handle dilation, int64_t groups) {
  need(X.ndim() == 5 && Y.ndim() == 5 && Wt.ndim() == 5, "conv kernel expects 5-d tensors");
  need(X.dtype == Y.dtype && X.dtype == Wt.dtype, "conv kernel: dtypes differ");
  need(X.dtype == DType::Float32 || X.dtype == DType::Float64, "conv kernel: float32/float64 only");
  need(X.is_contiguous() && Y.is_contiguous() && Wt.is_contiguous(), "conv kernel expects contiguous tensors");
  Geometry g{};
  g.n = X.shape[0];
  g.cx = X.shape[1];
  g.cy = Y.shape[1];
  g.groups = groups;
  need(groups >= 1 && g.cx % groups == 0 && g.cy % groups == 0, "conv kernel: bad groups");
  need(Y.shape[0] == g.n && Wt.shape[0] == g.cy && Wt.shape[1] * groups == g.cx, "conv kernel: bad shapes");
  read3(stride, g.stride, "stride");
  read3(padding, g.pad, "padding");
  read3(dilation, g.dil, "dilation");
  for (int i = 0; i < 3; ++i) {
    g.in[i] = X.shape[2 + i];
    g.out[i] = Y.shape[2 + i];
    g.k[i] = Wt.shape[2 + i];
    need(g.stride[i] >= 1 && g.dil[i] >= 1 && g.pad[i] >= 0 && g.k[i] >= 1, "conv kernel: bad geometry");
    // The last tap of the last output must be addressable: any index it computes stays in int64.
    // Reads are bounds-checked per tap; this only keeps index arithmetic far from int64 overflow.
    need(g.stride[i] < kMaxParam && g.dil[i] < kMaxParam && g.pad[i] < kMaxParam && g.k[i] < kMaxParam,
         "conv kernel: parameter too large");
  }
  need(g.rows() / groups <= INT_MAX && g.out_size() <= INT_MAX && g.cy <= INT_MAX, "conv kernel: too large for BLAS");
  return g;
}

const char* bias_ptr(py::handle bias, int64_t channels, DType dtype) {
  if (bias.is_none()) return nullptr;
  TensorArg b = unpack(bias);
  need(b.ndim() == 1 && b.shape[0] == channels && b.dtype == dtype && b.is_contiguous(), "conv kernel: bad bias");
  return b.data;
}

// -- non-finite values next to the padding ----------------------------------------------
// Every path above reads the padding as zeros it multiplies (im2col's zero columns, the direct
// kernels' padded image, the input gradient's padded output gradient), so an infinite or NaN
// weight (forward, input gradient) or output gradient (weight gradient) times a padded zero gave
// NaN where PyTorch, which adds only the products of image values, gives a finite value or +-inf.
// A scan of the weight (cy * K values, beside a product of n * L * cy * K) finds them; the fast
// path then runs with those entries zeroed and the few products they take part in are added
// here, over the valid (output, input) pairs only. Outputs such an entry reaches are then +-inf
// or NaN whatever the order of the sum, so the result equals PyTorch's.

// True where any of p[0..n) is infinite or NaN (an exponent of all ones; a bit test, so
// -ffinite-math-only could not fold it away, and a plain OR reduction the compiler vectorizes).
template <typename T>
bool any_nonfinite(const T* p, int64_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr U kExp = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U hit = 0;
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + i, sizeof(U));
    hit |= static_cast<U>((u & kExp) == kExp);
  }
  return hit != 0;
}

template <typename T>
bool is_nonfinite(T v) {
  return any_nonfinite(&v, 1);
}

bool any_padding(const Geometry& g) { return g.pad[0] > 0 || g.pad[1] > 0 || g.pad[2] > 0; }

// fn(o, i) for every output position o (flat over oD, oH, oW) whose tap (a, b, e) reads the image
// position i (flat over D, H, W) inside the image.
template <typename F>
void each_valid_pair(const Geometry& g, int64_t a, int64_t b, int64_t e, const F& fn) {
  for (int64_t od = 0; od < g.out[0]; ++od) {
    const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t iw = ow * g.stride[2] - g.pad[2] + e * g.dil[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        fn((od * g.out[1] + oh) * g.out[2] + ow, (id * g.in[1] + ih) * g.in[2] + iw);
      }
    }
  }
}

// w (cy, cx / groups, kvol) with its non-finite entries zeroed in wz; calls fix(co, ci, a, b, e,
// value) for each such entry (ci the image channel). False (wz untouched) where there is none.
template <typename T, typename F>
bool split_nonfinite_weight(const T* w, const Geometry& g, std::vector<T>& wz, const F& fix) {
  const int64_t cxg = g.cx / g.groups, cyg = g.cy / g.groups, kv = g.kvol(), total = g.cy * cxg * kv;
  if (!any_nonfinite(w, total)) return false;
  wz.assign(w, w + total);
  for (int64_t j = 0; j < total; ++j)
    if (is_nonfinite(w[j])) {
      wz[static_cast<size_t>(j)] = T(0);
      const int64_t co = j / (cxg * kv), ci = (co / cyg) * cxg + (j / kv) % cxg, t = j % kv;
      fix(co, ci, t / (g.k[1] * g.k[2]), (t / g.k[2]) % g.k[1], t % g.k[2], w[j]);
    }
  return true;
}

// Exact sums for the few outputs where a zeroed entry met a non-finite value in the fast path
// (0 * inf = NaN there, where the true product is +-inf): each from scratch over its valid pairs.
template <typename T>
T exact_forward(const T* x, const T* w, const T* bias, const Geometry& g, int64_t i, int64_t co, int64_t o) {
  const int64_t cxg = g.cx / g.groups, cyg = g.cy / g.groups, kv = g.kvol(), S = g.in_size();
  const int64_t od = o / (g.out[1] * g.out[2]), oh = (o / g.out[2]) % g.out[1], ow = o % g.out[2];
  T sum = bias ? bias[co] : T(0);
  for (int64_t cig = 0; cig < cxg; ++cig) {
    const T* xi = x + (i * g.cx + (co / cyg) * cxg + cig) * S;
    const T* wr = w + (co * cxg + cig) * kv;
    for (int64_t a = 0; a < g.k[0]; ++a) {
      const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
      if (id < 0 || id >= g.in[0]) continue;
      for (int64_t b = 0; b < g.k[1]; ++b) {
        const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
        if (ih < 0 || ih >= g.in[1]) continue;
        for (int64_t e = 0; e < g.k[2]; ++e) {
          const int64_t iw = ow * g.stride[2] - g.pad[2] + e * g.dil[2];
          if (iw < 0 || iw >= g.in[2]) continue;
          sum += wr[(a * g.k[1] + b) * g.k[2] + e] * xi[(id * g.in[1] + ih) * g.in[2] + iw];
        }
      }
    }
  }
  return sum;
}

// The output index along one axis that tap t reads image index i from, or -1.
inline int64_t out_index(const Geometry& g, int axis, int64_t i, int64_t t) {
  const int64_t num = i + g.pad[axis] - t * g.dil[axis];
  if (num < 0 || num % g.stride[axis] != 0 || num / g.stride[axis] >= g.out[axis]) return -1;
  return num / g.stride[axis];
}

template <typename T>
T exact_input(const T* y, const T* w, const T* bias, const Geometry& g, int64_t i, int64_t ci, int64_t p) {
  const int64_t cxg = g.cx / g.groups, cyg = g.cy / g.groups, kv = g.kvol(), L = g.out_size();
  const int64_t id = p / (g.in[1] * g.in[2]), ih = (p / g.in[2]) % g.in[1], iw = p % g.in[2];
  const int64_t grp = ci / cxg, cig = ci % cxg;
  T sum = bias ? bias[ci] : T(0);
  for (int64_t co = grp * cyg; co < (grp + 1) * cyg; ++co) {
    const T* yo = y + (i * g.cy + co) * L;
    const T* wr = w + (co * cxg + cig) * kv;
    for (int64_t a = 0; a < g.k[0]; ++a) {
      const int64_t od = out_index(g, 0, id, a);
      if (od < 0) continue;
      for (int64_t b = 0; b < g.k[1]; ++b) {
        const int64_t oh = out_index(g, 1, ih, b);
        if (oh < 0) continue;
        for (int64_t e = 0; e < g.k[2]; ++e) {
          const int64_t ow = out_index(g, 2, iw, e);
          if (ow < 0) continue;
          sum += wr[(a * g.k[1] + b) * g.k[2] + e] * yo[(od * g.out[1] + oh) * g.out[2] + ow];
        }
      }
    }
  }
  return sum;
}

// The direct kernels (float32) where they fit, else im2col + gemm.
template <typename T>
void conv_forward_fast(T* y, const T* x, const T* w, const T* bias, const Geometry& g) {
  DirectConv dc;
  if constexpr (std::is_same_v<T, float>)
    if (as_direct(g, DType::Float32, dc) && direct_conv_fits(dc)) return direct_conv_forward(y, x, w, bias, dc);
  conv_forward<T>(y, x, w, bias, g);
}

template <typename T>
void conv_backward_input_fast(T* x, const T* y, const T* w, const T* bias, const Geometry& g) {
  DirectConv dc;
  if constexpr (std::is_same_v<T, float>)
    if (as_direct(g, DType::Float32, dc) && direct_conv_input_fits(dc))
      return direct_conv_backward_input(x, y, w, bias, dc);
  conv_backward_input<T>(x, y, w, bias, g);
}

template <typename T>
void conv_backward_weight_fast(T* gw, const T* x, const T* y, const Geometry& g) {
  DirectConv dc;
  if constexpr (std::is_same_v<T, float>)
    if (as_direct(g, DType::Float32, dc) && direct_conv_fits(dc)) return direct_conv_backward_weight(gw, x, y, dc);
  conv_backward_weight<T>(gw, x, y, g);
}

// The fast paths, then the products of non-finite weights / output gradients over the image
// only (see above). Without padding no path multiplies a zero it made up, except the direct input
// gradient (it pads the output gradient by d (k - 1) - p): the weight is scanned there always.
template <typename T>
void conv_forward_any(T* y, const T* x, const T* w, const T* bias, const Geometry& g) {
  std::vector<T> wz;
  struct Entry { int64_t co, ci, a, b, e; T v; };
  std::vector<Entry> bad;
  if (!any_padding(g) ||
      !split_nonfinite_weight(w, g, wz, [&](int64_t co, int64_t ci, int64_t a, int64_t b, int64_t e, T v) {
        bad.push_back({co, ci, a, b, e, v});
      }))
    return conv_forward_fast<T>(y, x, w, bias, g);
  conv_forward_fast<T>(y, x, wz.data(), bias, g);
  const int64_t L = g.out_size(), S = g.in_size();
  std::vector<int64_t> redo;  // flat (i, co, o) where the zeroed weight met a non-finite pixel
  for (int64_t i = 0; i < g.n; ++i)
    for (const Entry& t : bad) {
      T* yo = y + (i * g.cy + t.co) * L;
      const T* xi = x + (i * g.cx + t.ci) * S;
      each_valid_pair(g, t.a, t.b, t.e, [&](int64_t o, int64_t p) {
        yo[o] += t.v * xi[p];
        if (is_nonfinite(xi[p])) redo.push_back((i * g.cy + t.co) * L + o);
      });
    }
  for (int64_t f : redo) y[f] = exact_forward(x, w, bias, g, f / L / g.cy, (f / L) % g.cy, f % L);
}

template <typename T>
void conv_backward_input_any(T* x, const T* y, const T* w, const T* bias, const Geometry& g) {
  std::vector<T> wz;
  struct Entry { int64_t co, ci, a, b, e; T v; };
  std::vector<Entry> bad;
  if (!split_nonfinite_weight(w, g, wz, [&](int64_t co, int64_t ci, int64_t a, int64_t b, int64_t e, T v) {
        bad.push_back({co, ci, a, b, e, v});
      }))
    return conv_backward_input_fast<T>(x, y, w, bias, g);
  conv_backward_input_fast<T>(x, y, wz.data(), bias, g);
  const int64_t L = g.out_size(), S = g.in_size();
  std::vector<int64_t> redo;  // flat (i, ci, p) where the zeroed weight met a non-finite gradient
  for (int64_t i = 0; i < g.n; ++i)
    for (const Entry& t : bad) {
      const T* yo = y + (i * g.cy + t.co) * L;
      T* xi = x + (i * g.cx + t.ci) * S;
      each_valid_pair(g, t.a, t.b, t.e, [&](int64_t o, int64_t p) {
        xi[p] += t.v * yo[o];
        if (is_nonfinite(yo[o])) redo.push_back((i * g.cx + t.ci) * S + p);
      });
    }
  for (int64_t f : redo) x[f] = exact_input(y, w, bias, g, f / S / g.cx, (f / S) % g.cx, f % S);
}

template <typename T>
void conv_backward_weight_any(T* gw, const T* x, const T* y, const Geometry& g) {
  const int64_t L = g.out_size(), S = g.in_size(), total = g.n * g.cy * L;
  if (!any_padding(g) || !any_nonfinite(y, total)) return conv_backward_weight_fast<T>(gw, x, y, g);
  std::vector<T> yz(y, y + total);
  for (auto& v : yz)
    if (is_nonfinite(v)) v = T(0);
  conv_backward_weight_fast<T>(gw, x, yz.data(), g);
  // gw[co][ci][t] += y[i][co][o] * x[i][ci][p] over the valid pairs (o, p) of tap t, for the
  // non-finite y[i][co][o]: a mask of them per (i, co) row, then each tap's pairs.
  const int64_t cxg = g.cx / g.groups, cyg = g.cy / g.groups, kv = g.kvol();
  std::vector<int64_t> redo;  // weight entries where a zeroed gradient met a non-finite pixel
  for (int64_t i = 0; i < g.n; ++i)
    for (int64_t co = 0; co < g.cy; ++co) {
      const T* yo = y + (i * g.cy + co) * L;
      if (!any_nonfinite(yo, L)) continue;
      for (int64_t cig = 0; cig < cxg; ++cig) {
        const T* xi = x + (i * g.cx + (co / cyg) * cxg + cig) * S;
        for (int64_t t = 0; t < kv; ++t) {
          T acc = T(0);
          bool any = false;
          each_valid_pair(g, t / (g.k[1] * g.k[2]), (t / g.k[2]) % g.k[1], t % g.k[2], [&](int64_t o, int64_t p) {
            if (is_nonfinite(yo[o])) {
              acc += yo[o] * xi[p];
              any = true;
              if (is_nonfinite(xi[p])) redo.push_back((co * cxg + cig) * kv + t);
            }
          });
          if (any) gw[(co * cxg + cig) * kv + t] += acc;
        }
      }
    }
  // Those entries from scratch: the sum over every image and valid pair with the original y.
  std::sort(redo.begin(), redo.end());
  redo.erase(std::unique(redo.begin(), redo.end()), redo.end());
  for (int64_t f : redo) {
    const int64_t co = f / (cxg * kv), cig = (f / kv) % cxg, t = f % kv;
    T acc = T(0);
    for (int64_t i = 0; i < g.n; ++i) {
      const T* yo = y + (i * g.cy + co) * L;
      const T* xi = x + (i * g.cx + (co / cyg) * cxg + cig) * S;
      each_valid_pair(g, t / (g.k[1] * g.k[2]), (t / g.k[2]) % g.k[1], t % g.k[2],
                      [&](int64_t o, int64_t p) { acc += yo[o] * xi[p]; });
    }
    gw[f] = acc;
  }
}

void conv_forward_impl(py::handle y, py::handle x, py::handle w, py::handle bias, py::handle stride,
                       py::handle padding, py::handle dilation, int64_t groups) {
  TensorArg X = unpack(x), Y = unpack(y), Wt = unpack(w);
  Geometry g = make_geometry(X, Y, Wt, stride, padding, dilation, groups);
  const char* b = bias_ptr(bias, g.cy, X.dtype);
  py::gil_scoped_release release;
  if (X.dtype == DType::Float32)
    conv_forward_any<float>((float*)Y.data, (const float*)X.data, (const float*)Wt.data, (const float*)b, g);
  else
    conv_forward_any<double>((double*)Y.data, (const double*)X.data, (const double*)Wt.data, (const double*)b, g);
}

void conv_backward_input_impl(py::handle x, py::handle y, py::handle w, py::handle bias, py::handle stride,
                              py::handle padding, py::handle dilation, int64_t groups) {
  TensorArg X = unpack(x), Y = unpack(y), Wt = unpack(w);
  Geometry g = make_geometry(X, Y, Wt, stride, padding, dilation, groups);
  const char* b = bias_ptr(bias, g.cx, X.dtype);
  py::gil_scoped_release release;
  if (X.dtype == DType::Float32)
    conv_backward_input_any<float>((float*)X.data, (const float*)Y.data, (const float*)Wt.data, (const float*)b, g);
  else
    conv_backward_input_any<double>((double*)X.data, (const double*)Y.data, (const double*)Wt.data, (const double*)b,
                                    g);
}

void conv_backward_weight_impl(py::handle gw, py::handle x, py::handle y, py::handle stride, py::handle padding,
                               py::handle dilation, int64_t groups) {
  TensorArg X = unpack(x), Y = unpack(y), Wt = unpack(gw);
  Geometry g = make_geometry(X, Y, Wt, stride, padding, dilation, groups);
  py::gil_scoped_release release;
  if (X.dtype == DType::Float32)
    conv_backward_weight_any<float>((float*)Wt.data, (const float*)X.data, (const float*)Y.data, g);
  else
    conv_backward_weight_any<double>((double*)Wt.data, (const double*)X.data, (const double*)Y.data, g);
}

// im2col / col2im as ops: cols (N, C*kvol, L) <-> image (N, C, D, H, W). The weight argument of the
// geometry is replaced by the kernel size.
Geometry fold_geometry(const TensorArg& X, const TensorArg& C, py::handle kernel, py::handle stride,
                       py::handle padding, py::handle dilation, py::handle out_size) {
  need(X.ndim() == 5 && C.ndim() == 3, "im2col kernel: bad ranks");
  need(X.dtype == C.dtype && (X.dtype == DType::Float32 || X.dtype == DType::Float64), "im2col kernel: bad dtype");
  need(X.is_contiguous() && C.is_contiguous(), "im2col kernel expects contiguous tensors");
  Geometry g{};
  g.n = X.shape[0];
  g.cx = X.shape[1];
  g.cy = 1;
  g.groups = 1;
  read3(kernel, g.k, "kernel_size");
  read3(stride, g.stride, "stride");
  read3(padding, g.pad, "padding");
  read3(dilation, g.dil, "dilation");
  read3(out_size, g.out, "output size");
  for (int i = 0; i < 3; ++i) {
    g.in[i] = X.shape[2 + i];
    need(g.stride[i] >= 1 && g.dil[i] >= 1 && g.pad[i] >= 0 && g.k[i] >= 1 && g.out[i] >= 0, "im2col: bad geometry");
    need(g.stride[i] < kMaxParam && g.dil[i] < kMaxParam && g.pad[i] < kMaxParam && g.k[i] < kMaxParam &&
             g.out[i] < kMaxParam,
         "im2col: parameter too large");
  }
  need(C.shape[0] == g.n && C.shape[1] == g.rows() && C.shape[2] == g.out_size(), "im2col kernel: bad shapes");
  return g;
}

template <typename T>
void run_fold(T* x, T* cols, const Geometry& g, bool to_cols) {
  const int64_t L = g.out_size(), rows = g.out[0] * g.out[1], S = g.cx * g.in_size();
  parallel_for(g.n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (to_cols) {
        im2col_rows(x + i * S, g, 0, rows, cols + i * g.rows() * L, L);
      } else {
        std::fill(x + i * S, x + (i + 1) * S, T(0));
        col2im_rows(x + i * S, g, 0, rows, cols + i * g.rows() * L, L);
      }
    }
  });
}

void fold_impl(py::handle image, py::handle cols, py::handle kernel, py::handle stride, py::handle padding,
               py::handle dilation, py::handle out_size, bool to_cols) {
  TensorArg X = unpack(image), C = unpack(cols);
  Geometry g = fold_geometry(X, C, kernel, stride, padding, dilation, out_size);
  py::gil_scoped_release release;
  if (X.dtype == DType::Float32)
    run_fold<float>((float*)X.data, (float*)C.data, g, to_cols);
  else
    run_fold<double>((double*)X.data, (double*)C.data, g, to_cols);
}

// out[c] = sum over n, l of y[n, c, l]: the bias gradient.
void channel_sum_impl(py::handle out, py::handle y) {
  TensorArg O = unpack(out), Y = unpack(y);
  need(O.ndim() == 1 && Y.ndim() == 3 && Y.shape[1] == O.shape[0] && O.dtype == Y.dtype && Y.is_contiguous() &&
           O.is_contiguous() && (O.dtype == DType::Float32 || O.dtype == DType::Float64),
       "channel_sum kernel: bad arguments");
  const int64_t N = Y.shape[0], C = Y.shape[1], L = Y.shape[2];
  py::gil_scoped_release release;
  auto run = [&](auto* o, const auto* g) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
    parallel_for(C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N * L)), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        double acc = 0;  // float64 accumulation: large N*L sums stay accurate
        for (int64_t n = 0; n < N; ++n) {
          const T* row = g + (n * C + c) * L;
          T part = 0;
          for (int64_t l = 0; l < L; ++l) part += row[l];
          acc += part;
        }
        o[c] = static_cast<T>(acc);
      }
    });
  };
  if (O.dtype == DType::Float32) run((float*)O.data, (const float*)Y.data);
  else run((double*)O.data, (const double*)Y.data);
}

}  // namespace

void bind_conv(py::module_& m) {
  m.def("conv_forward", &conv_forward_impl, py::arg("y"), py::arg("x"), py::arg("weight"), py::arg("bias"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"),
        "y (N,Cy,oD,oH,oW) = conv(x (N,Cx,D,H,W), weight (Cy,Cx/g,kd,kh,kw)) + bias.");
  m.def("conv_backward_input", &conv_backward_input_impl, py::arg("x"), py::arg("y"), py::arg("weight"),
        py::arg("bias"), py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"),
        "x = col2im(weight^T @ y) + bias: conv's input gradient, conv_transpose's forward.");
  m.def("conv_backward_weight", &conv_backward_weight_impl, py::arg("grad_weight"), py::arg("x"), py::arg("y"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"),
        "grad_weight = sum_n y[n] @ im2col(x[n])^T.");
  m.def("channel_sum", &channel_sum_impl, py::arg("out"), py::arg("y"), "out (C) = y (N, C, L) summed over N and L.");
  m.def(
      "im2col", [](py::handle x, py::handle c, py::handle k, py::handle s, py::handle p, py::handle d,
                   py::handle o) { fold_impl(x, c, k, s, p, d, o, true); },
      "cols (N, C*kvol, L) = im2col(x (N,C,D,H,W)).");
  m.def(
      "col2im", [](py::handle x, py::handle c, py::handle k, py::handle s, py::handle p, py::handle d,
                   py::handle o) { fold_impl(x, c, k, s, p, d, o, false); },
      "x (N,C,D,H,W) = col2im(cols (N, C*kvol, L)), overlapping entries summed.");
}

}  // namespace ember
