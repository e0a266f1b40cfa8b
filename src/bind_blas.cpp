// Registration of the BLAS/LAPACK routines of an already loaded library (scipy's).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aloocv/blas.hpp"
#include "aloocv/common.hpp"
#include "aloocv/vector_math.hpp"

namespace aloocv::bind {
namespace py = pybind11;

namespace {
void* capsule_pointer(const py::dict& caps, const char* name) {
  if (!caps.contains(name)) throw py::key_error(std::string("missing BLAS routine ") + name);
  py::object obj = caps[name];
  if (!PyCapsule_CheckExact(obj.ptr())) {
    throw py::type_error(std::string("BLAS routine ") + name + " must be a PyCapsule");
  }
  void* ptr = PyCapsule_GetPointer(obj.ptr(), PyCapsule_GetName(obj.ptr()));
  if (!ptr) throw py::error_already_set();
  return ptr;
}
}  // namespace

void bind_blas(py::module_& m) {
  m.def(
      "set_blas",
      [](const py::dict& caps) {
        blas::Table t;
        t.syrk = reinterpret_cast<blas::dsyrk_t*>(capsule_pointer(caps, "dsyrk"));
        t.trsm = reinterpret_cast<blas::dtrsm_t*>(capsule_pointer(caps, "dtrsm"));
        t.potrf = reinterpret_cast<blas::dpotrf_t*>(capsule_pointer(caps, "dpotrf"));
        t.gemm = reinterpret_cast<blas::dgemm_t*>(capsule_pointer(caps, "dgemm"));
        if (caps.contains("dtrmm")) {
          t.trmm = reinterpret_cast<blas::dtrsm_t*>(capsule_pointer(caps, "dtrmm"));
        }
        if (caps.contains("dgemv")) {
          t.gemv = reinterpret_cast<blas::dgemv_t*>(capsule_pointer(caps, "dgemv"));
        }
        if (caps.contains("ssyrk")) {
          t.ssyrk = reinterpret_cast<blas::ssyrk_t*>(capsule_pointer(caps, "ssyrk"));
        }
        if (caps.contains("strmm")) {
          t.strmm = reinterpret_cast<blas::strmm_t*>(capsule_pointer(caps, "strmm"));
        }
        blas::set_table(t);
      },
      py::arg("capsules"),
      "Registers dsyrk, dtrsm, dgemm (BLAS), dpotrf (LAPACK) and optionally dtrmm, dgemv, "
      "ssyrk and strmm (float32 designs) from a dict of PyCapsules holding Fortran-ABI function "
      "pointers "
      "(scipy.linalg.cython_blas / cython_lapack).");
  m.def("use_blas", &blas::set_enabled, py::kw_only(), py::arg("enabled"),
        "Switches between the registered BLAS and the built-in Eigen kernels.");
  m.def("blas_enabled", &blas::enabled, "True when registered BLAS routines are in use.");
  m.def("has_row_gemv", &blas::has_row_gemv,
        "True when the core's row-block product kernels run: the CPU has AVX2 + FMA and they "
        "are enabled.");
  m.def("use_row_kernels", &blas::set_row_kernels, py::kw_only(), py::arg("enabled"),
        "Switches the core's row kernels on or off (off: the registered DGEMV or Eigen, as on "
        "a CPU without AVX2 + FMA).");
  m.def(
      "row_gemv",
      [](const py::array& A, const py::array_t<double, py::array::c_style>& x,
         py::array_t<double, py::array::c_style>& y, bool transpose, double beta) {
        const bool f32 = A.dtype().is(py::dtype::of<float>());
        const auto item = static_cast<py::ssize_t>(f32 ? sizeof(float) : sizeof(double));
        if ((!f32 && !A.dtype().is(py::dtype::of<double>())) || A.ndim() != 2 ||
            A.strides(1) != item || A.strides(0) % item != 0 || A.strides(0) < A.shape(1) * item) {
          throw py::value_error("A must be a 2-D float64 or float32 array of contiguous rows");
        }
        const Index m_rows = A.shape(0), n_cols = A.shape(1), lda = A.strides(0) / item;
        if (x.ndim() != 1 || y.ndim() != 1 || x.shape(0) != (transpose ? m_rows : n_cols) ||
            y.shape(0) != (transpose ? n_cols : m_rows)) {
          throw py::value_error("x and y must be vectors of the product's sizes");
        }
        if (f32) {
          return blas::row_gemv(transpose, m_rows, n_cols, static_cast<const float*>(A.data()), lda,
                                x.data(), beta, y.mutable_data());
        }
        return blas::row_gemv(transpose, m_rows, n_cols, static_cast<const double*>(A.data()), lda,
                              x.data(), beta, y.mutable_data());
      },
      py::arg("A"), py::arg("x"), py::arg("y"), py::kw_only(), py::arg("transpose"),
      py::arg("beta"),
      "y = A x + beta y (or A^T x + beta y) in place with the core's row kernels (A float64 "
      "or float32), for tests; False (y untouched) where the CPU lacks them.");
  m.def(
      "vector_math",
      [](const std::string& fn, const py::array_t<double, py::array::c_style>& x) {
        if (x.ndim() != 1) throw py::value_error("x must be a 1-D float64 array");
        const bool is_exp = fn == "exp";
        if (!is_exp && fn != "log1p_unit") {
          throw py::value_error("fn must be 'exp' or 'log1p_unit'");
        }
        py::array_t<double> out(x.shape(0));
        const Index m = x.shape(0);
        const double* in = x.data();
        double* o = out.mutable_data();
        {
          py::gil_scoped_release release;
          if (is_exp) {
            vmath::exp(in, o, m);
          } else {
            vmath::log1p_unit(in, o, m);
          }
        }
        return out;
      },
      py::arg("fn"), py::arg("x"),
      "The core's elementwise kernels (vector_math.hpp) over x, for tests: exp of x or "
      "log1p of x in [0, 1].");
  m.def("max_threads", &max_threads,
        "Threads of a call with n_jobs=None: OpenMP's default capped by the thread limit.");
}

}  // namespace aloocv::bind
