// Binding of K-fold cross-validation (approximate and exact).
#include <pybind11/stl.h>

#include <chrono>

#include "aloocv/kfold.hpp"
#include "aloocv/newton.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

// t_fit: wall time of the full fit; t_folds: of the fold downdates or refits.
KFoldOut kfold_out(const FitState& st, bool intercept, KFoldOutput& res, double t_fit,
                   double t_folds) {
  KFoldOut out;
  fill_fit(out, st, intercept);
  out.losses = move_to_numpy(std::move(res.losses));
  out.predictions = move_to_numpy(std::move(res.predictions));
  out.n_not_converged = res.n_not_converged;
  out.n_woodbury = res.n_woodbury;
  out.seconds_fit = t_fit;
  out.seconds_folds = t_folds;
  return out;
}

}  // namespace

void bind_kfold(py::module_& m) {
  m.def(
      "kfold",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, const py::array& folds,
         Index n_folds, const std::string& method, double tol, Index max_iter, int n_threads,
         const std::optional<py::array>& l1, const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept, l1);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        const int* f = int32_ptr(folds, pb.n(), "folds");
        if (method != "alo" && method != "exact") {
          throw py::value_error("unknown method '" + method + "'; expected 'alo' or 'exact'");
        }
        FitOptions opt{tol, max_iter, n_threads};
        // the fold downdates need the Hessian at beta: from the fit's end, or summed from the
        // folds' blocks (the fold-wise end)
        opt.fresh_end = method == "alo" && !kfold_foldwise_end(pb, kind, f, n_folds);
        FitState st;
        KFoldOutput res;
        using clock = std::chrono::steady_clock;
        double t_fit = 0.0, t_folds = 0.0;
        run_released([&] {
          const auto t0 = clock::now();
          st = fit(pb, kind, opt, nullptr);
          const auto t1 = clock::now();
          res = method == "alo" ? kfold_approx(pb, kind, st, f, n_folds, n_threads)
                                : kfold_exact(pb, kind, st, f, n_folds, opt);
          t_fit = std::chrono::duration<double>(t1 - t0).count();
          t_folds = std::chrono::duration<double>(clock::now() - t1).count();
        });
        return kfold_out(st, intercept, res, t_fit, t_folds);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("folds"), py::arg("n_folds"),
      py::arg("method"), py::arg("tol"), py::arg("max_iter"), py::arg("n_threads"),
      py::arg("l1") = py::none(), py::arg("offset") = py::none(),
      "K-fold CV: one Newton step per fold on the exact fold-out Hessian, in the cheaper of "
      "the q x q Woodbury and p x p forms ('alo'), or refits ('exact').");

  m.def(
      "kfold_foldwise_end",
      [](const py::object& loss, Index p1, bool has_l1, const py::array& sizes) {
        Problem pb;
        const LossKind kind = apply_loss(loss, pb);
        if (sizes.ndim() != 1) throw py::value_error("sizes must be a 1-d array");
        const Index K = static_cast<Index>(sizes.shape(0));
        std::vector<Index> sz(static_cast<size_t>(K));
        const py::array_t<Index, py::array::forcecast> a(sizes);
        for (Index k = 0; k < K; ++k) sz[static_cast<size_t>(k)] = a.at(k);
        return foldwise_end_sizes(kind, has_l1, p1, sz.data(), K);
      },
      py::arg("loss"), py::arg("p1"), py::kw_only(), py::arg("has_l1"), py::arg("sizes"),
      "Whether approximate K-fold with folds of these sizes (a partition of the samples) sums "
      "the Hessian at the fit from the folds' blocks, its fit then a plain one (no fresh "
      "Hessian at its end): the dask route asks, so that its fit is the in-memory one.");

  m.def(
      "holdout",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, const py::array& indices,
         const py::array& indptr, const std::string& method, double tol, Index max_iter,
         int n_threads, const std::optional<py::array>& l1,
         const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept, l1);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        if (method != "alo" && method != "exact") {
          throw py::value_error("unknown method '" + method + "'; expected 'alo' or 'exact'");
        }
        if (indptr.ndim() != 1 || indptr.shape(0) < 2) {
          throw py::value_error("indptr must be a 1-d array of at least 2 offsets");
        }
        const Index K = static_cast<Index>(indptr.shape(0)) - 1;
        const int* ptr = int32_ptr(indptr, K + 1, "indptr");
        if (ptr[0] != 0) throw py::value_error("indptr must start at 0");
        for (Index k = 0; k < K; ++k) {
          if (ptr[k + 1] < ptr[k]) throw py::value_error("indptr is not non-decreasing");
        }
        const int* idx = int32_ptr(indices, ptr[K], "indices");
        SampleSets sets(static_cast<size_t>(K));
        for (Index k = 0; k < K; ++k)
          sets[static_cast<size_t>(k)].assign(idx + ptr[k], idx + ptr[k + 1]);
        FitOptions opt{tol, max_iter, n_threads};
        opt.fresh_end = method == "alo" && !holdout_foldwise_end(pb, kind, sets);
        FitState st;
        KFoldOutput res;
        using clock = std::chrono::steady_clock;
        double t_fit = 0.0, t_folds = 0.0;
        run_released([&] {
          const auto t0 = clock::now();
          st = fit(pb, kind, opt, nullptr);
          const auto t1 = clock::now();
          res = method == "alo" ? holdout_approx(pb, kind, st, sets, n_threads)
                                : holdout_exact(pb, kind, st, sets, opt);
          t_fit = std::chrono::duration<double>(t1 - t0).count();
          t_folds = std::chrono::duration<double>(clock::now() - t1).count();
        });
        return kfold_out(st, intercept, res, t_fit, t_folds);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("indices"), py::arg("indptr"),
      py::arg("method"), py::arg("tol"), py::arg("max_iter"), py::arg("n_threads"),
      py::arg("l1") = py::none(), py::arg("offset") = py::none(),
      "Held-out sets (CSR: set k is indices[indptr[k]:indptr[k+1]]; they may overlap and need "
      "not cover the samples), each left out on its own as one K-fold fold; outputs are "
      "concatenated set after set.");
}

}  // namespace aloocv::bind
