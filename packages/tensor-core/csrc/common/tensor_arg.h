// The view of a Python ember.Tensor that kernels work on, read from its slots and
// validated (dtype code, rank, and that every element lies inside the storage) before any
// kernel touches memory.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "dtype.h"
#include "storage.h"

namespace ember {

constexpr int kMaxDims = 64;

struct TensorArg {
  char* data = nullptr;  // address of the element at index (0, ..., 0)
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements
  Storage* storage = nullptr;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool is_contiguous() const;
  int64_t elem_size() const { return itemsize(dtype); }
};

// Reads and validates a tensor. `writable` kernels also bump nothing here: the Python
// side owns version counters.
TensorArg unpack(pybind11::handle tensor);

// Checked product of sizes (raises on overflow).
int64_t checked_numel(const std::vector<int64_t>& shape);

// Strides (in elements) that broadcast `arg` to `shape` (right-aligned), raising if the
// shapes are incompatible.
std::vector<int64_t> broadcast_strides(const TensorArg& arg, const std::vector<int64_t>& shape);

std::vector<int64_t> to_int64_vector(pybind11::handle seq, const char* what);

}  // namespace ember
