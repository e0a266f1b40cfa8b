// Bindings of the multinomial logistic fit and its leave-one-out estimators. No math here.
#include <pybind11/stl.h>

#include "aloocv/multinomial.hpp"
#include "arrays.hpp"
#include "multinomial_args.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

void bind_multinomial(py::module_& m) {
  m.def(
      "multinomial_chunk_sums",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const py::array& beta, bool hessian, int n_threads) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        const Vec b = to_vec(beta, pb.dim(), "beta");
        const Index dim = pb.dim();
        Vec grad(dim), hess;
        if (hessian) hess.resize(dim * dim);
        double loss = 0.0;
        run_released([&] {
          loss = mn_chunk_sums(pb, b, grad.data(), hessian ? hess.data() : nullptr, n_threads);
        });
        ChunkSumsOut out;
        out.loss = loss;
        out.weight = pb.weight_sum();
        out.grad = to_numpy(grad);
        if (hessian) {
          py::array_t<double, py::array::f_style> H({dim, dim});
          std::copy(hess.data(), hess.data() + hess.size(), H.mutable_data());
          out.hess = H;
        }
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"),
      py::arg("hessian"), py::arg("n_threads"),
      "Sums of one row chunk of a multinomial problem at beta (class-major): loss, "
      "gradient and (with hessian) the unpenalized K p1 x K p1 Hessian; penalty is unused.");

  m.def(
      "multinomial_chunk_loo",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const py::array& beta, const py::array& H,
         const std::string& method, int n_threads, bool gradient, double weight_sum) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        int code = -1;
        if (method == "alo") code = 0;
        if (method == "if") code = 1;
        if (method == "lemma3") code = 2;
        if (code < 0) throw py::value_error("unknown method '" + method + "'");
        const Index n = pb.n(), dim = pb.dim();
        const Vec b = to_vec(beta, dim, "beta");
        const Mat Hm = to_mat(H, dim, "H");
        if (Hm.cols() != dim) throw py::value_error("H must be square");
        py::array_t<double> pred({n, K}), eta({n, K}), lev({n, K, K});
        py::array_t<double> loss(n), det(n);
        double* pp = pred.mutable_data();
        double* pe = eta.mutable_data();
        double* pl = lev.mutable_data();
        double* ploss = loss.mutable_data();
        double* pd = det.mutable_data();
        const bool want_grad = gradient && code == 0;
        Mat S;
        if (want_grad) S = Mat::Zero(dim, dim);
        run_released([&] {
          mn_chunk_loo(pb, b, Hm, code, pp, ploss, pl, pd, pe, n_threads, weight_sum,
                       want_grad ? S.data() : nullptr);
        });
        ChunkLooOut out;
        if (want_grad) {
          py::array_t<double, py::array::f_style> Sa({dim, dim});
          std::copy(S.data(), S.data() + S.size(), Sa.mutable_data());
          out.S = Sa;
        }
        out.predictions = pred;
        out.losses = loss;
        out.leverages = lev;
        out.downdate = det;
        out.eta = eta;
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"), py::arg("H"),
      py::arg("method"), py::arg("n_threads"), py::arg("gradient") = false,
      py::arg("weight_sum") = 1.0,
      "Multinomial leave-one-out (alo, if or lemma3) of one row chunk given beta and the "
      "penalized, gauge-fixed Hessian H of the whole problem (factored in the core); with "
      "gradient (alo) also S, the chunk's part of the hypergradient's first accumulation "
      "for the mean loss over the whole problem (weight_sum: its total weight).");

  m.def(
      "multinomial_chunk_adjoint",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const py::array& beta, const py::array& H,
         const py::array& M, double weight_sum, int n_threads) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        const Index dim = pb.dim();
        const Vec b = to_vec(beta, dim, "beta");
        const Mat Hm = to_mat(H, dim, "H");
        const Mat Mm = to_mat(M, dim, "M");
        if (Hm.cols() != dim || Mm.cols() != dim) throw py::value_error("H and M must be square");
        Vec rho(dim);
        run_released([&] { mn_chunk_adjoint(pb, b, Hm, Mm, weight_sum, rho.data(), n_threads); });
        return to_numpy(rho);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"), py::arg("H"),
      py::arg("M"), py::arg("weight_sum"), py::arg("n_threads"),
      "The multinomial hypergradient's second accumulation over one row chunk: X~^T gamma "
      "given M = H^{-1} S H^{-1} (S summed over the chunks).");

  m.def(
      "multinomial_fit",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, double tol, Index max_iter, int n_threads,
         const std::optional<py::array>& beta0) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        std::optional<Vec> b0;
        if (beta0) b0 = to_vec(*beta0, pb.dim(), "beta0");
        const FitOptions opt{tol, max_iter, n_threads};
        MnState st;
        run_released([&] { st = mn_fit(pb, opt, b0 ? &*b0 : nullptr, false); });
        MnFitOut out;
        fill_mn_fit(out, pb, st);
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("tol"),
      py::arg("max_iter"), py::arg("n_threads"), py::arg("beta0") = py::none(),
      "Damped Newton fit of an L2-penalized multinomial logistic regression.");

  m.def(
      "multinomial_loo",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const std::string& method, double tol,
         Index max_iter, int n_threads, const std::optional<py::array>& beta0, bool refit,
         bool return_gradient,
         const std::optional<py::array_t<Index, py::array::c_style | py::array::forcecast>>&
             subset) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        int code = -1;
        if (method == "alo") code = 0;
        if (method == "if") code = 1;
        if (method == "lemma3") code = 2;
        if (method == "exact") code = 3;
        if (code < 0) throw py::value_error("unknown method '" + method + "'");
        std::vector<Index> sub;
        if (subset) {
          if (code != 3) throw py::value_error("subset= needs method='exact'");
          sub.assign(subset->data(), subset->data() + subset->size());
        }
        const SampleSet set{subset ? &sub : nullptr};
        std::optional<Vec> b0;
        if (beta0) b0 = to_vec(*beta0, pb.dim(), "beta0");
        const FitOptions opt{tol, refit ? max_iter : 0, n_threads};
        const Index n = set.size(pb.n());
        Vec pred(n * K), loss(n), lev, det, grad;
        if (code < 3) {
          lev.resize(n * K * K);
          det.resize(n);
        }
        if (return_gradient) grad.resize(pb.X.p);
        MnState st;
        Index failed = 0;
        run_released([&] {
          st = mn_fit(pb, opt, b0 ? &*b0 : nullptr, code < 3);
          if (code < 3) {
            mn_loo(pb, st, code, pred.data(), loss.data(), lev.data(), det.data(),
                   return_gradient ? grad.data() : nullptr, n_threads);
          } else {
            FitOptions ex{tol, max_iter, n_threads};
            failed = mn_exact(pb, st, ex, pred.data(), loss.data(), set);
          }
        });
        MnLooOut out;
        fill_mn_fit(out, pb, st);
        py::array_t<double> p2({n, K});
        std::copy(pred.data(), pred.data() + pred.size(), p2.mutable_data());
        out.predictions = p2;
        out.losses = move_to_numpy(std::move(loss));
        out.n_not_converged = failed;
        if (code < 3) {
          py::array_t<double> l3({n, K, K});
          std::copy(lev.data(), lev.data() + lev.size(), l3.mutable_data());
          out.leverages = l3;
          out.det = move_to_numpy(std::move(det));
        }
        if (return_gradient) out.gradient = to_numpy(grad);
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("method"),
      py::arg("tol"), py::arg("max_iter"), py::arg("n_threads"), py::arg("beta0") = py::none(),
      py::arg("refit") = true, py::arg("return_gradient") = false, py::arg("subset") = py::none(),
      "Multinomial leave-one-out (alo, if, lemma3 or exact) with a K x K block per sample; "
      "refit=False evaluates at beta0 (bring your own fit); subset= (exact only): the "
      "refits without those samples, outputs in their order.");
}

}  // namespace aloocv::bind
