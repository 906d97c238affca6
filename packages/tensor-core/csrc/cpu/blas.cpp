// Kernel family "blas": one batched matrix product, out[b] = beta * out[b] + alpha * a[b] @ b[b],
// behind mm, bmm, mv, dot, addmm, baddbmm, matmul, einsum and tensordot. float32/float64 go to
// OpenBLAS (gemm, or gemv when one side is a vector; complex: cgemm/zgemm); integer dtypes use a packed C++ kernel.
// float16/bfloat16 are computed in float32 by the Python caller.
#include <cblas.h>
#include <pybind11/complex.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

// One operand matrix of the batch: rows x cols with element strides, and a batch stride.
struct Mat {
  char* data;
  int64_t rows, cols, srow, scol, sbatch;
};

// How BLAS can read a strided matrix without a copy: row-major with leading dimension ld, or
// its transpose (column-major storage). Strides of size-1 dims never matter.
struct BlasLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};

BlasLayout blas_layout(const Mat& m) {
  BlasLayout l;
  if ((m.cols <= 1 || m.scol == 1) && (m.rows <= 1 || m.srow >= std::max<int64_t>(1, m.cols))) {
    l.ok = true;
    l.ld = m.rows <= 1 ? std::max<int64_t>(1, m.cols) : m.srow;
  } else if ((m.rows <= 1 || m.srow == 1) && (m.cols <= 1 || m.scol >= std::max<int64_t>(1, m.rows))) {
    l.ok = l.trans = true;
    l.ld = m.cols <= 1 ? std::max<int64_t>(1, m.rows) : m.scol;
  }
  if (l.ld > INT_MAX) l.ok = false;
  return l;
}

// Copies one strided matrix into a dense row-major buffer.
template <typename T>
const T* pack(const T* src, int64_t rows, int64_t cols, int64_t sr, int64_t sc, std::vector<T>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = src[i * sr + j * sc];
  return buf.data();
}

template <typename T>
void scale_out(T* c, int64_t m, int64_t n, int64_t sr, int64_t sc, T beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T& v = c[i * sr + j * sc];
      v = beta == T(0) ? T(0) : T(beta * v);  // beta == 0 ignores nan/inf already in out
    }
}

// -- float32/float64 through OpenBLAS --------------------------------------------------

template <typename T>
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha, const T* a, int lda,
               const T* b, int ldb, T beta, T* c, int ldc) {
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if constexpr (std::is_same_v<T, double>)
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if constexpr (std::is_same_v<T, c64>)
    scipy_cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  else
    scipy_cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}

template <typename T>
void blas_gemv(CBLAS_TRANSPOSE t, int m, int n, T alpha, const T* a, int lda, const T* x, int incx, T beta, T* y,
               int incy) {
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
  else
    scipy_cblas_dgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

// y = alpha * A x + beta * y for a strided matrix A (rows x cols) and vector x (stride incx).
template <typename T>
void gemv_strided(const T* a, int64_t rows, int64_t cols, int64_t sr, int64_t sc, const T* x, int64_t incx, T* y,
                  int64_t incy, T alpha, T beta, std::vector<T>& abuf, std::vector<T>& xbuf) {
  Mat am{nullptr, rows, cols, sr, sc, 0};
  BlasLayout la = blas_layout(am);
  if (!la.ok) {
    a = pack(a, rows, cols, sr, sc, abuf);
    la = {true, false, std::max<int64_t>(1, cols)};
  }
  if (cols <= 1) incx = 1;
  if (incx <= 0 || incx > INT_MAX) {  // expanded (stride 0) vector: BLAS needs a real stride
    x = pack(x, cols, 1, incx, 1, xbuf);
    incx = 1;
  }
  if (rows <= 1) incy = 1;
  // Row-major (rows x cols) stored transposed is a row-major (cols x rows) matrix: gemv with Trans.
  if (la.trans)
    blas_gemv<T>(CblasTrans, static_cast<int>(cols), static_cast<int>(rows), alpha, a, static_cast<int>(la.ld), x,
                 static_cast<int>(incx), beta, y, static_cast<int>(incy));
  else
    blas_gemv<T>(CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols), alpha, a, static_cast<int>(la.ld), x,
                 static_cast<int>(incx), beta, y, static_cast<int>(incy));
}

// OpenBLAS's AVX-512 cores (SkylakeX and later) run SGEMM with M*N*K <= 1e6 through small-matrix
// kernels that skip packing. Just above that limit the packed path is 10-25% slower (measured
// single-threaded on 128x128x64 .. 192x128x64 and 100^3 .. 120^3), so such products are split
// into two halves; above ~1.6e6 splitting no longer pays.
bool has_small_sgemm_kernels() {
  static const bool value = [] {
    std::string core = scipy_openblas_get_corename();
    for (auto& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
      if (core.find(name) != std::string::npos) return true;
    return false;
  }();
  return value;
}

bool split_for_small_kernel(int64_t m, int64_t n, int64_t k) {
  double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return m >= 2 && mnk > 1e6 && mnk <= 1.6e6 && has_small_sgemm_kernels();
}

template <typename T>
void float_matmul_one(const Mat& A, const Mat& B, const Mat& C, int64_t bi, T alpha, T beta, std::vector<T>& abuf,
                      std::vector<T>& bbuf) {
  const T* a = reinterpret_cast<const T*>(A.data) + bi * A.sbatch;
  const T* b = reinterpret_cast<const T*>(B.data) + bi * B.sbatch;
  T* c = reinterpret_cast<T*>(C.data) + bi * C.sbatch;
  int64_t m = A.rows, k = A.cols, n = B.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_out(c, m, n, C.srow, C.scol, beta);
    return;
  }
  if constexpr (!is_complex_v<T>) {  // complex products always take the gemm path below
  if ((n == 1 || m == 1) && beta == T(0)) {
    scale_out(c, m, n, C.srow, C.scol, beta);  // gemv scales y by beta: 0 * nan would stay nan
  }
  if (n == 1) {  // matrix @ vector
    gemv_strided(a, m, k, A.srow, A.scol, b, B.srow, c, C.srow, alpha, beta, abuf, bbuf);
    return;
  }
  if (m == 1) {  // vector @ matrix == B^T @ vector
    gemv_strided(b, n, k, B.scol, B.srow, a, A.scol, c, C.scol, alpha, beta, bbuf, abuf);
    return;
  }
  }
  BlasLayout la = blas_layout(A), lb = blas_layout(B), lc = blas_layout(C);
  if (!la.ok) {
    a = pack(a, m, k, A.srow, A.scol, abuf);
    la = {true, false, k};
  }
  if (!lb.ok) {
    b = pack(b, k, n, B.srow, B.scol, bbuf);
    lb = {true, false, n};
  }
  auto ta = la.trans ? CblasTrans : CblasNoTrans;
  auto tb = lb.trans ? CblasTrans : CblasNoTrans;
  if (lc.trans) {  // C^T = B^T A^T, written row-major into C's column-major storage
    blas_gemm<T>(tb == CblasTrans ? CblasNoTrans : CblasTrans, ta == CblasTrans ? CblasNoTrans : CblasTrans,
                 static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, b, static_cast<int>(lb.ld), a,
                 static_cast<int>(la.ld), beta, c, static_cast<int>(lc.ld));
  } else if (std::is_same_v<T, float> && split_for_small_kernel(m, n, k)) {
    // Two half-height products, each small enough for OpenBLAS's no-packing kernels.
    int64_t m1 = m / 2;
    const T* a2 = a + (la.trans ? m1 : m1 * la.ld);
    blas_gemm<T>(ta, tb, static_cast<int>(m1), static_cast<int>(n), static_cast<int>(k), alpha, a,
                 static_cast<int>(la.ld), b, static_cast<int>(lb.ld), beta, c, static_cast<int>(lc.ld));
    blas_gemm<T>(ta, tb, static_cast<int>(m - m1), static_cast<int>(n), static_cast<int>(k), alpha, a2,
                 static_cast<int>(la.ld), b, static_cast<int>(lb.ld), beta, c + m1 * lc.ld, static_cast<int>(lc.ld));
  } else {
    blas_gemm<T>(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                 static_cast<int>(la.ld), b, static_cast<int>(lb.ld), beta, c, static_cast<int>(lc.ld));
  }
}

template <typename T>
void float_matmul(const Mat& A, const Mat& B, const Mat& C, int64_t batch, T alpha, T beta) {
  double flops = static_cast<double>(A.rows) * static_cast<double>(B.cols) * static_cast<double>(A.cols);
  // Small matrices: run the batch loop on OpenMP threads with single-threaded BLAS inside.
  // Large ones: one gemm at a time, each using OpenBLAS's own threads.
  if (batch > 1 && flops < 256.0 * 256.0 * 256.0 && get_num_threads() > 1) {
    BlasSingleThread guard;
    int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(65536.0 / std::max(flops, 1.0)));
    parallel_for(batch, grain, [&](int64_t begin, int64_t end) {
      std::vector<T> abuf, bbuf;
      for (int64_t bi = begin; bi < end; ++bi) float_matmul_one<T>(A, B, C, bi, alpha, beta, abuf, bbuf);
    });
    return;
  }
  std::vector<T> abuf, bbuf;
  for (int64_t bi = 0; bi < batch; ++bi) float_matmul_one<T>(A, B, C, bi, alpha, beta, abuf, bbuf);
}

// -- integer dtypes -----------------------------------------------------------------------

// Products accumulate in the unsigned type of the same width: wrap-around like PyTorch's
// integer gemm, without signed-overflow UB, and the inner loop vectorizes.
template <typename T>
void int_matmul(const Mat& A, const Mat& B, const Mat& C, int64_t batch, T alpha, T beta) {
  using U = std::make_unsigned_t<T>;
  int64_t m = A.rows, k = A.cols, n = B.cols;
  if (m == 0 || n == 0) return;
  U ua = static_cast<U>(alpha), ub = static_cast<U>(beta);
  int64_t rows = batch * m;
  // Each thread packs one batch of B^T (n*k) and a row of A (k). With expanded operands that is
  // far more than any real tensor: refuse here, since inside the parallel region a failed
  // allocation could only terminate the process.
  check_allocation_fits((static_cast<double>(n) * k + k) * sizeof(U) * get_num_threads());
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n * k)), [&](int64_t begin,
                                                                                         int64_t end) {
    std::vector<U> bt, arow(static_cast<size_t>(k));
    int64_t packed_batch = -1;
    for (int64_t r = begin; r < end; ++r) {
      int64_t bi = r / m, i = r % m;
      const T* b = reinterpret_cast<const T*>(B.data) + bi * B.sbatch;
      if (bi != packed_batch) {  // B^T packed so each output element is a contiguous dot product
        bt.resize(static_cast<size_t>(n * k));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p) bt[j * k + p] = static_cast<U>(b[p * B.srow + j * B.scol]);
        packed_batch = bi;
      }
      const T* a = reinterpret_cast<const T*>(A.data) + bi * A.sbatch + i * A.srow;
      for (int64_t p = 0; p < k; ++p) arow[p] = static_cast<U>(a[p * A.scol]);
      T* c = reinterpret_cast<T*>(C.data) + bi * C.sbatch + i * C.srow;
      for (int64_t j = 0; j < n; ++j) {
        const U* bj = bt.data() + j * k;
        U acc = 0;
        for (int64_t p = 0; p < k; ++p) acc = wrapping_add(acc, wrapping_mul(arow[p], bj[p]));
        T& out = c[j * C.scol];
        U prev = ub == 0 ? U(0) : wrapping_mul(ub, static_cast<U>(out));
        out = static_cast<T>(wrapping_add(prev, wrapping_mul(ua, acc)));
      }
    }
  });
}

// The output must be writable by BLAS as it is: checked before any thread starts, since the
// batch loop may run inside an OpenMP region, where an exception cannot escape.
void check_blas_output(const Mat& C, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0 || k == 0) return;
  bool ok;
  if (n == 1)
    ok = m <= 1 || (C.srow >= 1 && C.srow <= INT_MAX);  // gemv's incy
  else if (m == 1)
    ok = C.scol >= 1 && C.scol <= INT_MAX;
  else
    ok = blas_layout(C).ok;
  if (!ok) throw std::runtime_error("matmul: output strides are not supported by BLAS");
}

Mat as_mat(const TensorArg& t) {
  return Mat{t.data, t.shape[1], t.shape[2], t.strides[1], t.strides[2], t.strides[0]};
}

template <typename T>
T scalar_to(py::handle v) {
  if constexpr (is_complex_v<T>) {
    std::complex<double> c = v.cast<std::complex<double>>();
    return T(static_cast<typename T::value_type>(c.real()), static_cast<typename T::value_type>(c.imag()));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v.cast<double>());
  } else {
    return static_cast<T>(v.cast<int64_t>());
  }
}

// out (B, M, N) = beta * out + alpha * a (B, M, K) @ b (B, K, N). Shapes and dtypes are
// validated by the Python caller; they are re-checked here so bad input cannot crash.
void matmul_impl(py::handle out_obj, py::handle a_obj, py::handle b_obj, py::handle alpha, py::handle beta) {
  TensorArg out = unpack(out_obj), a = unpack(a_obj), b = unpack(b_obj);
  // Matrices (2-D, all three) are a batch of one: mm's call needs no (1, M, K) views.
  if (out.ndim() == 2 && a.ndim() == 2 && b.ndim() == 2) {
    for (TensorArg* t : {&out, &a, &b}) {
      t->shape.insert(t->shape.begin(), 1);
      t->strides.insert(t->strides.begin(), 0);
    }
  }
  if (out.ndim() != 3 || a.ndim() != 3 || b.ndim() != 3)
    throw std::invalid_argument("matmul kernel expects 3-D tensors (or three matrices)");
  if (a.shape[0] != out.shape[0] || b.shape[0] != out.shape[0] || a.shape[1] != out.shape[1] ||
      b.shape[2] != out.shape[2] || a.shape[2] != b.shape[1])
    throw std::runtime_error("matmul kernel: incompatible shapes");
  if (a.dtype != out.dtype || b.dtype != out.dtype) throw std::runtime_error("matmul kernel: dtypes differ");
  // OpenBLAS takes int32 sizes; the integer kernel below is 64-bit throughout.
  const bool blas = out.dtype == DType::Float32 || out.dtype == DType::Float64;
  for (int64_t s : {a.shape[1], a.shape[2], b.shape[2]})
    if (blas && s > INT_MAX)
      throw std::runtime_error("matmul: matrix dimension " + std::to_string(s) +
                               " exceeds the BLAS int32 limit (2147483647)");
  Mat A = as_mat(a), B = as_mat(b), C = as_mat(out);
  int64_t batch = out.shape[0];
  if (blas) check_blas_output(C, A.rows, B.cols, A.cols);
  if (blas || out.dtype == DType::Complex64 || out.dtype == DType::Complex128) {
    EMBER_DISPATCH_FLOATING_AND_COMPLEX(out.dtype, "matmul", [&] {
      using T = scalar_t;
      T al = scalar_to<T>(alpha), be = scalar_to<T>(beta);
      py::gil_scoped_release release;
      float_matmul<T>(A, B, C, batch, al, be);
    });
  } else {
    EMBER_DISPATCH_INTEGRAL(out.dtype, "matmul", [&] {
      using T = scalar_t;
      T al = scalar_to<T>(alpha), be = scalar_to<T>(beta);
      py::gil_scoped_release release;
      int_matmul<T>(A, B, C, batch, al, be);
    });
  }
}

}  // namespace

// Entry point for the dispatcher's native fast path (common/fast_reduce.cpp).
void run_matmul_kernel(py::handle out, py::handle a, py::handle b, py::handle alpha, py::handle beta) {
  matmul_impl(out, a, b, alpha, beta);
}

void bind_blas(py::module_& m) {
  m.def("matmul_", &matmul_impl, py::arg("out"), py::arg("a"), py::arg("b"), py::arg("alpha"), py::arg("beta"),
        "out (B,M,N) = beta * out + alpha * a (B,M,K) @ b (B,K,N); beta == 0 ignores out's values.");
}

}  // namespace ember
