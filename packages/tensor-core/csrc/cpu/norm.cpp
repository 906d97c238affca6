// Kernel family "norm": row statistics and per-channel affine passes behind layer_norm,
// rms_norm, batch_norm and group_norm (forward and backward). Inputs are contiguous float32 or
// float64 (the Python side converts half types and makes layouts contiguous); rows and
// channel planes are independent, so every pass runs in parallel over them.
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/prefetch.h"
#include "../common/stream_store.h"
#include "../common/tensor_arg.h"
#include "../common/vecmath.h"

namespace py = pybind11;

namespace ember {

namespace {

// Sum of f(a[i], b[i]) over a contiguous run, on two machine-vector accumulators (gcc vector
// extensions: gcc 12 leaves plain scalar reductions unvectorized without -ffast-math). f is
// generic so the same expression serves the vector body and the scalar tail.
template <typename T, typename F>
T vreduce(const T* a, const T* b, int64_t n, const F& f) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  V acc0 = V{}, acc1 = V{};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V a0, a1, b0, b1;
    std::memcpy(&a0, a + i, sizeof(V));
    std::memcpy(&a1, a + i + W, sizeof(V));
    std::memcpy(&b0, b + i, sizeof(V));
    std::memcpy(&b1, b + i + W, sizeof(V));
    acc0 += f(a0, b0);
    acc1 += f(a1, b1);
  }
  acc0 += acc1;
  T s = 0;
  for (int j = 0; j < W; ++j) s += acc0[j];
  for (; i < n; ++i) s += f(a[i], b[i]);
  return s;
}

template <typename T>
T lane_sum(const T* x, int64_t n) {
  return vreduce(x, x, n, [](auto v, auto) { return v; });
}

template <typename T>
T lane_sq_dev(const T* x, int64_t n, T mean) {
  return vreduce(x, x, n, [mean](auto v, auto) {
    auto d = v - mean;
    return d * d;
  });
}

// a = sum(g w) and gwx = sum(g w x) over a contiguous run, in one pass (two vector accumulators
// each, as vreduce).
template <typename T>
void row_sums2(const T* g, const T* w, const T* x, int64_t n, T& a, T& gwx) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  V a0 = V{}, a1 = V{}, b0 = V{}, b1 = V{};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V g0, g1, w0, w1, x0, x1;
    std::memcpy(&g0, g + i, sizeof(V));
    std::memcpy(&g1, g + i + W, sizeof(V));
    std::memcpy(&w0, w + i, sizeof(V));
    std::memcpy(&w1, w + i + W, sizeof(V));
    std::memcpy(&x0, x + i, sizeof(V));
    std::memcpy(&x1, x + i + W, sizeof(V));
    const V gw0 = g0 * w0, gw1 = g1 * w1;
    a0 += gw0;
    a1 += gw1;
    b0 += gw0 * x0;
    b1 += gw1 * x1;
  }
  a0 += a1;
  b0 += b1;
  T sa = 0, sb = 0;
  for (int j = 0; j < W; ++j) {
    sa += a0[j];
    sb += b0[j];
  }
  for (; i < n; ++i) {
    const T gw = g[i] * w[i];
    sa += gw;
    sb += gw * x[i];
  }
  a = sa;
  gwx = sb;
}

// One row of layer_norm's dx: o = rs (g w - c0 - (x - mu) c1) (w = 1 when null); with sw/sb,
// also sw += g (x - mu) rs and sb += g (dweight / dbias partial sums), in the same pass. With
// `stream`, o is written with streaming stores (stream_store.h).
template <typename T>
void dx_row_out(T* o, T* sw, T* sb, const T* g, const T* w, const T* x, int64_t n, T mu, T rs, T c0, T c1,
                bool stream) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  auto one = [&](int64_t i) {
    const T gw = w ? g[i] * w[i] : g[i];
    o[i] = rs * (gw - c0 - (x[i] - mu) * c1);
    if (sw) {
      sw[i] += g[i] * ((x[i] - mu) * rs);
      sb[i] += g[i];
    }
  };
  int64_t i = 0;
  for (const int64_t head = stream_head(o, n, stream); i < head; ++i) one(i);
  for (; i + W <= n; i += W) {
    V gv, xv, wv;
    std::memcpy(&gv, g + i, sizeof(V));
    std::memcpy(&xv, x + i, sizeof(V));
    V gw = gv;
    if (w) {
      std::memcpy(&wv, w + i, sizeof(V));
      gw = gv * wv;
    }
    const V ov = rs * (gw - c0 - (xv - mu) * c1);
    store_vec(o + i, ov, stream);
    if (sw) {
      const V xhat = (xv - mu) * rs;
      V a, b;
      std::memcpy(&a, sw + i, sizeof(V));
      std::memcpy(&b, sb + i, sizeof(V));
      a += gv * xhat;
      b += gv;
      std::memcpy(sw + i, &a, sizeof(V));
      std::memcpy(sb + i, &b, sizeof(V));
    }
  }
  for (; i < n; ++i) one(i);
}

// One row of a normalization's output: o = (x - mu) rs w + b (w, b optional: 1 and 0 when null),
// written with streaming stores when `stream` (stream_store.h).
template <typename T>
void affine_row_out(T* o, const T* x, const T* w, const T* b, int64_t n, T mu, T rs, bool stream) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  auto one = [&](int64_t i) {
    T v = (x[i] - mu) * rs;
    if (w) v = v * w[i];
    if (b) v = v + b[i];
    o[i] = v;
  };
  int64_t i = 0;
  for (const int64_t head = stream_head(o, n, stream); i < head; ++i) one(i);
  for (; i + W <= n; i += W) {
    V xv, wv, bv;
    std::memcpy(&xv, x + i, sizeof(V));
    V v = (xv - mu) * rs;
    if (w) {
      std::memcpy(&wv, w + i, sizeof(V));
      v = v * wv;
    }
    if (b) {
      std::memcpy(&bv, b + i, sizeof(V));
      v = v + bv;
    }
    store_vec(o + i, v, stream);
  }
  for (; i < n; ++i) one(i);
}

template <typename T>
T lane_dot(const T* a, const T* b, int64_t n) {
  return vreduce(a, b, n, [](auto x, auto y) { return x * y; });
}

TensorArg contiguous_arg(py::handle obj, DType dtype, int64_t numel, const char* what) {
  TensorArg a = unpack(obj);
  if (a.dtype != dtype || !a.is_contiguous() || a.numel() != numel)
    throw std::invalid_argument(std::string(what) + ": expected a contiguous tensor of " + std::to_string(numel) +
                                " elements with the input's dtype");
  return a;
}

// Optional operand: nullptr when None.
char* optional_data(py::handle obj, DType dtype, int64_t numel, const char* what) {
  if (obj.is_none()) return nullptr;
  return contiguous_arg(obj, dtype, numel, what).data;
}

int64_t rows_cols(const TensorArg& x, int64_t rows) {
  if (rows < 0 || (rows == 0 && x.numel() != 0) || (rows > 0 && x.numel() % rows != 0))
    throw std::invalid_argument("norm: rows must divide the number of elements");
  return rows == 0 ? 0 : x.numel() / rows;
}

// out = (x - mean) * rstd * weight + bias over rows of N; mean/rstd per row. With out None
// only the statistics are computed (group_norm applies its affine per channel afterwards).
void layer_norm_impl(py::handle out_obj, py::handle mean_obj, py::handle rstd_obj, py::handle x_obj,
                     py::handle w_obj, py::handle b_obj, int64_t rows, double eps) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("layer_norm: input must be contiguous");
  int64_t n = rows_cols(x, rows);
  char* out = optional_data(out_obj, x.dtype, x.numel(), "layer_norm out");
  char* mean = contiguous_arg(mean_obj, x.dtype, rows, "layer_norm mean").data;
  char* rstd = contiguous_arg(rstd_obj, x.dtype, rows, "layer_norm rstd").data;
  char* w = optional_data(w_obj, x.dtype, n, "layer_norm weight");
  char* b = optional_data(b_obj, x.dtype, n, "layer_norm bias");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "layer_norm", [&] {
    using T = scalar_t;
    const T* xp = reinterpret_cast<const T*>(x.data);
    T *op = reinterpret_cast<T*>(out), *mp = reinterpret_cast<T*>(mean), *rp = reinterpret_cast<T*>(rstd);
    const T *wp = reinterpret_cast<const T*>(w), *bp = reinterpret_cast<const T*>(b);
    const bool stream = op && stream_output(x.numel() * static_cast<int64_t>(sizeof(T))) && stream_clear_of(op, xp);
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = xp + r * n;
        if (r + 1 < r1) prefetch_row(row + n, n);
        T mu = n ? lane_sum(row, n) / T(n) : T(0);
        T var = n ? lane_sq_dev(row, n, mu) / T(n) : T(0);
        T rs = T(1) / std::sqrt(var + T(eps));
        mp[r] = mu;
        rp[r] = rs;
        if (!op) continue;
        affine_row_out(op + r * n, row, wp, bp, n, mu, rs, stream);
      }
      stream_fence(stream);
    });
  });
}

// Gradients of layer_norm: dx per row, and dweight/dbias as column sums (each optional).
void layer_norm_backward_impl(py::handle dx_obj, py::handle dw_obj, py::handle db_obj, py::handle dy_obj,
                              py::handle x_obj, py::handle mean_obj, py::handle rstd_obj, py::handle w_obj,
                              int64_t rows, int round_kind, int64_t chunks) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("layer_norm_backward: input must be contiguous");
  int64_t n = rows_cols(x, rows);
  char* dy = contiguous_arg(dy_obj, x.dtype, x.numel(), "layer_norm_backward grad").data;
  char* mean = contiguous_arg(mean_obj, x.dtype, rows, "layer_norm_backward mean").data;
  char* rstd = contiguous_arg(rstd_obj, x.dtype, rows, "layer_norm_backward rstd").data;
  char* dx = optional_data(dx_obj, x.dtype, x.numel(), "layer_norm_backward dx");
  char* dw = optional_data(dw_obj, x.dtype, n, "layer_norm_backward dweight");
  char* db = optional_data(db_obj, x.dtype, n, "layer_norm_backward dbias");
  char* w = optional_data(w_obj, x.dtype, n, "layer_norm_backward weight");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "layer_norm_backward", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *gp = reinterpret_cast<const T*>(dy);
    const T *mp = reinterpret_cast<const T*>(mean), *rp = reinterpret_cast<const T*>(rstd);
    const T* wp = reinterpret_cast<const T*>(w);
    // With dx requested, dweight/dbias are summed in the same row pass (x and dy are read from
    // memory once, not again by a column pass): each part of kPartRows rows sums its rows in
    // order into its own pair of buffers, and the parts are added in order afterwards, so the
    // result does not depend on the thread count. Wide rows (whose buffers would leave L2) keep
    // the column pass below.
    constexpr int64_t kPartRows = 64;
    // round_kind (1 half, 2 bfloat16): the input's dtype was a half type computed here in float. PyTorch
    // then sums dweight/dbias per thread over `chunks` blocks of rows, with an accumulator of the half
    // type (rounded after each row), and adds the blocks in float; the column pass below does the same.
    const bool fuse = round_kind == 0 && dx && (dw || db) && 2 * n * static_cast<int64_t>(sizeof(T)) <= 256 * 1024;
    const int64_t parts = fuse ? (rows + kPartRows - 1) / kPartRows : 0;
    // A part's two buffers, 2n + 2 * kPad apart: offsets that are not a multiple of 4 KiB away from
    // the rows' (whose addresses share their low 12 bits), which would alias their loads and stores.
    constexpr int64_t kPad = 48;
    const int64_t stride = 2 * n + 2 * kPad;
    std::vector<T> partial(static_cast<size_t>(parts * stride));
    const bool stream = stream_output(x.numel() * static_cast<int64_t>(sizeof(T))) &&
                        stream_clear_of(dx, xp) && stream_clear_of(dx, gp);
    auto dx_rows = [&](int64_t r0, int64_t r1, T* __restrict__ sw, T* __restrict__ sb) {
      T* dxp = reinterpret_cast<T*>(dx);
      const T inv_n = T(1) / T(n);
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict__ row = xp + r * n;
        const T* __restrict__ g = gp + r * n;
        if (r + 1 < r1) {
          prefetch_row(row + n, n);
          prefetch_row(g + n, n);
        }
        const T mu = mp[r], rs = rp[r];
        // a = sum(g w), b = sum(g w xhat) = (sum(g w x) - mu a) rs, in one pass (w = 1 without a weight).
        T a, gwx;
        if (wp) {
          row_sums2(g, wp, row, n, a, gwx);
        } else {
          a = lane_sum(g, n);
          gwx = lane_dot(g, row, n);
        }
        const T b = (gwx - mu * a) * rs;
        const T c0 = a * inv_n, c1 = rs * b * inv_n;
        T* __restrict__ o = dxp + r * n;
        dx_row_out(o, sw, sb, g, wp, row, n, mu, rs, c0, c1, stream);
      }
      stream_fence(stream);
    };
    if (fuse) {
      parallel_for(parts, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n * kPartRows, 1)),
                   [&](int64_t p0, int64_t p1) {
        for (int64_t q = p0; q < p1; ++q) {
          T* sw = partial.data() + q * stride + kPad;
          std::fill(sw, sw + n + kPad + n, T(0));
          dx_rows(q * kPartRows, std::min(rows, (q + 1) * kPartRows), sw, sw + n + kPad);
        }
      });
      T *dwp = reinterpret_cast<T*>(dw), *dbp = reinterpret_cast<T*>(db);
      for (int64_t i = 0; i < n; ++i) {
        T sw = 0, sb = 0;
        for (int64_t q = 0; q < parts; ++q) {
          sw += partial[q * stride + kPad + i];
          sb += partial[q * stride + n + 2 * kPad + i];
        }
        if (dwp) dwp[i] = sw;
        if (dbp) dbp[i] = sb;
      }
      return;
    }
    if (dx) {
      parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        dx_rows(r0, r1, nullptr, nullptr);
      });
    }
    if (dw || db) {
      T *dwp = reinterpret_cast<T*>(dw), *dbp = reinterpret_cast<T*>(db);
      parallel_for(n, 64, [&](int64_t c0, int64_t c1) {
        int64_t width = c1 - c0;
        std::vector<T> sw(width, T(0)), sb(width, T(0));
        if (round_kind != 0) {
          auto round = [&](T v) -> T {
            const float f = static_cast<float>(v);
            return static_cast<T>(round_kind == 1 ? half_to_float(float_to_half(f)) : bf16_to_float(float_to_bf16(f)));
          };
          const int64_t per = (rows + std::max<int64_t>(chunks, 1) - 1) / std::max<int64_t>(chunks, 1);
          std::vector<T> cw(width), cb(width);
          for (int64_t r0 = 0; r0 < rows; r0 += per) {
            std::fill(cw.begin(), cw.end(), T(0));
            std::fill(cb.begin(), cb.end(), T(0));
            for (int64_t r = r0; r < std::min(rows, r0 + per); ++r) {
              const T *row = xp + r * n + c0, *g = gp + r * n + c0;
              T mu = mp[r], rs = rp[r];
              for (int64_t i = 0; i < width; ++i) {
                // A fused multiply-add, as PyTorch's vectorized loop.
                cw[i] = round(std::fma(g[i], (row[i] - mu) * rs, cw[i]));
                cb[i] = round(cb[i] + g[i]);
              }
            }
            for (int64_t i = 0; i < width; ++i) {
              sw[i] += cw[i];
              sb[i] += cb[i];
            }
          }
        } else {
          for (int64_t r = 0; r < rows; ++r) {
            const T *row = xp + r * n + c0, *g = gp + r * n + c0;
            T mu = mp[r], rs = rp[r];
            for (int64_t i = 0; i < width; ++i) {
              sw[i] += g[i] * (row[i] - mu) * rs;
              sb[i] += g[i];
            }
          }
        }
        for (int64_t i = 0; i < width; ++i) {
          if (dwp) dwp[c0 + i] = sw[i];
          if (dbp) dbp[c0 + i] = sb[i];
        }
      });
    }
  });
}

// out = x * rstd * weight with rstd = 1/sqrt(mean(x^2) + eps) per row of N.
void rms_norm_impl(py::handle out_obj, py::handle rstd_obj, py::handle x_obj, py::handle w_obj, int64_t rows,
                   double eps) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("rms_norm: input must be contiguous");
  int64_t n = rows_cols(x, rows);
  char* out = contiguous_arg(out_obj, x.dtype, x.numel(), "rms_norm out").data;
  char* rstd = contiguous_arg(rstd_obj, x.dtype, rows, "rms_norm rstd").data;
  char* w = optional_data(w_obj, x.dtype, n, "rms_norm weight");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "rms_norm", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *wp = reinterpret_cast<const T*>(w);
    T *op = reinterpret_cast<T*>(out), *rp = reinterpret_cast<T*>(rstd);
    const bool stream = stream_output(x.numel() * static_cast<int64_t>(sizeof(T))) && stream_clear_of(op, xp);
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = xp + r * n;
        if (r + 1 < r1) prefetch_row(row + n, n);
        T ms = n ? lane_dot(row, row, n) / T(n) : T(0);
        T rs = T(1) / std::sqrt(ms + T(eps));
        rp[r] = rs;
        affine_row_out(op + r * n, row, wp, static_cast<const T*>(nullptr), n, T(0), rs, stream);
      }
      stream_fence(stream);
    });
  });
}

struct Planes {
  int64_t n, c, hw;
};

Planes planes_of(const TensorArg& x, int64_t n, int64_t c) {
  if (n < 0 || c <= 0 || (n * c == 0 && x.numel() != 0) || (n * c > 0 && x.numel() % (n * c) != 0))
    throw std::invalid_argument("norm: bad (N, C) split of the input");
  return {n, c, n * c != 0 ? x.numel() / (n * c) : 0};
}

// Per-channel mean and biased variance of x viewed as (N, C, HW): batch_norm's statistics.
void channel_stats_impl(py::handle mean_obj, py::handle var_obj, py::handle x_obj, int64_t n, int64_t c) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("channel_stats: input must be contiguous");
  Planes p = planes_of(x, n, c);
  char* mean = contiguous_arg(mean_obj, x.dtype, c, "channel_stats mean").data;
  char* var = contiguous_arg(var_obj, x.dtype, c, "channel_stats var").data;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "channel_stats", [&] {
    using T = scalar_t;
    const T* xp = reinterpret_cast<const T*>(x.data);
    T *mp = reinterpret_cast<T*>(mean), *vp = reinterpret_cast<T*>(var);
    int64_t count = p.n * p.hw;
    parallel_for(c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        T s = 0;
        for (int64_t b = 0; b < p.n; ++b) s += lane_sum(xp + (b * p.c + ch) * p.hw, p.hw);
        T mu = count ? s / T(count) : T(NAN);
        T q = 0;
        for (int64_t b = 0; b < p.n; ++b) q += lane_sq_dev(xp + (b * p.c + ch) * p.hw, p.hw, mu);
        mp[ch] = mu;
        vp[ch] = count ? q / T(count) : T(NAN);
      }
    });
  });
}

// Per-channel sum(dy) and sum(dy * (x - mu[c])) over (N, HW): the reductions of the
// batch_norm / group_norm backward passes (mu None means 0).
void channel_sums_impl(py::handle s1_obj, py::handle s2_obj, py::handle dy_obj, py::handle x_obj,
                       py::handle mu_obj, int64_t n, int64_t c) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("channel_sums: input must be contiguous");
  Planes p = planes_of(x, n, c);
  char* dy = contiguous_arg(dy_obj, x.dtype, x.numel(), "channel_sums grad").data;
  char* s1 = contiguous_arg(s1_obj, x.dtype, c, "channel_sums s1").data;
  char* s2 = contiguous_arg(s2_obj, x.dtype, c, "channel_sums s2").data;
  char* mu = optional_data(mu_obj, x.dtype, c, "channel_sums mean");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "channel_sums", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *gp = reinterpret_cast<const T*>(dy);
    const T* mp = reinterpret_cast<const T*>(mu);
    T *a = reinterpret_cast<T*>(s1), *b = reinterpret_cast<T*>(s2);
    parallel_for(c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        T sa = 0, sb = 0, m = mp ? mp[ch] : T(0);
        for (int64_t bi = 0; bi < p.n; ++bi) {
          const T *g = gp + (bi * p.c + ch) * p.hw, *xv = xp + (bi * p.c + ch) * p.hw;
          T g_sum = lane_sum(g, p.hw);
          sa += g_sum;
          sb += lane_dot(g, xv, p.hw) - m * g_sum;
        }
        a[ch] = sa;
        b[ch] = sb;
      }
    });
  });
}

// out = x * a[c] + shift[c] (+ y * b[c]) over (N, C, HW) planes: the affine pass of batch_norm
// and group_norm and of their input gradients.
void channel_affine_impl(py::handle out_obj, py::handle x_obj, py::handle a_obj, py::handle shift_obj,
                         py::handle y_obj, py::handle b_obj, int64_t n, int64_t c) {
  TensorArg x = unpack(x_obj);
  if (!x.is_contiguous()) throw std::invalid_argument("channel_affine: input must be contiguous");
  Planes p = planes_of(x, n, c);
  char* out = contiguous_arg(out_obj, x.dtype, x.numel(), "channel_affine out").data;
  char* a = contiguous_arg(a_obj, x.dtype, c, "channel_affine scale").data;
  char* shift = contiguous_arg(shift_obj, x.dtype, c, "channel_affine shift").data;
  char* y = optional_data(y_obj, x.dtype, x.numel(), "channel_affine y");
  char* b = y ? contiguous_arg(b_obj, x.dtype, c, "channel_affine y scale").data : nullptr;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "channel_affine", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *yp = reinterpret_cast<const T*>(y);
    const T *ap = reinterpret_cast<const T*>(a), *sp = reinterpret_cast<const T*>(shift);
    const T* bp = reinterpret_cast<const T*>(b);
    T* op = reinterpret_cast<T*>(out);
    int64_t planes = p.n * p.c;
    parallel_for(planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(p.hw, 1)), [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        int64_t ch = q % p.c;
        T av = ap[ch], sv = sp[ch];
        const T* xv = xp + q * p.hw;
        T* o = op + q * p.hw;
        if (yp) {
          T bv = bp[ch];
          const T* yv = yp + q * p.hw;
          for (int64_t i = 0; i < p.hw; ++i) o[i] = xv[i] * av + sv + yv[i] * bv;
        } else {
          for (int64_t i = 0; i < p.hw; ++i) o[i] = xv[i] * av + sv;
        }
      }
    });
  });
}

}  // namespace

void bind_norm(py::module_& m) {
  m.def("layer_norm", &layer_norm_impl, py::arg("out"), py::arg("mean"), py::arg("rstd"), py::arg("input"),
        py::arg("weight"), py::arg("bias"), py::arg("rows"), py::arg("eps"),
        "Row-wise normalization of a contiguous input split into `rows` rows (out may be None).");
  m.def("layer_norm_backward", &layer_norm_backward_impl, py::arg("dx"), py::arg("dweight"), py::arg("dbias"),
        py::arg("grad"), py::arg("input"), py::arg("mean"), py::arg("rstd"), py::arg("weight"), py::arg("rows"),
        py::arg("round_kind") = 0, py::arg("chunks") = 1);
  m.def("rms_norm", &rms_norm_impl, py::arg("out"), py::arg("rstd"), py::arg("input"), py::arg("weight"),
        py::arg("rows"), py::arg("eps"));
  m.def("channel_stats", &channel_stats_impl, py::arg("mean"), py::arg("var"), py::arg("input"), py::arg("n"),
        py::arg("c"), "Per-channel mean and biased variance of a contiguous (N, C, ...) input.");
  m.def("channel_sums", &channel_sums_impl, py::arg("sum_dy"), py::arg("sum_dy_xmu"), py::arg("grad"),
        py::arg("input"), py::arg("mean"), py::arg("n"), py::arg("c"));
  m.def("channel_affine", &channel_affine_impl, py::arg("out"), py::arg("input"), py::arg("scale"),
        py::arg("shift"), py::arg("other"), py::arg("other_scale"), py::arg("n"), py::arg("c"),
        "out = input * scale[c] + shift[c] (+ other * other_scale[c]) over (N, C, ...) planes.");
}

}  // namespace ember
