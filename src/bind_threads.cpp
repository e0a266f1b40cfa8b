// The core's thread limit: Python accessors and the C symbols through which threadpoolctl
// (aloocv/_threads.py registers a controller) reads and sets it.
#include <pybind11/pybind11.h>

#include "aloocv/common.hpp"

#if defined(_WIN32)
#define ALOOCV_EXPORT extern "C" __declspec(dllexport)
#else
#define ALOOCV_EXPORT extern "C" __attribute__((visibility("default")))
#endif

// Threads a call with n_jobs=None gets now (the limit applied to OpenMP's default).
ALOOCV_EXPORT int aloocv_get_num_threads() { return aloocv::max_threads(); }

// Caps the threads of n_jobs=None (n <= 0 lifts the cap).
ALOOCV_EXPORT void aloocv_set_num_threads(int n) { aloocv::set_thread_limit(n); }

namespace aloocv::bind {
namespace py = pybind11;

void bind_threads(py::module_& m) {
  m.def("thread_limit", &thread_limit, "The thread limit set by threadpoolctl (0: none).");
  m.def(
      "set_thread_limit", [](int n) { set_thread_limit(n); }, py::arg("n"),
      "Cap the threads of n_jobs=None (n <= 0 lifts the cap).");
}

}  // namespace aloocv::bind
