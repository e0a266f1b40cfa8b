// The extension module aloocv._core: only the module definition.
#include <pybind11/pybind11.h>

#include "release.hpp"

namespace py = pybind11;

namespace aloocv::bind {
void bind_results(py::module_& m);
void bind_blas(py::module_& m);
void bind_fit(py::module_& m);
void bind_loo(py::module_& m);
void bind_tune(py::module_& m);
void bind_kfold(py::module_& m);
void bind_dual(py::module_& m);
void bind_multinomial(py::module_& m);
void bind_threads(py::module_& m);
void bind_multi(py::module_& m);
void bind_chunk(py::module_& m);
void bind_sums(py::module_& m);
void bind_policy(py::module_& m);
void bind_refits(py::module_& m);
void bind_matrix_free(py::module_& m);
}  // namespace aloocv::bind

PYBIND11_MODULE(_core, m) {
  m.doc() = "aloocv C++ core: Newton fits, Hessian kernels and leave-one-out estimators";
  aloocv::bind::register_translators();  // std::bad_alloc -> a MemoryError that says why
  aloocv::bind::bind_results(m);         // first: the classes the functions return
  aloocv::bind::bind_blas(m);
  aloocv::bind::bind_fit(m);
  aloocv::bind::bind_loo(m);
  aloocv::bind::bind_tune(m);
  aloocv::bind::bind_kfold(m);
  aloocv::bind::bind_dual(m);
  aloocv::bind::bind_multinomial(m);
  aloocv::bind::bind_threads(m);
  aloocv::bind::bind_multi(m);
  aloocv::bind::bind_chunk(m);
  aloocv::bind::bind_sums(m);
  aloocv::bind::bind_policy(m);
  aloocv::bind::bind_refits(m);
  aloocv::bind::bind_matrix_free(m);
}
