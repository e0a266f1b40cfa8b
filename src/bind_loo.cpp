// Binding of the leave-one-out estimators.
#include <pybind11/stl.h>

#include "aloocv/hypergrad.hpp"
#include "aloocv/ridge_path.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

void bind_loo(py::module_& m) {
  m.def(
      "ridge_spectrum",
      [](const py::object& X, const py::array& Z, bool intercept, int n_threads) {
        require_float64(Z, "Z");
        if (Z.ndim() != 2) throw py::value_error("Z must be 2-dimensional");
        if (Z.strides(0) % 8 != 0 || Z.strides(1) % 8 != 0) {
          throw py::value_error("Z strides must be multiples of 8 bytes");
        }
        require_aligned(Z, "Z");
        const Index p = make_design(X).p;
        if (p < 1) throw py::value_error("X has no features (p = 0)");
        py::array_t<double> zeros(p);
        std::fill(zeros.mutable_data(), zeros.mutable_data() + p, 0.0);
        const Index n = Z.shape(0), mcols = Z.shape(1);
        // columns of Z as a contiguous column-major copy (Z is small: T + 1 responses)
        Mat Zc(n, mcols);
        const double* zp = static_cast<const double*>(Z.data());
        const auto s0 = Z.strides(0) / 8, s1 = Z.strides(1) / 8;
        for (Index j = 0; j < mcols; ++j)
          for (Index i = 0; i < n; ++i) Zc(i, j) = zp[i * s0 + j * s1];
        Problem pb = make_problem(X, py::array_t<double>(py::array::ShapeContainer{n}), {}, zeros,
                                  intercept);
        RidgeSpectrum sp;
        run_released([&] { sp = ridge_spectrum(pb, Zc.data(), mcols, n_threads); });
        RidgeSpectrumOut out;
        out.s = to_numpy(sp.s);
        out.V = mat_to_numpy(sp.V);
        out.C = mat_to_numpy(sp.C);
        out.mu = to_numpy(sp.mu);
        return out;
      },
      py::arg("X"), py::arg("Z"), py::kw_only(), py::arg("fit_intercept"), py::arg("n_threads"),
      "Eigendecomposition of X_c^T X_c and V^T X_c^T Z: ridge for many responses at once.");

  m.def(
      "ridge_path",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::array& lams, bool intercept, int n_threads) {
        const Index k = lams.ndim() == 1 ? lams.shape(0) : -1;
        const double* lp = vector_ptr(lams, k, "lambdas");
        const Index p = make_design(X).p;
        py::array_t<double> zeros(p);
        std::fill(zeros.mutable_data(), zeros.mutable_data() + p, 0.0);
        Problem pb = make_problem(X, y, w, zeros, intercept);
        RidgePath path;
        run_released([&] { path = ridge_path(pb, lp, k, n_threads); });
        RidgePathOut out;
        out.losses = mat_to_numpy(path.losses);
        out.predictions = mat_to_numpy(path.predictions);
        out.coef = mat_to_numpy(path.coef);
        out.intercept = to_numpy(path.intercept);
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("lambdas"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("n_threads"),
      "Exact ridge LOO along a grid of scalar lambdas from one eigendecomposition.");

  m.def(
      "loo",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, const std::string& method,
         double tol, Index max_iter, int n_threads, const std::optional<py::array>& beta,
         bool refit, const std::optional<py::array>& l1, bool gradient,
         const std::string& gradient_kind,
         const std::optional<py::array_t<Index, py::array::c_style | py::array::forcecast>>& subset,
         const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept, l1);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        std::vector<Index> sub;
        if (subset) {
          if (method != "exact") throw py::value_error("subset= needs method='exact'");
          sub.assign(subset->data(), subset->data() + subset->size());
        }
        const SampleSet set{subset ? &sub : nullptr};
        const LooMethod meth = loo_method_from_name(method);
        const GradientKind gkind = gradient_kind_from_name(gradient_kind);
        FitOptions opt{tol, max_iter, n_threads};
        opt.fresh_end = meth != LooMethod::Exact;  // ALO needs the Hessian at beta
        // the fused end's guard is settled by loo() in its leverage pass, by loo_gradient
        // (fresh_factor) in a pass of its own
        opt.defer_end_guard = opt.fresh_end;
        std::optional<Vec> b;
        if (beta) b = to_vec(*beta, pb.p1(), "beta");
        FitState st;
        LooResult res;
        HyperGradient hg;
        if (gradient && meth != LooMethod::ALO) {
          throw py::value_error("the hypergradient is available for method='alo' only");
        }
        run_released([&] {
          // refit: Newton from beta (warm start); otherwise beta is taken as the fit.
          st = (b && !refit) ? prepare(pb, kind, opt, *b) : fit(pb, kind, opt, b ? &*b : nullptr);
          res = gradient ? loo_gradient(pb, kind, st, opt.n_threads, hg, gkind)
                         : loo(pb, kind, meth, st, opt, set);
        });
        LooOut out;
        fill_fit(out, st, intercept);
        out.losses = move_to_numpy(std::move(res.losses));
        out.predictions = move_to_numpy(std::move(res.predictions));
        if (meth != LooMethod::Exact) {
          out.leverages = move_to_numpy(std::move(res.leverages));
          out.downdate = move_to_numpy(std::move(res.den));
        }
        if (meth != LooMethod::Exact && !st.chol.empty()) out.rcond = py::float_(st.chol.rcond());
        out.n_not_converged = res.n_not_converged;
        out.n_singular = res.n_singular;
        if (meth == LooMethod::Exact) out.singular_samples = index_to_numpy(res.singular);
        if (gradient) {
          out.grad_l2 = to_numpy(hg.l2);
          out.grad_l1 = to_numpy(hg.l1);
        }
        out.eta = move_to_numpy(std::move(st.eta));
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("method"), py::arg("tol"),
      py::arg("max_iter"), py::arg("n_threads"), py::arg("beta") = py::none(),
      py::arg("refit") = false, py::arg("l1") = py::none(), py::arg("gradient") = false,
      py::arg("gradient_kind") = "exact", py::arg("subset") = py::none(),
      py::arg("offset") = py::none(),
      "Leave-one-out losses and predictions ('alo', 'if', 'lemma3', 'exact').");
}

}  // namespace aloocv::bind
