// Binding of the multi-response ridge decomposition (squared loss, L2, many targets).
#include <pybind11/stl.h>

#include <memory>

#include "aloocv/multi_ridge.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

// Moves M into a Fortran-ordered numpy array without copying its data.
py::array_t<double> move_to_numpy(Mat&& M) {
  auto* owner = new Mat(std::move(M));
  py::capsule base(owner, [](void* ptr) { delete static_cast<Mat*>(ptr); });
  const py::ssize_t r = owner->rows(), c = owner->cols();
  return py::array_t<double>({r, c}, {py::ssize_t(sizeof(double)), py::ssize_t(sizeof(double)) * r},
                             owner->data(), base);
}

// The decomposition and the responses it reads in place (kept alive here).
struct MultiRidgeHandle {
  py::array Y;
  MultiRidge mr;
};

}  // namespace

void bind_multi(py::module_& m) {
  py::class_<MultiRidgeHandle, std::shared_ptr<MultiRidgeHandle>>(
      m, "MultiRidge",
      "Ridge for many responses sharing one decomposition: scores along a grid of "
      "lambdas, coefficients and leave-one-out predictions at one lambda per response, "
      "K-fold downdates.")
      .def(py::init([](const py::object& X, const py::array& Y, const std::optional<py::array>& w,
                       bool intercept, const std::optional<py::array>& pen, int n_threads) {
             const Design d = make_design(X);
             if (d.p < 1) throw py::value_error("X has no features (p = 0)");
             const DenseView yv = design_view(Y);  // any layout, read in place
             if (yv.n != d.n) throw py::value_error("Y must have as many rows as X");
             if (yv.p < 1) throw py::value_error("Y has no columns");
             const double* wp = w ? vector_ptr(*w, d.n, "sample_weight") : nullptr;
             const double* pp = pen ? vector_ptr(*pen, d.p, "penalty") : nullptr;
             auto h = std::make_shared<MultiRidgeHandle>();
             h->Y = Y;
             run_released([&] { h->mr = multi_ridge(d, wp, intercept, yv, pp, n_threads); });
             return h;
           }),
           py::arg("X"), py::arg("Y"), py::arg("sample_weight"), py::kw_only(),
           py::arg("fit_intercept"), py::arg("penalty"), py::arg("n_threads"))
      .def_property_readonly("n_targets", [](const MultiRidgeHandle& h) { return h.mr.T; })
      .def(
          "scores",
          [](const MultiRidgeHandle& h, const py::array& lams, int n_threads) {
            const Index k = lams.ndim() == 1 ? lams.shape(0) : -1;
            const double* lp = vector_ptr(lams, k, "lambdas");
            MultiRidgeScores sc;
            run_released([&] { sc = multi_ridge_scores(h.mr, lp, k, n_threads); });
            MultiRidgeScoresOut out;
            out.s2 = move_to_numpy(std::move(sc.s2));
            out.s4 = move_to_numpy(std::move(sc.s4));
            out.rank = sc.rank;
            out.passes = sc.passes;
            return out;
          },
          py::arg("lambdas"), py::arg("n_threads"),
          "(k x T) sums over samples of w e^2 and w e^4 of the leave-one-out residuals e.")
      .def(
          "solve",
          [](const MultiRidgeHandle& h, const py::array& lams, bool predictions, int n_threads) {
            const double* lp = vector_ptr(lams, h.mr.T, "lambdas");
            MultiRidgeSolution sol;
            run_released([&] { sol = multi_ridge_solve(h.mr, lp, predictions, n_threads); });
            MultiRidgeSolutionOut out;
            out.coef = move_to_numpy(std::move(sol.coef));
            out.intercept = to_numpy(sol.intercept);
            if (predictions) out.predictions = move_to_numpy(std::move(sol.predictions));
            return out;
          },
          py::arg("lambdas"), py::kw_only(), py::arg("predictions"), py::arg("n_threads"),
          "Coefficients (p x T), intercepts and leave-one-out predictions (n x T) at one "
          "lambda per response.")
      .def(
          "leverages",
          [](const MultiRidgeHandle& h, double lam) {
            Vec v;
            run_released([&] { v = multi_ridge_leverages(h.mr, lam); });
            return to_numpy(v);
          },
          py::arg("lam"), "(n) leverages h_i at lambda.")
      .def(
          "folds",
          [](const MultiRidgeHandle& h, double lam, const py::array& folds, Index n_folds,
             int n_threads) {
            const int* fp = int32_ptr(folds, h.mr.n, "folds");
            Mat out;
            run_released([&] { out = multi_ridge_folds(h.mr, lam, fp, n_folds, n_threads); });
            return move_to_numpy(std::move(out));
          },
          py::arg("lam"), py::arg("folds"), py::arg("n_folds"), py::arg("n_threads"),
          "(n x T) K-fold held-out predictions by the exact fold downdate.");
}

}  // namespace aloocv::bind
