// The shared shape analysis of every reduction: the input arrives with its reduced dims
// last (the Python side permutes them there); the kept dims must match the output. Both
// groups are coalesced, and the reduced group is split into an offset table over all but
// its innermost run plus that run (length, stride), so kernels loop over `table x run`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/tensor_arg.h"

namespace ember {

struct ReduceLayout {
  int64_t num_out = 1;                 // number of outputs
  std::vector<int64_t> out_shape;      // coalesced kept dims (innermost last)
  std::vector<int64_t> out_in_stride;  // their input strides (elements)
  std::vector<int64_t> out_stride;     // their output strides (elements)
  int64_t run_len = 1;                 // innermost reduced run
  int64_t run_stride = 0;
  std::vector<int64_t> table;          // input offsets of the remaining reduced positions, row-major
  int64_t reduce_numel = 1;

  // Input/output offsets (elements) of output number `i`.
  void offsets(int64_t i, int64_t& in_off, int64_t& out_off) const {
    if (out_shape.size() == 1) {  // one kept dim (after merging): no division (two cost ~30% of a 4 KB row's sum)
      in_off = i * out_in_stride[0];
      out_off = i * out_stride[0];
      return;
    }
    in_off = 0;
    out_off = 0;
    for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
      int64_t k = i % out_shape[d];
      i /= out_shape[d];
      in_off += k * out_in_stride[d];
      out_off += k * out_stride[d];
    }
  }
};

inline ReduceLayout make_reduce_layout(const TensorArg& out, const TensorArg& in, int64_t nred) {
  const int64_t nd = in.ndim();
  if (nred < 0 || nred > nd) throw std::invalid_argument("reduce: bad number of reduced dims");
  const int64_t nkeep = nd - nred;
  if (out.ndim() != nkeep) throw std::invalid_argument("reduce: output rank does not match the kept dims");
  for (int64_t d = 0; d < nkeep; ++d) {
    if (out.shape[d] != in.shape[d]) throw std::invalid_argument("reduce: output shape does not match the input");
  }
  ReduceLayout L;
  // Kept dims: drop size 1, merge neighbours contiguous for both input and output.
  for (int64_t d = 0; d < nkeep; ++d) {
    int64_t s = in.shape[d];
    L.num_out *= s;
    if (s == 1) continue;
    if (!L.out_shape.empty() && L.out_in_stride.back() == in.strides[d] * s &&
        L.out_stride.back() == out.strides[d] * s) {
      L.out_shape.back() *= s;
      L.out_in_stride.back() = in.strides[d];
      L.out_stride.back() = out.strides[d];
    } else {
      L.out_shape.push_back(s);
      L.out_in_stride.push_back(in.strides[d]);
      L.out_stride.push_back(out.strides[d]);
    }
  }
  // Reduced dims, coalesced the same way.
  std::vector<int64_t> rs, rst;
  for (int64_t d = nkeep; d < nd; ++d) {
    int64_t s = in.shape[d];
    L.reduce_numel *= s;
    if (s == 1) continue;
    if (!rs.empty() && rst.back() == in.strides[d] * s) {
      rs.back() *= s;
      rst.back() = in.strides[d];
    } else {
      rs.push_back(s);
      rst.push_back(in.strides[d]);
    }
  }
  if (L.reduce_numel == 0 || L.num_out == 0) return L;
  if (!rs.empty()) {
    L.run_len = rs.back();
    L.run_stride = rst.back();
    rs.pop_back();
    rst.pop_back();
  }
  int64_t count = 1;
  for (int64_t s : rs) count *= s;
  L.table.resize(count);
  std::vector<int64_t> idx(rs.size(), 0);
  int64_t off = 0;
  for (int64_t t = 0; t < count; ++t) {
    L.table[t] = off;
    for (int64_t d = static_cast<int64_t>(rs.size()) - 1; d >= 0; --d) {
      off += rst[d];
      if (++idx[d] < rs[d]) break;
      off -= rs[d] * rst[d];
      idx[d] = 0;
    }
  }
  return L;
}

}  // namespace ember
