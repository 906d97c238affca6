// Kernel family "sparse": the hot loops of the sparse layouts (ember/_src/sparse/).
//
// - sparse_csr_mm: compressed-rows matrix times a dense row-major matrix, parallel over rows
//   (each thread owns whole output rows: no atomics, deterministic sums).
// - sparse_coalesce: sort COO entries by their row-major linear index (LSD radix sort on only
//   the bits the index range needs) and sum duplicates.
// - sparse_compress / sparse_expand_compressed: row indices <-> compressed row pointers.
// - sparse_check_compressed: the compressed-layout invariants, read before any kernel trusts them.
//
// Every index is checked against its dimension before the memory it addresses is touched; a
// violation raises (RuntimeError) instead of reading out of bounds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <complex>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

// The dtypes the sparse kernels compute in (float16/bfloat16 values are widened by the caller).
#define EMBER_DISPATCH_SPARSE(dtype, what, ...)          \
  switch (dtype) {                                      \
    EMBER_CASE(Bool, bool, __VA_ARGS__)                 \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)             \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)               \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)             \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)             \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)             \
    EMBER_CASE(Float32, float, __VA_ARGS__)             \
    EMBER_CASE(Float64, double, __VA_ARGS__)            \
    EMBER_CASE(Complex64, ::ember::c64, __VA_ARGS__)    \
    EMBER_CASE(Complex128, ::ember::c128, __VA_ARGS__)  \
    default:                                            \
      EMBER_THROW_DTYPE(dtype, what);                   \
  }

template <typename T>
inline void accumulate(T& acc, const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    acc = acc || v;
  else
    acc = static_cast<T>(acc + v);
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::runtime_error(message);
}

void require_int64_vector(const TensorArg& t, const char* what) {
  require(t.dtype == DType::Int64, std::string(what) + " must be an int64 tensor");
  require(t.ndim() == 1, std::string(what) + " must be 1-dimensional");
}

inline int64_t at(const TensorArg& t, int64_t i) {
  return reinterpret_cast<const int64_t*>(t.data)[i * t.strides[0]];
}

void require_contiguous(const TensorArg& t, const char* what) {
  require(t.is_contiguous(), std::string(what) + " must be contiguous");
}

// -- invariants of a compressed layout ----------------------------------------------------------

// Returns "" when (compressed, plain) describe a valid n_compressed x n_plain pattern, else the
// invariant that fails, worded as PyTorch's check_invariants messages.
std::string check_compressed(const TensorArg& compressed, const TensorArg& plain, int64_t n_compressed,
                             int64_t n_plain, const std::string& cname, const std::string& pname) {
  require_int64_vector(compressed, "compressed indices");
  require_int64_vector(plain, "plain indices");
  if (compressed.shape[0] != n_compressed + 1)
    return cname + ".shape[-1] must be equal to the number of " + (cname[0] == 'c' && cname[1] == 'r' ? "rows" : "columns") +
           " + 1 (=" + std::to_string(n_compressed + 1) + "), but got " + std::to_string(compressed.shape[0]);
  int64_t nnz = plain.shape[0];
  if (at(compressed, 0) != 0) return "`" + cname + "[..., 0] == 0` is not satisfied.";
  if (at(compressed, n_compressed) != nnz) return "`" + cname + "[..., -1] == nnz` is not satisfied.";
  for (int64_t i = 0; i < n_compressed; ++i) {
    int64_t lo = at(compressed, i), hi = at(compressed, i + 1);
    if (hi - lo < 0 || hi - lo > n_plain)
      return "`0 <= " + cname + "[..., 1:] - " + cname + "[..., :-1] <= " +
             (cname[0] == 'c' && cname[1] == 'r' ? "ncols" : "nrows") + "` is not satisfied.";
  }
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t p = at(plain, j);
    if (p < 0 || p >= n_plain)
      return "`0 <= " + pname + " < " + (cname[0] == 'c' && cname[1] == 'r' ? "ncols" : "nrows") +
             "` is not satisfied.";
  }
  for (int64_t i = 0; i < n_compressed; ++i) {
    int64_t lo = at(compressed, i), hi = at(compressed, i + 1);
    for (int64_t j = lo + 1; j < hi; ++j)
      if (at(plain, j - 1) >= at(plain, j))
        return "`" + pname + "[..., " + cname + "[..., i - 1]:" + cname + "[..., i]] for all i = 1, ..., " +
               (cname[0] == 'c' && cname[1] == 'r' ? "nrows" : "ncols") +
               " are sorted and distinct along the last dimension values` is not satisfied.";
  }
  return "";
}

std::string sparse_check_compressed(py::handle compressed, py::handle plain, int64_t n_compressed, int64_t n_plain,
                                    const std::string& cname, const std::string& pname) {
  return check_compressed(unpack(compressed), unpack(plain), n_compressed, n_plain, cname, pname);
}

// -- CSR x dense -----------------------------------------------------------------------------

template <typename T>
void csr_mm_rows(const int64_t* crow, const int64_t* col, const T* vals, const T* dense, T* out, int64_t m,
                 int64_t n, int64_t ldb, int64_t ldc) {
  // Rows per chunk: about a grain's worth of output elements.
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
  parallel_for(m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* __restrict__ c = out + i * ldc;
      for (int64_t k = 0; k < n; ++k) c[k] = T(0);
      for (int64_t j = crow[i]; j < crow[i + 1]; ++j) {
        const T v = vals[j];
        const T* __restrict__ b = dense + col[j] * ldb;
        if constexpr (std::is_same_v<T, bool>) {
          for (int64_t k = 0; k < n; ++k) c[k] = c[k] || (v && b[k]);
        } else {
          for (int64_t k = 0; k < n; ++k) c[k] = static_cast<T>(c[k] + v * b[k]);
        }
      }
    }
  });
}

// out (m x n, contiguous) = csr(crow, col, values; m x k) @ dense (k x n, rows contiguous).
void sparse_csr_mm(py::handle crow_t, py::handle col_t, py::handle values_t, py::handle dense_t, py::handle out_t) {
  TensorArg crow = unpack(crow_t), col = unpack(col_t), values = unpack(values_t), dense = unpack(dense_t),
            out = unpack(out_t);
  require_int64_vector(crow, "crow_indices");
  require_int64_vector(col, "col_indices");
  require_contiguous(crow, "crow_indices");
  require_contiguous(col, "col_indices");
  require_contiguous(values, "values");
  require(values.ndim() == 1 && values.shape[0] == col.shape[0], "values must be a vector of nnz elements");
  require(dense.ndim() == 2 && out.ndim() == 2, "sparse_csr_mm: dense operands must be matrices");
  require(dense.dtype == values.dtype && out.dtype == values.dtype, "sparse_csr_mm: dtypes differ");
  require(out.is_contiguous(), "sparse_csr_mm: out must be contiguous");
  require(dense.shape[1] == 1 || dense.strides[1] == 1 || dense.shape[0] == 0,
          "sparse_csr_mm: dense rows must be contiguous");
  int64_t m = out.shape[0], n = out.shape[1], k = dense.shape[0];
  require(dense.shape[1] == n, "sparse_csr_mm: shapes do not match");
  std::string bad = check_compressed(crow, col, m, k, "crow_indices", "col_indices");
  // Unsorted columns inside a row are harmless for a product; only bounds matter here.
  if (!bad.empty() && bad.find("sorted and distinct") == std::string::npos) throw std::runtime_error(bad);
  const auto* crow_p = reinterpret_cast<const int64_t*>(crow.data);
  const auto* col_p = reinterpret_cast<const int64_t*>(col.data);
  int64_t ldb = dense.shape[1] == 1 ? 1 : dense.strides[0];
  py::gil_scoped_release release;
  EMBER_DISPATCH_SPARSE(values.dtype, "sparse_csr_mm", [&] {
    csr_mm_rows<scalar_t>(crow_p, col_p, reinterpret_cast<const scalar_t*>(values.data),
                          reinterpret_cast<const scalar_t*>(dense.data), reinterpret_cast<scalar_t*>(out.data), m, n,
                          ldb, n);
  });
}

// -- coalesce ---------------------------------------------------------------------------------

// Stable LSD radix sort of (key, position) pairs on the low `bits` bits of the keys.
void radix_sort(std::vector<int64_t>& keys, std::vector<int64_t>& perm, int bits) {
  constexpr int kDigit = 11;
  const int64_t n = static_cast<int64_t>(keys.size());
  std::vector<int64_t> keys2(n), perm2(n);
  std::vector<int64_t> count(1 << kDigit);
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    const int64_t mask = (1 << kDigit) - 1;
    for (int64_t i = 0; i < n; ++i) ++count[(keys[i] >> shift) & mask];
    int64_t sum = 0;
    for (auto& c : count) {
      int64_t t = c;
      c = sum;
      sum += t;
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t dst = count[(keys[i] >> shift) & mask]++;
      keys2[dst] = keys[i];
      perm2[dst] = perm[i];
    }
    keys.swap(keys2);
    perm.swap(perm2);
  }
}

// Sorts the entries of indices (sparse_dim x nnz) by row-major position, sums duplicates into
// out_values (nnz x row_size, contiguous) and writes their indices to out_indices (sparse_dim x
// nnz, contiguous). Returns the number of distinct entries (the prefix of the outputs written).
int64_t sparse_coalesce(py::handle indices_t, py::handle values_t, const std::vector<int64_t>& sizes,
                        py::handle out_indices_t, py::handle out_values_t) {
  TensorArg indices = unpack(indices_t), values = unpack(values_t), out_indices = unpack(out_indices_t),
            out_values = unpack(out_values_t);
  require(indices.dtype == DType::Int64 && indices.ndim() == 2, "indices must be a 2-D int64 tensor");
  const int64_t dims = indices.shape[0], nnz = indices.shape[1];
  require(static_cast<int64_t>(sizes.size()) == dims, "sparse_coalesce: sizes do not match indices");
  require(values.ndim() == 2 && values.shape[0] == nnz && values.is_contiguous(), "values must be (nnz, n) contiguous");
  require(out_values.is_contiguous() && out_values.dtype == values.dtype && out_values.shape == values.shape,
          "out_values must match values");
  require(out_indices.is_contiguous() && out_indices.dtype == DType::Int64 && out_indices.shape == indices.shape,
          "out_indices must match indices");
  const auto* idx = reinterpret_cast<const int64_t*>(indices.data);
  const int64_t s0 = indices.strides[0], s1 = indices.strides[1];
  for (int64_t d = 0; d < dims; ++d)
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t v = idx[d * s0 + j * s1];
      if (v < 0 || v >= sizes[d])
        throw std::runtime_error("index " + std::to_string(v) + " is out of bounds for dimension " +
                                 std::to_string(d) + " with size " + std::to_string(sizes[d]));
    }
  // The linear index fits int64 unless the sparse shape is huge: then sort by index tuples.
  bool fits = true;
  int64_t span = 1;
  for (int64_t s : sizes) fits = fits && (s == 0 || !__builtin_mul_overflow(span, s, &span));
  std::vector<int64_t> keys(nnz), perm(nnz);
  std::iota(perm.begin(), perm.end(), 0);
  auto same = [&](int64_t a, int64_t b) {
    for (int64_t d = 0; d < dims; ++d)
      if (idx[d * s0 + a * s1] != idx[d * s0 + b * s1]) return false;
    return true;
  };
  {
    py::gil_scoped_release release;
    if (fits) {
      bool sorted = true;
      for (int64_t j = 0; j < nnz; ++j) {
        int64_t key = 0;
        for (int64_t d = 0; d < dims; ++d) key = key * sizes[d] + idx[d * s0 + j * s1];
        keys[j] = key;
        sorted = sorted && (j == 0 || keys[j - 1] <= key);
      }
      int bits = 0;
      while (bits < 63 && (int64_t(1) << bits) < span) ++bits;
      if (!sorted) radix_sort(keys, perm, bits);
    } else {
      std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
        for (int64_t d = 0; d < dims; ++d) {
          int64_t x = idx[d * s0 + a * s1], y = idx[d * s0 + b * s1];
          if (x != y) return x < y;
        }
        return false;
      });
    }
  }
  const int64_t row = values.shape[1];
  auto* oidx = reinterpret_cast<int64_t*>(out_indices.data);
  int64_t unique = 0;
  py::gil_scoped_release release;
  EMBER_DISPATCH_SPARSE(values.dtype, "sparse_coalesce", [&] {
    const auto* src = reinterpret_cast<const scalar_t*>(values.data);
    auto* dst = reinterpret_cast<scalar_t*>(out_values.data);
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t p = perm[j];
      bool dup = j > 0 && (fits ? keys[j] == keys[j - 1] : same(p, perm[j - 1]));
      const scalar_t* v = src + p * row;
      if (dup) {
        scalar_t* acc = dst + (unique - 1) * row;
        for (int64_t k = 0; k < row; ++k) accumulate(acc[k], v[k]);
      } else {
        for (int64_t d = 0; d < dims; ++d) oidx[d * nnz + unique] = idx[d * s0 + p * s1];
        std::memcpy(dst + unique * row, v, sizeof(scalar_t) * row);
        ++unique;
      }
    }
  });
  return unique;
}

// -- compressed <-> expanded indices ------------------------------------------------------------

// crow (n + 1) from sorted row indices (nnz): counts, then a prefix sum.
void sparse_compress(py::handle rows_t, int64_t n, py::handle out_t) {
  TensorArg rows = unpack(rows_t), out = unpack(out_t);
  require_int64_vector(rows, "row indices");
  require_int64_vector(out, "compressed indices");
  require_contiguous(out, "compressed indices");
  require(out.shape[0] == n + 1, "compressed indices must have n + 1 entries");
  auto* o = reinterpret_cast<int64_t*>(out.data);
  std::fill(o, o + n + 1, 0);
  const int64_t nnz = rows.shape[0];
  int64_t prev = 0;
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t r = at(rows, j);
    if (r < 0 || r >= n)
      throw std::runtime_error("index " + std::to_string(r) + " is out of bounds for dimension 0 with size " +
                               std::to_string(n));
    if (r < prev) throw std::runtime_error("sparse_compress: row indices must be sorted");
    prev = r;
    ++o[r + 1];
  }
  for (int64_t i = 0; i < n; ++i) o[i + 1] += o[i];
}

// Row index of every entry (nnz) from crow (n + 1), which must be valid.
void sparse_expand_compressed(py::handle crow_t, py::handle out_t) {
  TensorArg crow = unpack(crow_t), out = unpack(out_t);
  require_int64_vector(crow, "compressed indices");
  require_int64_vector(out, "row indices");
  require_contiguous(out, "row indices");
  const int64_t n = crow.shape[0] - 1, nnz = out.shape[0];
  require(n >= 0 && at(crow, 0) == 0 && at(crow, n) == nnz, "compressed indices do not match nnz");
  auto* o = reinterpret_cast<int64_t*>(out.data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t lo = at(crow, i), hi = at(crow, i + 1);
    require(lo <= hi && hi <= nnz, "compressed indices must be non-decreasing");
    for (int64_t j = lo; j < hi; ++j) o[j] = i;
  }
}

}  // namespace

void bind_sparse(py::module_& m) {
  m.def("sparse_csr_mm", &sparse_csr_mm, py::arg("crow"), py::arg("col"), py::arg("values"), py::arg("dense"),
        py::arg("out"), "out = CSR(crow, col, values) @ dense (out contiguous, dense rows contiguous).");
  m.def("sparse_coalesce", &sparse_coalesce, py::arg("indices"), py::arg("values"), py::arg("sizes"),
        py::arg("out_indices"), py::arg("out_values"),
        "Sorts COO entries, sums duplicates into the outputs; returns the number of distinct entries.");
  m.def("sparse_compress", &sparse_compress, py::arg("rows"), py::arg("n"), py::arg("out"),
        "Compressed pointers (n + 1) of sorted row indices.");
  m.def("sparse_expand_compressed", &sparse_expand_compressed, py::arg("crow"), py::arg("out"),
        "Row index of each entry from compressed pointers.");
  m.def("sparse_check_compressed", &sparse_check_compressed, py::arg("compressed"), py::arg("plain"),
        py::arg("n_compressed"), py::arg("n_plain"), py::arg("compressed_name"), py::arg("plain_name"),
        "The first violated compressed-layout invariant, or an empty string.");
}

}  // namespace ember
