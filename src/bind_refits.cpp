// Binding of the lockstep exact leave-one-out refits (cpp/include/aloocv/refit_batch.hpp)
// that the dask backend drives with its passes over the chunks
// (python/aloocv/backends/dask/refits.py). Argument conversion only, no math here.
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "aloocv/refit_batch.hpp"
#include "arrays.hpp"
#include "release.hpp"

namespace aloocv::bind {

namespace {

Vec optional_vec(const std::optional<py::array>& a, Index n, const char* name) {
  return a ? to_vec(*a, n, name) : Vec();
}

// hess (p1, p1, k) of any layout as a column-major vector (a copy: small).
Vec hess_vec(const py::array& hess, Index p1) {
  require_float64(hess, "hess");
  if (hess.ndim() != 3 || hess.shape(0) != p1 || hess.shape(1) != p1) {
    throw py::value_error("hess must be 3-dimensional of shape (p1, p1, k), p1 = " +
                          std::to_string(p1));
  }
  const Index k = hess.shape(2);
  const auto s0 = hess.strides(0), s1 = hess.strides(1), s2 = hess.strides(2);
  if (s0 % 8 != 0 || s1 % 8 != 0 || s2 % 8 != 0) throw py::value_error("hess: bad strides");
  // read byte-wise (memcpy), as to_mat: a buffer received by a task may be unaligned
  const char* base = static_cast<const char*>(hess.data());
  Vec out(p1 * p1 * k);
  for (Index c = 0; c < k; ++c)
    for (Index j = 0; j < p1; ++j)
      for (Index i = 0; i < p1; ++i)
        std::memcpy(&out[(c * p1 + j) * p1 + i], base + i * s0 + j * s1 + c * s2, sizeof(double));
  return out;
}

}  // namespace

void bind_refits(py::module_& m) {
  py::class_<RefitBatch>(
      m, "RefitBatch",
      "Exact leave-one-out refits of a batch of samples in lockstep (the core's exact_loo policy), "
      "their evaluations supplied by the caller: request() gives the refits to evaluate, feed() "
      "takes their sums, results() the leave-one-out values.")
      .def(py::init([](const py::array& H, const py::array& X, const py::array& y,
                       const std::optional<py::array>& w, const std::optional<py::array>& offset,
                       const py::object& loss, bool intercept, const py::array& beta, double f,
                       const py::array& grad, const py::array& penalty, double weight_sum,
                       double tol, Index max_iter, std::optional<double> chord_ratio,
                       std::optional<Index> max_chord) {
             if (X.ndim() != 2) throw py::value_error("X must be 2-dimensional");
             const Index n = X.shape(0), p = X.shape(1), p1 = p + (intercept ? 1 : 0);
             Problem pb;
             const LossKind kind = apply_loss(loss, pb);
             const Mat Xm = to_mat(X, n, "X"), Hm = to_mat(H, p1, "H");
             const Vec yv = to_vec(y, n, "y"), wv = optional_vec(w, n, "sample_weight"),
                       ov = optional_vec(offset, n, "offset"), bv = to_vec(beta, p1, "beta"),
                       gv = to_vec(grad, p1, "grad"), pv = to_vec(penalty, p, "penalty");
             RefreshPolicy pol = aloocv::detail::exact_refit_policy();
             if (chord_ratio) pol.chord_ratio = *chord_ratio;
             if (max_chord) pol.max_chord = *max_chord;
             std::unique_ptr<RefitBatch> out;
             run_released([&] {
               out = std::make_unique<RefitBatch>(kind, pb.lp, intercept, Hm, Xm, yv, wv, ov, bv, f,
                                                  gv, pv, weight_sum, tol, max_iter, &pol);
             });
             return out;
           }),
           py::arg("H"), py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("offset"),
           py::arg("loss"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"), py::arg("f"),
           py::arg("grad"), py::arg("penalty"), py::arg("weight_sum"), py::arg("tol"),
           py::arg("max_iter"), py::arg("chord_ratio") = py::none(),
           py::arg("max_chord") = py::none(),
           "H: the full penalized Hessian at beta (p1, p1); X, y, sample_weight, offset: the "
           "batch's rows (sample_weight, offset may be None); f, grad: the full penalized "
           "objective and gradient at beta; penalty: the ridge penalty per feature (p,); "
           "weight_sum: the sum of all the weights; chord_ratio, max_chord: exact_loo's "
           "EXACT_CHORD_RATIO and EXACT_MAX_CHORD unless given (tests).")
      .def(
          "request",
          [](const RefitBatch& b) -> py::object {
            const RefitRequest& r = b.request();
            if (r.done) return py::none();
            return py::make_tuple(index_to_numpy(r.cols), mat_to_numpy(r.beta),
                                  index_to_numpy(r.hess));
          },
          "The next evaluation: (cols, beta, hess_cols): the refits cols (positions in the "
          "batch) at the columns of beta (p1, len(cols)), the Hessians for the refits "
          "cols[hess_cols]; None when the refits have finished.")
      .def(
          "feed",
          [](RefitBatch& b, const py::array& loss, const py::array& grad, const py::array& hess) {
            const Index k = static_cast<Index>(b.request().cols.size()), p1 = b.p1();
            const Vec lv = to_vec(loss, k, "loss");
            const Mat gm = to_mat(grad, p1, "grad");
            const Vec hv = hess_vec(hess, p1);
            run_released([&] { b.feed(lv, gm, hv); });
          },
          py::arg("loss"), py::arg("grad"), py::arg("hess"),
          "The unpenalized sums of the pending request, each refit without its own sample: loss "
          "(k,), grad (p1, k), hess (p1, p1, len(hess_cols)).")
      .def(
          "results",
          [](const RefitBatch& b) {
            RefitBatchResult r = b.results();
            return py::make_tuple(move_to_numpy(std::move(r.losses)),
                                  move_to_numpy(std::move(r.predictions)), r.n_not_converged,
                                  index_to_numpy(r.singular));
          },
          "(losses, predictions, n_not_converged, singular): the leave-one-out values (NaN for a "
          "singular refit), the refits not at tol (singular ones included) and the positions of "
          "the singular refits.");
}

}  // namespace aloocv::bind
