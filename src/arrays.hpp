// Array conversion and validation shared by the binding files. No math here.
#pragma once

#include <cstring>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "aloocv/hypergrad.hpp"
#include "aloocv/loo.hpp"
#include "aloocv/newton.hpp"

namespace aloocv::bind {

namespace py = pybind11;

inline void require_float64(const py::array& a, const char* name) {
  if (!py::array_t<double>::check_(a)) {  // equivalent dtype (any instance, native order)
    throw py::type_error(std::string(name) + " must be a float64 array, got dtype " +
                         std::string(py::str(a.dtype())));
  }
}

// The array itself, never a converted temporary: a view keeps the data pointer, so a
// list (or any other object numpy would convert) must not reach the core.
inline py::array require_array(const py::handle& h, const char* name) {
  if (!py::isinstance<py::array>(h)) {
    throw py::type_error(std::string(name) + " must be a numpy array (validate it in Python)");
  }
  return py::reinterpret_borrow<py::array>(h);
}

inline void require_aligned(const py::array& a, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(a.data()) % alignof(double) != 0) {
    throw py::value_error(std::string(name) + " is not aligned to 8 bytes (copy it first)");
  }
}

// A zero-copy view of a 2-D float64 array of any layout whose strides are whole elements;
// with allow_float32, a float32 array too (the design X: read in place, widened as read).
inline DenseView design_view(const py::array& X, bool allow_float32 = false) {
  const bool f32 = allow_float32 && py::array_t<float>::check_(X);
  if (!f32) require_float64(X, "X");
  if (X.ndim() != 2) throw py::value_error("X must be 2-dimensional");
  const py::ssize_t item = f32 ? 4 : 8;
  const auto s0 = X.strides(0), s1 = X.strides(1);
  if (s0 % item != 0 || s1 % item != 0) {
    throw py::value_error("X strides must be multiples of " + std::to_string(item) + " bytes");
  }
  if (reinterpret_cast<std::uintptr_t>(X.data()) % static_cast<std::uintptr_t>(item) != 0) {
    throw py::value_error("X is not aligned to " + std::to_string(item) + " bytes (copy it first)");
  }
  DenseView v;
  if (f32) {
    v.data32 = static_cast<const float*>(X.data());
  } else {
    v.data = static_cast<const double*>(X.data());
  }
  v.n = X.shape(0);
  v.p = X.shape(1);
  v.row_stride = s0 / item;
  v.col_stride = s1 / item;
  return v;
}

// A contiguous 1-D float64 array of length n.
inline const double* vector_ptr(const py::array& a, Index n, const char* name) {
  require_float64(a, name);
  if (a.ndim() != 1 || a.shape(0) != n) {
    throw py::value_error(std::string(name) + " must be 1-dimensional of length " +
                          std::to_string(n));
  }
  if (n > 1 && a.strides(0) != static_cast<py::ssize_t>(sizeof(double))) {
    throw py::value_error(std::string(name) + " must be contiguous");
  }
  require_aligned(a, name);
  return static_cast<const double*>(a.data());
}

inline const int* int32_ptr(const py::array& a, Index n, const char* name) {
  if (!py::array_t<int>::check_(a)) throw py::type_error(std::string(name) + " must be int32");
  if (a.ndim() != 1 || a.shape(0) != n || (n > 1 && a.strides(0) != 4)) {
    throw py::value_error(std::string(name) + " must be a contiguous 1-d array of length " +
                          std::to_string(n));
  }
  if (reinterpret_cast<std::uintptr_t>(a.data()) % alignof(int) != 0) {
    throw py::value_error(std::string(name) + " is not aligned");
  }
  return static_cast<const int*>(a.data());
}

// X is a 2-d float64 numpy array (dense) or a tuple (data, indices, indptr, n, p)
// holding a canonical CSR matrix with 32-bit indices (sparse). The Python layer
// (_validation.py) checks everything first; the structural checks here are a second,
// O(n + nnz) line of defence so that a direct call of the core cannot read out of bounds.
inline Design make_design(const py::object& X) {
  if (py::isinstance<py::tuple>(X)) {
    auto t = X.cast<py::tuple>();
    if (t.size() != 5) throw py::value_error("sparse X must be (data, indices, indptr, n, p)");
    CsrView v;
    v.n = t[3].cast<Index>();
    v.p = t[4].cast<Index>();
    if (v.n < 0 || v.p < 0 || v.p > std::numeric_limits<int>::max()) {
      throw py::value_error("sparse X: bad shape");
    }
    v.indptr = int32_ptr(require_array(t[2], "indptr"), v.n + 1, "indptr");
    if (v.indptr[0] != 0) throw py::value_error("indptr must start at 0");
    for (Index i = 0; i < v.n; ++i) {
      if (v.indptr[i + 1] < v.indptr[i]) throw py::value_error("indptr is not non-decreasing");
    }
    const Index nnz = v.indptr[v.n];
    v.indices = int32_ptr(require_array(t[1], "indices"), nnz, "indices");
    const py::array data = require_array(t[0], "data");
    if (py::array_t<float>::check_(data)) {  // float32 values, read in place
      if (data.ndim() != 1 || data.shape(0) != nnz || (nnz > 1 && data.strides(0) != 4) ||
          reinterpret_cast<std::uintptr_t>(data.data()) % alignof(float) != 0) {
        throw py::value_error("sparse X: data must be a contiguous aligned array of length nnz");
      }
      v.data32 = static_cast<const float*>(data.data());
    } else {
      v.data = vector_ptr(data, nnz, "data");
    }
    for (Index a = 0; a < nnz; ++a) {
      if (v.indices[a] < 0 || v.indices[a] >= v.p) {
        throw py::value_error("sparse X: column index " + std::to_string(v.indices[a]) +
                              " is out of range [0, " + std::to_string(v.p) + ")");
      }
    }
    for (Index i = 0; i < v.n; ++i) {
      for (Index a = v.indptr[i] + 1; a < v.indptr[i + 1]; ++a) {
        if (v.indices[a] <= v.indices[a - 1]) {
          throw py::value_error("sparse X is not canonical (unsorted or duplicate indices)");
        }
      }
    }
    return Design::from(v);
  }
  return Design::from(design_view(require_array(X, "X"), true));
}

inline Problem make_problem(const py::object& X, const py::array& y,
                            const std::optional<py::array>& w, const py::array& pen, bool intercept,
                            const std::optional<py::array>& l1 = {}) {
  Problem pb;
  pb.X = make_design(X);
  pb.intercept = intercept;
  pb.y = vector_ptr(y, pb.n(), "y");
  pb.w = w ? vector_ptr(*w, pb.n(), "sample_weight") : nullptr;
  const double* lam = vector_ptr(pen, pb.X.p, "penalty");
  pb.pen.resize(pb.p1());
  const Index off = intercept ? 1 : 0;
  if (intercept) pb.pen[0] = 0.0;
  for (Index j = 0; j < pb.X.p; ++j) pb.pen[off + j] = lam[j];
  if (l1) {
    const double* a = vector_ptr(*l1, pb.X.p, "l1");
    pb.l1 = Vec::Zero(pb.p1());
    for (Index j = 0; j < pb.X.p; ++j) pb.l1[off + j] = a[j];
  }
  return pb;
}

// The loss of a binding call: a registered name, or a (name, power, delta) tuple for the
// parametrized losses; sets pb.lp and returns the kind.
inline LossKind apply_loss(const py::object& loss, Problem& pb) {
  if (py::isinstance<py::str>(loss)) return loss_from_name(loss.cast<std::string>());
  if (!py::isinstance<py::tuple>(loss) || py::len(loss) != 3) {
    throw py::type_error("loss must be a name or a (name, power, delta) tuple");
  }
  const auto t = loss.cast<py::tuple>();
  pb.lp.power = t[1].cast<double>();
  pb.lp.delta = t[2].cast<double>();
  check_loss_params(pb.lp);
  return loss_from_name(t[0].cast<std::string>());
}

// eta = X~ beta + offset: the offset array (n,) must outlive pb.
inline void apply_offset(const std::optional<py::array>& offset, Problem& pb) {
  pb.offset = offset ? vector_ptr(*offset, pb.n(), "offset") : nullptr;
}

inline Vec to_vec(const py::array& a, Index n, const char* name) {
  const double* p = vector_ptr(a, n, name);
  return Eigen::Map<const Vec>(p, n);
}

// A 2-d float64 array (any layout) as an Eigen matrix (a copy: for small inputs only).
inline Mat to_mat(const py::array& a, Index rows, const char* name) {
  require_float64(a, name);
  if (a.ndim() != 2 || a.shape(0) != rows) {
    throw py::value_error(std::string(name) + " must be 2-dimensional with " +
                          std::to_string(rows) + " rows");
  }
  const auto s0 = a.strides(0), s1 = a.strides(1);
  if (s0 % 8 != 0 || s1 % 8 != 0) throw py::value_error(std::string(name) + ": bad strides");
  // read byte-wise (memcpy): a buffer received by a dask task can sit at an address that
  // is not a multiple of 8
  const char* p = static_cast<const char*>(a.data());
  Mat out(rows, a.shape(1));
  for (Index j = 0; j < out.cols(); ++j)
    for (Index i = 0; i < rows; ++i) std::memcpy(&out(i, j), p + i * s0 + j * s1, sizeof(double));
  return out;
}

inline GradientKind gradient_kind_from_name(const std::string& name) {
  if (name == "exact") return GradientKind::Exact;
  if (name == "paper") return GradientKind::Paper;
  throw py::value_error("unknown gradient '" + name + "'; expected 'exact' or 'paper'");
}

inline py::array_t<double> to_numpy(const Vec& v) {
  py::array_t<double> out(v.size());
  std::copy(v.data(), v.data() + v.size(), out.mutable_data());
  return out;
}

// Hands v's buffer to numpy without a copy (the array owns it through a capsule): per-sample
// results of length n are returned this way, so that a result never exists twice.
inline py::array_t<double> move_to_numpy(Vec&& v) {
  auto* owned = new Vec(std::move(v));
  py::capsule keep(owned, [](void* ptr) { delete static_cast<Vec*>(ptr); });
  return py::array_t<double>(owned->size(), owned->data(), keep);
}

inline py::array_t<Index> index_to_numpy(const std::vector<Index>& v) {
  py::array_t<Index> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

inline py::array_t<double> mat_to_numpy(const Mat& M) {
  py::array_t<double, py::array::f_style> out({M.rows(), M.cols()});
  std::copy(M.data(), M.data() + M.size(), out.mutable_data());
  return out;
}

// A (p1 x p1) matrix held column-major in a vector of length p1^2, as a numpy array.
inline py::array_t<double> square_to_numpy(const Vec& v, Index p1) {
  py::array_t<double, py::array::f_style> out({p1, p1});
  std::copy(v.data(), v.data() + v.size(), out.mutable_data());
  return out;
}

}  // namespace aloocv::bind
