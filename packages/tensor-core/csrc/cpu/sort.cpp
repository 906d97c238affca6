// Kernel family "sort": sort, topk, kth/median selection, mode, unique, searchsorted,
// histc and bincount.
//
// Every comparison goes through an order-preserving unsigned key (sort_key below): floats
// map so that -0.0 == 0.0 and every NaN is one value above +inf (PyTorch's "NaN is
// largest"), signed integers get their sign bit flipped. Long rows are then sorted by a
// stable LSD radix sort on (key, position) pairs, short ones by std::stable_sort; both are
// stable, so equal elements keep their order and results match for any row length.
// Rows along `dim` run in parallel (rows.h); one row is sorted on one thread.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "elementwise.h"
#include "rows.h"

namespace py = pybind11;

namespace ember {

namespace {

template <typename T>
using key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <typename T>
key_t<T> sort_key(T v) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t b;
    if (std::isnan(v)) return 0xffffffffu;  // above +inf's key
    if (v == 0.0f) v = 0.0f;
    std::memcpy(&b, &v, 4);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t b;
    if (std::isnan(v)) return ~uint64_t(0);
    if (v == 0.0) v = 0.0;
    std::memcpy(&b, &v, 8);
    return (b >> 63) ? ~b : (b | (uint64_t(1) << 63));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<uint64_t>(v) ^ (uint64_t(1) << 63);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint32_t>(static_cast<int32_t>(v)) ^ 0x80000000u;
  } else {
    return static_cast<uint32_t>(v);
  }
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

template <typename T>
T load(const char* row, int64_t stride, int64_t j) {
  return *reinterpret_cast<const T*>(row + j * stride);
}

// Stable order of keys[0..n) (ascending): `order` receives positions. Scratch reused per thread.
// Positions (and bucket counts) are P: uint32_t for rows up to 2**32 elements, else uint64_t.
template <typename K, typename P>
struct Sorter {
  std::vector<K> keys, keys2;
  std::vector<P> pos, pos2;

  void sort(int64_t n) {  // keys[0..n) filled by the caller; result in pos[0..n)
    pos.resize(n);
    std::iota(pos.begin(), pos.end(), P(0));
    if (n < 512) {
      std::stable_sort(pos.begin(), pos.end(), [&](P a, P b) { return keys[a] < keys[b]; });
      return;
    }
    constexpr int kBits = 11, kBuckets = 1 << kBits;
    constexpr int kPasses = (sizeof(K) * 8 + kBits - 1) / kBits;
    std::vector<P> hist(static_cast<size_t>(kPasses) * kBuckets, 0);
    for (int64_t i = 0; i < n; ++i) {
      K k = keys[i];
      for (int p = 0; p < kPasses; ++p) ++hist[p * kBuckets + ((k >> (p * kBits)) & (kBuckets - 1))];
    }
    keys2.resize(n);
    pos2.resize(n);
    for (int p = 0; p < kPasses; ++p) {
      P* h = &hist[p * kBuckets];
      if (h[(keys[0] >> (p * kBits)) & (kBuckets - 1)] == static_cast<P>(n)) continue;  // one bucket
      P sum = 0;
      for (int b = 0; b < kBuckets; ++b) {
        P c = h[b];
        h[b] = sum;
        sum += c;
      }
      for (int64_t i = 0; i < n; ++i) {
        K k = keys[i];
        P dst = h[(k >> (p * kBits)) & (kBuckets - 1)]++;
        keys2[dst] = k;
        pos2[dst] = pos[i];
      }
      keys.swap(keys2);
      pos.swap(pos2);
    }
  }

  // Scratch of a very long row is not kept by the thread for the rest of the process.
  void trim(int64_t n) {
    if (n > (int64_t(1) << 22)) *this = Sorter();
  }
};

// Per-thread scratch that grew past 4M elements is freed: OpenMP threads live as long as the
// process, and one long row must not pin gigabytes to each of them.
template <typename V>
void trim_scratch(V& scratch) {
  if (scratch.capacity() > (size_t(1) << 22)) V().swap(scratch);
}

// Calls fn(P{}) with the narrowest position type that indexes n elements.
template <typename F>
void with_position_type(int64_t n, const F& fn) {
  if (n <= static_cast<int64_t>(UINT32_MAX))
    fn(uint32_t{});
  else
    fn(uint64_t{});
}

struct Row3 {
  int64_t dim, len;
  int64_t s0, s1, s2;  // byte strides along dim of the three operands
};

// values/indices (self's shape, or with `dim` of size k) and self; rows along dim.
template <typename F>
void rows3(const TensorArg& a, const TensorArg& b, const TensorArg& self, int64_t dim, const F& fn) {
  for_each_row<3>(self.shape, dim, {a.data, b.data, self.data},
                  {byte_strides(a.strides, a.elem_size()), byte_strides(b.strides, 8),
                   byte_strides(self.strides, self.elem_size())},
                  fn);
}

void check_rows(const TensorArg& values, const TensorArg& indices, const TensorArg& self, int64_t dim, int64_t k,
                const char* what) {
  if (values.dtype != self.dtype || indices.dtype != DType::Int64 || values.ndim() != self.ndim() ||
      indices.shape != values.shape || dim < 0 || dim >= self.ndim())
    throw std::invalid_argument(std::string(what) + ": mismatched operands");
  for (int64_t d = 0; d < self.ndim(); ++d)
    if (values.shape[d] != (d == dim ? k : self.shape[d])) throw std::invalid_argument(std::string(what) + ": bad shape");
}

// values, indices = self sorted along dim (stable).
void sort(py::handle values_obj, py::handle indices_obj, py::handle self_obj, int64_t dim, bool descending) {
  TensorArg values = unpack(values_obj), indices = unpack(indices_obj), self = unpack(self_obj);
  if (self.ndim() == 0) return;
  check_rows(values, indices, self, dim, self.shape[dim], "sort");
  if (self.numel() == 0) return;
  const int64_t n = self.shape[dim];
  const int64_t vs = values.strides[dim] * values.elem_size(), is = indices.strides[dim] * 8,
                ss = self.strides[dim] * self.elem_size();
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(self.dtype, "sort", [&] {
    using K = key_t<scalar_t>;
    with_position_type(n, [&](auto position) {
      using P = decltype(position);
      rows3(values, indices, self, dim, [&](std::array<char*, 3>& row) {
        thread_local Sorter<K, P> sorter;
        sorter.keys.resize(n);
        for (int64_t j = 0; j < n; ++j) {
          K k = sort_key(load<scalar_t>(row[2], ss, j));
          sorter.keys[j] = descending ? static_cast<K>(~k) : k;
        }
        sorter.sort(n);
        for (int64_t j = 0; j < n; ++j) {
          auto p = static_cast<int64_t>(sorter.pos[j]);
          *reinterpret_cast<scalar_t*>(row[0] + j * vs) = load<scalar_t>(row[2], ss, p);
          *reinterpret_cast<int64_t*>(row[1] + j * is) = p;
        }
        sorter.trim(n);
      });
    });
  });
}

// The k largest (or smallest) along dim, best first; ties keep the earlier position.
void topk(py::handle values_obj, py::handle indices_obj, py::handle self_obj, int64_t k, int64_t dim, bool largest) {
  TensorArg values = unpack(values_obj), indices = unpack(indices_obj), self = unpack(self_obj);
  if (self.ndim() == 0) return;
  const int64_t n = self.shape[dim];
  if (k < 0 || k > n) throw std::runtime_error("selected index k out of range");
  check_rows(values, indices, self, dim, k, "topk");
  if (values.numel() == 0) return;
  const int64_t vs = values.strides[dim] * values.elem_size(), is = indices.strides[dim] * 8,
                ss = self.strides[dim] * self.elem_size();
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(self.dtype, "topk", [&] {
    using K = key_t<scalar_t>;
    using Item = std::pair<K, int64_t>;
    // "better" = larger key, then earlier position; a heap on it keeps the worst on top.
    auto better = [](const Item& a, const Item& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    rows3(values, indices, self, dim, [&](std::array<char*, 3>& row) {
      thread_local std::vector<Item> items;
      items.clear();
      auto key_at = [&](int64_t j) {
        K key = sort_key(load<scalar_t>(row[2], ss, j));
        return largest ? key : static_cast<K>(~key);
      };
      if (k * 64 <= n) {  // few wanted: one pass with a k-heap; later equal keys never enter
        for (int64_t j = 0; j < k; ++j) items.emplace_back(key_at(j), j);
        std::make_heap(items.begin(), items.end(), better);
        for (int64_t j = k; j < n; ++j) {
          K key = key_at(j);
          if (key > items.front().first) {
            std::pop_heap(items.begin(), items.end(), better);
            items.back() = Item(key, j);
            std::push_heap(items.begin(), items.end(), better);
          }
        }
        std::sort(items.begin(), items.end(), better);
      } else {
        for (int64_t j = 0; j < n; ++j) items.emplace_back(key_at(j), j);
        std::nth_element(items.begin(), items.begin() + (k - 1), items.end(), better);
        std::sort(items.begin(), items.begin() + k, better);
      }
      for (int64_t j = 0; j < k; ++j) {
        *reinterpret_cast<scalar_t*>(row[0] + j * vs) = load<scalar_t>(row[2], ss, items[j].second);
        *reinterpret_cast<int64_t*>(row[1] + j * is) = items[j].second;
      }
      trim_scratch(items);
    });
  });
}

// PyTorch's kthvalue selection (the Sedgewick-style quickselect it inherited from TH: median-of-three
// pivot, Hoare partition, NaN above everything), run on (value, position) pairs so that among equal
// values the position it reports is the one PyTorch reports. Leaves arr[k] / idx[k] in place.
template <typename T>
void quick_select(std::vector<T>& arr, std::vector<int64_t>& idx, int64_t k) {
  auto gt = [](T x, T y) { return (is_nan(x) && !is_nan(y)) || x > y; };
  auto swap = [&](int64_t i, int64_t j) {
    std::swap(arr[i], arr[j]);
    std::swap(idx[i], idx[j]);
  };
  int64_t L = 0, R = static_cast<int64_t>(arr.size()) - 1;
  while (true) {
    if (R <= L) return;
    if (R == L + 1) {
      if (gt(arr[L], arr[R])) swap(L, R);
      return;
    }
    swap((L + R) >> 1, L + 1);
    if (gt(arr[L + 1], arr[R])) swap(L + 1, R);
    if (gt(arr[L], arr[R])) swap(L, R);
    if (gt(arr[L + 1], arr[L])) swap(L + 1, L);
    int64_t i = L + 1, j = R;
    const T piv = arr[L];
    while (true) {
      do ++i; while (gt(piv, arr[i]));
      do --j; while (gt(arr[j], piv));
      if (j < i) break;
      swap(i, j);
    }
    swap(L, j);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}

// kind 0: the (k+1)-th smallest; 1: median (lower; NaN if the row has one); 2: nanmedian.
// values/indices have self's shape with dim of size 1.
void select_kth(py::handle values_obj, py::handle indices_obj, py::handle self_obj, int64_t dim, int64_t k, int kind) {
  TensorArg values = unpack(values_obj), indices = unpack(indices_obj), self = unpack(self_obj);
  check_rows(values, indices, self, dim, 1, "kthvalue");
  const int64_t n = self.shape[dim];
  if (n == 0 || (kind == 0 && (k < 0 || k >= n))) throw std::runtime_error("kthvalue(): selected number k out of range");
  if (values.numel() == 0) return;
  const int64_t ss = self.strides[dim] * self.elem_size();
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(self.dtype, "kthvalue", [&] {
    using K = key_t<scalar_t>;
    using Item = std::pair<K, int64_t>;
    rows3(values, indices, self, dim, [&](std::array<char*, 3>& row) {
      if (kind == 0) {
        using V = std::conditional_t<std::is_same_v<scalar_t, bool>, uint8_t, scalar_t>;  // no vector<bool>
        thread_local std::vector<V> vals;
        thread_local std::vector<int64_t> pos;
        vals.resize(n);
        pos.resize(n);
        for (int64_t j = 0; j < n; ++j) vals[j] = load<scalar_t>(row[2], ss, j), pos[j] = j;
        quick_select(vals, pos, k);
        *reinterpret_cast<scalar_t*>(row[0]) = static_cast<scalar_t>(vals[k]);
        *reinterpret_cast<int64_t*>(row[1]) = pos[k];
        trim_scratch(vals);
        trim_scratch(pos);
        return;
      }
      thread_local std::vector<Item> items;
      items.clear();
      int64_t nans = 0, first_nan = -1;
      for (int64_t j = 0; j < n; ++j) {
        scalar_t v = load<scalar_t>(row[2], ss, j);
        if (is_nan(v) && nans++ == 0) first_nan = j;
        items.emplace_back(sort_key(v), j);
      }
      int64_t pick;
      if (kind == 1 && nans > 0) {
        pick = first_nan;
      } else if (kind == 2 && nans == n) {
        pick = first_nan;
      } else {
        int64_t kk = kind == 0 ? k : kind == 1 ? (n - 1) / 2 : (n - nans - 1) / 2;
        std::nth_element(items.begin(), items.begin() + kk, items.end());
        pick = items[kk].second;
      }
      *reinterpret_cast<scalar_t*>(row[0]) = load<scalar_t>(row[2], ss, pick);
      *reinterpret_cast<int64_t*>(row[1]) = pick;
      trim_scratch(items);
    });
  });
}

// The most frequent value along dim (the smallest on ties) and its last position.
void mode(py::handle values_obj, py::handle indices_obj, py::handle self_obj, int64_t dim) {
  TensorArg values = unpack(values_obj), indices = unpack(indices_obj), self = unpack(self_obj);
  check_rows(values, indices, self, dim, 1, "mode");
  const int64_t n = self.shape[dim];
  if (n == 0) throw std::out_of_range("mode(): Expected reduction dim to have non-zero size.");
  if (values.numel() == 0) return;
  const int64_t ss = self.strides[dim] * self.elem_size();
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(self.dtype, "mode", [&] {
    using K = key_t<scalar_t>;
    using Item = std::pair<K, int64_t>;
    rows3(values, indices, self, dim, [&](std::array<char*, 3>& row) {
      thread_local std::vector<Item> items;
      items.clear();
      for (int64_t j = 0; j < n; ++j) items.emplace_back(sort_key(load<scalar_t>(row[2], ss, j)), j);
      std::sort(items.begin(), items.end());
      int64_t best_count = 0, best_pos = 0;
      for (int64_t start = 0; start < n;) {
        int64_t end = start + 1;
        while (end < n && items[end].first == items[start].first) ++end;
        if (end - start > best_count) best_count = end - start, best_pos = items[end - 1].second;
        start = end;
      }
      *reinterpret_cast<scalar_t*>(row[0]) = load<scalar_t>(row[2], ss, best_pos);
      *reinterpret_cast<int64_t*>(row[1]) = best_pos;
      trim_scratch(items);
    });
  });
}

// Unique rows of a contiguous (n, m) tensor, sorted (or consecutive runs only). Writes the
// first position of each group, the group of every row and the group sizes; returns the
// number of groups.
int64_t unique_rows(py::handle first_obj, py::handle inverse_obj, py::handle counts_obj, py::handle data_obj,
                    bool sorted) {
  TensorArg first = unpack(first_obj), inverse = unpack(inverse_obj), counts = unpack(counts_obj),
            data = unpack(data_obj);
  if (data.ndim() != 2 || (data.numel() > 0 && !data.is_contiguous())) throw std::invalid_argument("unique: bad data");
  const int64_t n = data.shape[0], m = data.shape[1];
  for (const TensorArg* t : {&first, &inverse, &counts})
    if (t->dtype != DType::Int64 || t->numel() != n || (n > 0 && !t->is_contiguous()))
      throw std::invalid_argument("unique: bad output");
  if (n == 0) return 0;
  auto* first_p = reinterpret_cast<int64_t*>(first.data);
  auto* inv_p = reinterpret_cast<int64_t*>(inverse.data);
  auto* cnt_p = reinterpret_cast<int64_t*>(counts.data);
  int64_t groups = 0;
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(data.dtype, "unique", [&] {
    using K = key_t<scalar_t>;
    const auto* x = reinterpret_cast<const scalar_t*>(data.data);
    std::vector<K> keys(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n * m; ++i) keys[i] = sort_key(x[i]);
    with_position_type(n, [&](auto position) {
      using P = decltype(position);
      Sorter<K, P> sorter;
      if (sorted && m == 1) {
        sorter.keys = keys;
        sorter.sort(n);
      } else {
        sorter.pos.resize(n);
        std::iota(sorter.pos.begin(), sorter.pos.end(), P(0));
        if (sorted)
          std::stable_sort(sorter.pos.begin(), sorter.pos.end(), [&](P a, P b) {
            return std::lexicographical_compare(&keys[a * m], &keys[a * m + m], &keys[b * m], &keys[b * m + m]);
          });
      }
      const std::vector<P>& order = sorter.pos;
      // NaN equals nothing, itself included: a row holding one is a group of its own (as PyTorch).
      auto has_nan = [&](int64_t row) {
        if constexpr (std::is_floating_point_v<scalar_t>) {
          for (int64_t k = 0; k < m; ++k)
            if (std::isnan(x[row * m + k])) return true;
        }
        return false;
      };
      for (int64_t j = 0; j < n; ++j) {
        auto p = static_cast<int64_t>(order[j]);
        bool same = j > 0 && std::equal(&keys[p * m], &keys[p * m + m], &keys[order[j - 1] * m]) && !has_nan(p);
        if (!same) {
          first_p[groups] = p;
          cnt_p[groups] = 0;
          ++groups;
        }
        inv_p[p] = groups - 1;
        ++cnt_p[groups - 1];
      }
    });
  });
  return groups;
}

// out[r, v] = insertion point of values[r, v] in the sorted row seq[r] (seq may have 1 row
// shared by all). sorter, when given, holds the positions that sort each seq row.
void searchsorted(py::handle out_obj, py::handle seq_obj, py::handle values_obj, py::handle sorter_obj, bool right) {
  TensorArg out = unpack(out_obj), seq = unpack(seq_obj), values = unpack(values_obj);
  const bool has_sorter = !sorter_obj.is_none();
  TensorArg sorter = has_sorter ? unpack(sorter_obj) : seq;
  if (seq.ndim() != 2 || values.ndim() != 2 || out.shape != values.shape || seq.dtype != values.dtype ||
      (seq.shape[0] != values.shape[0] && seq.shape[0] != 1) || !seq.is_contiguous() || !values.is_contiguous() ||
      !out.is_contiguous() || (out.dtype != DType::Int64 && out.dtype != DType::Int32))
    throw std::invalid_argument("searchsorted: bad operands");
  if (has_sorter && (sorter.dtype != DType::Int64 || sorter.shape != seq.shape || !sorter.is_contiguous()))
    throw std::invalid_argument("searchsorted: bad sorter");
  const int64_t rows = values.shape[0], nv = values.shape[1], m = seq.shape[1];
  const auto* sort_p = reinterpret_cast<const int64_t*>(sorter.data);
  if (has_sorter)
    for (int64_t i = 0; i < sorter.numel(); ++i)
      if (sort_p[i] < 0 || sort_p[i] >= m) throw std::runtime_error("torch.searchsorted(): sorter index out of range");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(seq.dtype, "searchsorted", [&] {
    const auto* s = reinterpret_cast<const scalar_t*>(seq.data);
    const auto* v = reinterpret_cast<const scalar_t*>(values.data);
    parallel_for(rows * nv, kGrainSize / 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = seq.shape[0] == 1 ? 0 : i / nv;
        const scalar_t* row = s + r * m;
        const int64_t* order = has_sorter ? sort_p + r * m : nullptr;
        const scalar_t key = v[i];
        int64_t lo = 0, hi = m;
        while (lo < hi) {
          int64_t mid = lo + (hi - lo) / 2;
          const scalar_t k = row[order ? order[mid] : mid];
          // PyTorch's tests, written so that a NaN (which compares false to everything) on
          // either side moves the search right: "not above" for right, "not at least" for left.
          if (right ? !(k > key) : !(k >= key))
            lo = mid + 1;
          else
            hi = mid;
        }
        if (out.dtype == DType::Int64)
          reinterpret_cast<int64_t*>(out.data)[i] = lo;
        else
          reinterpret_cast<int32_t*>(out.data)[i] = static_cast<int32_t>(lo);
      }
    });
  });
}

// Histogram of a contiguous float tensor into `out` (bins); lo == hi means the data range.
void histc(py::handle out_obj, py::handle self_obj, int64_t bins, double lo, double hi) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj);
  if (out.ndim() != 1 || out.shape[0] != bins || out.dtype != self.dtype || !self.is_contiguous() ||
      !out.is_contiguous() || bins <= 0)
    throw std::invalid_argument("histc: bad operands");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(self.dtype, "histc", [&] {
    const auto* x = reinterpret_cast<const scalar_t*>(self.data);
    const int64_t n = self.numel();
    if (lo == hi && n > 0) {
      lo = hi = static_cast<double>(x[0]);
      for (int64_t i = 0; i < n; ++i) lo = std::min<double>(lo, x[i]), hi = std::max<double>(hi, x[i]);
      for (int64_t i = 0; i < n; ++i)
        if (std::isnan(x[i])) lo = hi = NAN;
    }
    if (!std::isfinite(lo) || !std::isfinite(hi))
      throw std::runtime_error("torch.histogram: range of [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "] is not finite");
    if (lo == hi) lo -= 1, hi += 1;
    // PyTorch's edges are a linspace in the input's dtype and each bin is found by linear interpolation
    // in that dtype: in float32 a value 1 ulp from a bin edge lands in the same bin as PyTorch's only
    // when the arithmetic is float32 too.
    const auto lo_s = static_cast<scalar_t>(lo), hi_s = static_cast<scalar_t>(hi);
    std::vector<int64_t> count(bins, 0);
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t v = x[i];
      if (!(v >= lo_s && v <= hi_s)) continue;
      // Edges that round to one value (|x| near the dtype's max) would divide 0 by 0: bin 0.
      int64_t b = hi_s > lo_s ? static_cast<int64_t>((v - lo_s) * static_cast<scalar_t>(bins) / (hi_s - lo_s)) : 0;
      ++count[std::clamp<int64_t>(b, 0, bins - 1)];
    }
    auto* o = reinterpret_cast<scalar_t*>(out.data);
    for (int64_t b = 0; b < bins; ++b) o[b] = static_cast<scalar_t>(count[b]);
  });
}

// Largest value + 1 of a non-negative integer tensor (0 when empty).
int64_t bincount_size(py::handle self_obj) {
  TensorArg self = unpack(self_obj);
  if (self.ndim() != 1) throw std::runtime_error("bincount only supports 1-d non-negative integral inputs.");
  int64_t top = -1;
  bool negative = false;
  EMBER_DISPATCH_COMPUTE(self.dtype, "bincount", [&] {
    if constexpr (std::is_floating_point_v<scalar_t>) {
      throw std::invalid_argument("bincount: integer input expected");
    } else {
      for (int64_t i = 0; i < self.shape[0]; ++i) {
        auto v = static_cast<int64_t>(load<scalar_t>(self.data, self.strides[0] * sizeof(scalar_t), i));
        negative |= v < 0;
        top = std::max(top, v);
      }
    }
  });
  if (negative) throw std::runtime_error("bincount only supports 1-d non-negative integral inputs.");
  return top + 1;
}

// out (zeroed here) [input[i]] += weights[i] (or 1); out is int64 or the weights' dtype.
void bincount(py::handle out_obj, py::handle self_obj, py::handle weights_obj) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj);
  const bool weighted = !weights_obj.is_none();
  TensorArg weights = weighted ? unpack(weights_obj) : out;
  const int64_t bins = out.numel(), n = self.numel();
  if (out.ndim() != 1 || !out.is_contiguous() || self.dtype != DType::Int64 || !self.is_contiguous() ||
      (weighted && (weights.dtype != out.dtype || weights.numel() != n || !weights.is_contiguous())) ||
      (!weighted && out.dtype != DType::Int64))
    throw std::invalid_argument("bincount: bad operands");
  const auto* x = reinterpret_cast<const int64_t*>(self.data);
  for (int64_t i = 0; i < n; ++i)
    if (x[i] < 0 || x[i] >= bins) throw std::runtime_error("bincount only supports 1-d non-negative integral inputs.");
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(out.dtype, "bincount", [&] {
    auto* o = reinterpret_cast<scalar_t*>(out.data);
    std::fill(o, o + bins, scalar_t(0));
    const auto* w = reinterpret_cast<const scalar_t*>(weights.data);
    for (int64_t i = 0; i < n; ++i) o[x[i]] = static_cast<scalar_t>(o[x[i]] + (weighted ? w[i] : scalar_t(1)));
  });
}

}  // namespace

void bind_sort(py::module_& m) {
  m.def("sort", &sort, py::arg("values"), py::arg("indices"), py::arg("self"), py::arg("dim"), py::arg("descending"),
        "Stable sort along dim (NaN largest) into values and int64 indices.");
  m.def("topk", &topk, py::arg("values"), py::arg("indices"), py::arg("self"), py::arg("k"), py::arg("dim"),
        py::arg("largest"), "The k largest/smallest along dim, best first.");
  m.def("select_kth", &select_kth, py::arg("values"), py::arg("indices"), py::arg("self"), py::arg("dim"),
        py::arg("k"), py::arg("kind"), "kind 0: k-th smallest (0-based k); 1: median; 2: nanmedian.");
  m.def("mode", &mode, py::arg("values"), py::arg("indices"), py::arg("self"), py::arg("dim"));
  m.def("unique_rows", &unique_rows, py::arg("first"), py::arg("inverse"), py::arg("counts"), py::arg("data"),
        py::arg("sorted"), "Groups equal rows of a contiguous 2-d tensor; returns the number of groups.");
  m.def("searchsorted", &searchsorted, py::arg("out"), py::arg("seq"), py::arg("values"), py::arg("sorter"),
        py::arg("right"));
  m.def("histc", &histc, py::arg("out"), py::arg("self"), py::arg("bins"), py::arg("min"), py::arg("max"));
  m.def("bincount_size", &bincount_size, py::arg("self"));
  m.def("bincount", &bincount, py::arg("out"), py::arg("self"), py::arg("weights"));
}

}  // namespace ember
