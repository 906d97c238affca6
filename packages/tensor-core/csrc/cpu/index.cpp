// Kernel family "index" (filled in by its owner).
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace ember {

void bind_index(py::module_& m) { (void)m; }

}  // namespace ember
