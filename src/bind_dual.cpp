// Bindings of the n x n dual route and of kernel ridge leave-one-out.
#include <pybind11/stl.h>

#include "aloocv/dual.hpp"
#include "aloocv/hypergrad.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {
// r's per-sample vectors are moved into the result.
DualOut dual_out(DualResult& r, LooMethod method, bool want_loo) {
  DualOut out;
  out.coef = to_numpy(r.coef);
  out.intercept = r.st.b;
  out.n_iter = r.st.n_iter;
  out.converged = r.st.converged;
  out.objective = r.st.objective;
  out.grad_norm = r.st.grad_norm;
  out.alpha = to_numpy(r.st.alpha);
  if (want_loo) {
    out.losses = move_to_numpy(std::move(r.loo.losses));
    out.predictions = move_to_numpy(std::move(r.loo.predictions));
    if (method != LooMethod::Exact) {
      out.leverages = move_to_numpy(std::move(r.loo.leverages));
      out.downdate = move_to_numpy(std::move(r.loo.den));
    }
    out.n_not_converged = py::int_(r.loo.n_not_converged);
    out.n_singular = py::int_(r.loo.n_singular);
    if (method == LooMethod::Exact) out.singular_samples = index_to_numpy(r.loo.singular);
  }
  return out;
}
}  // namespace

void bind_dual(py::module_& m) {
  m.def(
      "dual",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, const std::string& method,
         double tol, Index max_iter, int n_threads, bool want_loo,
         const std::optional<py::array>& beta,
         const std::optional<py::array_t<Index, py::array::c_style | py::array::forcecast>>& subset,
         bool gradient, const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        std::vector<Index> sub;
        if (subset) {
          if (method != "exact") throw py::value_error("subset= needs method='exact'");
          sub.assign(subset->data(), subset->data() + subset->size());
        }
        const SampleSet set{subset ? &sub : nullptr};
        const LooMethod meth = loo_method_from_name(method);
        FitOptions opt{tol, max_iter, n_threads};
        std::optional<Vec> b;
        if (beta) b = to_vec(*beta, pb.p1(), "beta");
        if (gradient && (meth != LooMethod::ALO || !want_loo)) {
          throw py::value_error("the hypergradient is available for method='alo' only");
        }
        DualResult r;
        HyperGradient hg;
        run_released([&] {
          const Mat K = dual_kernel(pb, n_threads);
          r = dual_loo(pb, kind, K, meth, opt, want_loo, b ? &*b : nullptr, set);
          if (gradient) hg = dual_gradient(pb, kind, K, r.st.eta, r.coef, n_threads);
        });
        DualOut out = dual_out(r, meth, want_loo);
        if (gradient) {
          out.grad_l2 = to_numpy(hg.l2);
          out.grad_l1 = to_numpy(hg.l1);
        }
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("method"), py::arg("tol"),
      py::arg("max_iter"), py::arg("n_threads"), py::arg("want_loo") = true,
      py::arg("beta") = py::none(), py::arg("subset") = py::none(), py::arg("gradient") = false,
      py::arg("offset") = py::none(),
      "Fit (and LOO) through the n x n dual system: K = X P^{-1} X^T once, O(n^3) per step; "
      "a given beta is taken as the fit.");

  m.def(
      "kernel_ridge_loo",
      [](const py::array& K, const py::array& y, const std::optional<py::array>& w, double lam,
         bool intercept) {
        require_float64(K, "K");
        if (K.ndim() != 2 || K.shape(0) != K.shape(1)) throw py::value_error("K must be square");
        // element strides only: a byte stride that is not a multiple of 8 cannot be
        // expressed in elements (truncating it read the wrong entries)
        if (K.strides(0) % 8 != 0 || K.strides(1) % 8 != 0) {
          throw py::value_error("K strides must be multiples of 8 bytes (copy it first)");
        }
        require_aligned(K, "K");
        const Index n = K.shape(0);
        Problem pb;
        pb.X.n = n;  // no features: the kernel stands for X P^{-1} X^T
        pb.X.p = 0;
        pb.intercept = intercept;
        pb.y = vector_ptr(y, n, "y");
        pb.w = w ? vector_ptr(*w, n, "sample_weight") : nullptr;
        pb.pen = Vec::Zero(pb.p1());
        Mat Km(n, n);
        const auto s0 = K.strides(0) / 8, s1 = K.strides(1) / 8;
        const double* kp = static_cast<const double*>(K.data());
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < n; ++i) Km(i, j) = kp[i * s0 + j * s1] / lam;
        DualResult r;
        run_released([&] {
          r = dual_loo(pb, LossKind::Squared, Km, LooMethod::ALO, FitOptions{1e-12, 10, 0}, true);
        });
        return dual_out(r, LooMethod::ALO, true);
      },
      py::arg("K"), py::arg("y"), py::arg("sample_weight"), py::arg("lam"), py::kw_only(),
      py::arg("fit_intercept"), "Exact LOO of kernel ridge regression from a kernel matrix.");
}

}  // namespace aloocv::bind
