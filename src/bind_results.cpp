// The result classes of aloocv._core (src/results.hpp): read-only properties, a docstring
// each and a repr of the scalar fields. Registered before the functions that return them.
// No math here.
#include <string>
#include <utility>
#include <vector>

#include "results.hpp"

namespace aloocv::bind {

namespace {

// __repr__: the class name and the scalar fields, e.g. FitResult(n_iter=5, converged=True).
template <class C>
void add_repr(C& cls, std::vector<std::string> scalars) {
  cls.def("__repr__", [scalars = std::move(scalars)](const py::object& self) {
    std::string s = py::str(self.attr("__class__").attr("__name__"));
    s += '(';
    for (size_t k = 0; k < scalars.size(); ++k) {
      if (k) s += ", ";
      s += scalars[k] + "=" + std::string(py::repr(self.attr(scalars[k].c_str())));
    }
    return s + ')';
  });
}

template <class T>
void fit_fields(py::class_<T>& c) {
  c.def_readonly("coef", &T::coef, "(p,) coefficients (without the intercept).")
      .def_readonly("intercept", &T::intercept, "The intercept (0.0 when not fitted).")
      .def_readonly("n_iter", &T::n_iter, "Newton iterations.")
      .def_readonly("converged", &T::converged, "Whether the fit reached tol.")
      .def_readonly("objective", &T::objective, "The penalized objective at the fit.")
      .def_readonly("grad_norm", &T::grad_norm, "max |gradient| / sum(w) at the fit.");
}

const std::vector<std::string> kFitScalars = {
    "intercept",      "n_iter",        "converged",           "objective", "grad_norm",
    "hessian_passes", "matvec_passes", "fused_end_fallbacks", "stale_eta"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

void bind_results(py::module_& m) {
  py::class_<FitOut> fit(m, "FitResult", "A fitted GLM (the core's Newton or elastic-net fit).");
  fit_fields(fit);
  fit.def_readonly("hessian_passes", &FitOut::hessian_passes, "Full Hessian passes over X.")
      .def_readonly("single_hessian_passes", &FitOut::single_hessian_passes,
                    "Of those, the Hessians accumulated from float32 blocks.")
      .def_readonly("sampled_hessian_passes", &FitOut::sampled_hessian_passes,
                    "Of those, the Hessians estimated from every k-th row.")
      .def_readonly("matvec_passes", &FitOut::matvec_passes,
                    "O(n p) passes over X (products X~ v, X~^T v).")
      .def_readonly("fused_end_fallbacks", &FitOut::fused_end_fallbacks,
                    "Fused ends whose guard fell back to a fresh Newton step.")
      .def_readonly("stale_eta", &FitOut::stale_eta,
                    "max |change of eta| in the step taken after the last Hessian.")
      .def_readonly("cg_iterations", &FitOut::cg_iterations,
                    "Conjugate-gradient iterations (Newton-CG fits of the matrix-free route).");
  add_repr(fit, kFitScalars);

  py::class_<RandomLeveragesOut> rl(
      m, "RandomLeveragesResult",
      "Per-group Hutchinson estimates of the leverages (docs/math/matrix_free.md).");
  rl.def_readonly("plain", &RandomLeveragesOut::plain,
                  "(n, G) group means of z_ik (A z_k)_i, A = X~ H^{-1} X~^T.")
      .def_readonly("control", &RandomLeveragesOut::control,
                    "(n, G) group means of z_ik ((A - A0) z_k)_i, A0 = X~ diag(H)^{-1} X~^T.")
      .def_readonly("diag0", &RandomLeveragesOut::diag0, "(n,) the diagonal of A0.")
      .def_readonly("eta", &RandomLeveragesOut::eta, "(n,) the linear predictor at the fit.")
      .def_readonly("g", &RandomLeveragesOut::g, "(n,) w_i l'_i at the fit.")
      .def_readonly("d", &RandomLeveragesOut::d, "(n,) w_i l''_i at the fit.")
      .def_readonly("cg_iterations", &RandomLeveragesOut::cg_iterations,
                    "Conjugate-gradient iterations of the probe solves.")
      .def_readonly("passes", &RandomLeveragesOut::passes, "Products with X~ or X~^T.")
      .def_readonly("converged", &RandomLeveragesOut::converged,
                    "Whether every probe solve reached its tolerance.")
      .def_readonly("worst_residual", &RandomLeveragesOut::worst_residual,
                    "The largest relative residual of the probe solves.")
      .def_readonly("dual", &RandomLeveragesOut::dual,
                    "Whether the probes ran in the dual form (CG on n-vectors).")
      .def_readonly("exact_rows", &RandomLeveragesOut::exact_rows,
                    "Rows whose leverages the dual form computed exactly.");

  py::class_<LooOut, FitOut> loo(m, "LooResult",
                                 "A fit and its leave-one-out values (FitResult's fields and "
                                 "the per-sample arrays).");
  loo.def_readonly("losses", &LooOut::losses, "Per-sample leave-one-out losses.")
      .def_readonly("predictions", &LooOut::predictions, "Leave-one-out linear predictors eta~_i.")
      .def_readonly("leverages", &LooOut::leverages, "Leverages h_i (None for 'exact').")
      .def_readonly("downdate", &LooOut::downdate, "1 - d_i h_i (None for 'exact').")
      .def_readonly("rcond", &LooOut::rcond,
                    "Reciprocal condition estimate of the formulas' Hessian factor (None for "
                    "'exact' or without one).")
      .def_readonly("n_not_converged", &LooOut::n_not_converged,
                    "Exact refits that did not reach tol (the singular ones included).")
      .def_readonly("n_singular", &LooOut::n_singular,
                    "Exact refits whose leave-one-out Hessian is singular (no unique "
                    "minimizer; their losses and predictions are NaN).")
      .def_readonly("singular_samples", &LooOut::singular_samples,
                    "The samples of those refits, ascending (None unless 'exact').")
      .def_readonly("grad_l2", &LooOut::grad_l2,
                    "d mean / d l2 weights, per feature (None without the hypergradient).")
      .def_readonly("grad_l1", &LooOut::grad_l1,
                    "d mean / d l1 weights, per feature (None without the hypergradient).")
      .def_readonly("grad_along", &LooOut::grad_along,
                    "d mean / dt at (l2, l1) + t (along_l2, along_l1): the derivative along "
                    "the direction given to TuneState.alo (None otherwise; grad_l2 and grad_l1 "
                    "are then None).")
      .def_readonly("eta", &LooOut::eta,
                    "The fit's linear predictor X~ beta (+ offset) as the fit holds it (None "
                    "where the route does not give it).");
  add_repr(loo, with(kFitScalars, {"rcond", "n_not_converged", "n_singular"}));

  py::class_<AloTangentsOut, LooOut> tan(
      m, "AloTangentsResult",
      "ALO at a fit, its exact gradient and the gradient's directional derivatives.");
  tan.def_readonly("tangent_l2", &AloTangentsOut::tangent_l2,
                   "(p, m) derivatives of grad_l2 along the m directions.")
      .def_readonly("tangent_l1", &AloTangentsOut::tangent_l1,
                    "(p, m) derivatives of grad_l1 along the m directions.");
  add_repr(tan, with(kFitScalars, {"rcond", "n_not_converged"}));

  py::class_<KFoldOut, FitOut> kf(m, "KFoldResult",
                                  "The full fit and the held-out values of K-fold or "
                                  "held-out sets (concatenated set after set).");
  kf.def_readonly("losses", &KFoldOut::losses, "Held-out losses.")
      .def_readonly("predictions", &KFoldOut::predictions, "Held-out linear predictors.")
      .def_readonly("n_not_converged", &KFoldOut::n_not_converged,
                    "Fold refits or steps that did not converge.")
      .def_readonly("n_woodbury", &KFoldOut::n_woodbury,
                    "Folds downdated in the q x q Woodbury form.")
      .def_readonly("seconds_fit", &KFoldOut::seconds_fit, "Wall time of the full fit.")
      .def_readonly("seconds_folds", &KFoldOut::seconds_folds,
                    "Wall time of the fold downdates or refits.");
  add_repr(kf,
           with(kFitScalars, {"n_not_converged", "n_woodbury", "seconds_fit", "seconds_folds"}));

  py::class_<DualOut> dual(m, "DualResult",
                           "A fit through the n x n dual system, with its leave-one-out "
                           "values when asked for (None otherwise).");
  fit_fields(dual);
  dual.def_readonly("alpha", &DualOut::alpha, "(n,) dual coefficients.")
      .def_readonly("losses", &DualOut::losses, "Leave-one-out losses (None without LOO).")
      .def_readonly("predictions", &DualOut::predictions,
                    "Leave-one-out linear predictors (None without LOO).")
      .def_readonly("leverages", &DualOut::leverages,
                    "Leverages h_i (None without LOO or for 'exact').")
      .def_readonly("downdate", &DualOut::downdate,
                    "1 - d_i h_i (None without LOO or for 'exact').")
      .def_readonly("n_not_converged", &DualOut::n_not_converged,
                    "Exact refits that did not reach tol, the singular ones included (None "
                    "without LOO).")
      .def_readonly("n_singular", &DualOut::n_singular,
                    "Exact refits whose leave-one-out Hessian is singular (None without LOO).")
      .def_readonly("singular_samples", &DualOut::singular_samples,
                    "The samples of those refits, ascending (None unless exact LOO).")
      .def_readonly("grad_l2", &DualOut::grad_l2,
                    "d mean / d l2 weights (None without the hypergradient).")
      .def_readonly("grad_l1", &DualOut::grad_l1,
                    "d mean / d l1 weights (None without the hypergradient).");
  add_repr(dual, {"intercept", "n_iter", "converged", "objective", "grad_norm", "n_not_converged",
                  "n_singular"});

  py::class_<RidgePathOut> path(m, "RidgePathResult",
                                "Exact ridge leave-one-out along a grid of k lambdas.");
  path.def_readonly("losses", &RidgePathOut::losses, "(n, k) leave-one-out losses.")
      .def_readonly("predictions", &RidgePathOut::predictions, "(n, k) leave-one-out predictions.")
      .def_readonly("coef", &RidgePathOut::coef, "(p, k) coefficients.")
      .def_readonly("intercept", &RidgePathOut::intercept, "(k,) intercepts.");
  add_repr(path, {});

  py::class_<RidgeSpectrumOut> spec(
      m, "RidgeSpectrumResult",
      "Eigendecomposition X_c^T X_c = V diag(s) V^T and the rotated responses C = V^T X_c^T Z.");
  spec.def_readonly("s", &RidgeSpectrumOut::s, "(p,) eigenvalues.")
      .def_readonly("V", &RidgeSpectrumOut::V, "(p, p) eigenvectors.")
      .def_readonly("C", &RidgeSpectrumOut::C, "(p, m) V^T X_c^T Z.")
      .def_readonly("mu", &RidgeSpectrumOut::mu, "(p,) the centering (zeros without intercept).");
  add_repr(spec, {});

  py::class_<MultiRidgeScoresOut> sc(m, "MultiRidgeScores",
                                     "Leave-one-out residual sums of many responses along a "
                                     "grid of k lambdas.");
  sc.def_readonly("s2", &MultiRidgeScoresOut::s2, "(k, T) sum_i w_i e_it^2.")
      .def_readonly("s4", &MultiRidgeScoresOut::s4, "(k, T) sum_i w_i e_it^4.")
      .def_readonly("rank", &MultiRidgeScoresOut::rank, "Spectral filters evaluated.")
      .def_readonly("passes", &MultiRidgeScoresOut::passes,
                    "Their cost in GEMMs of inner dimension p.");
  add_repr(sc, {"rank", "passes"});

  py::class_<MultiRidgeSolutionOut> sol(m, "MultiRidgeSolution",
                                        "Ridge coefficients of many responses, one lambda each.");
  sol.def_readonly("coef", &MultiRidgeSolutionOut::coef, "(p, T) coefficients.")
      .def_readonly("intercept", &MultiRidgeSolutionOut::intercept, "(T,) intercepts.")
      .def_readonly("predictions", &MultiRidgeSolutionOut::predictions,
                    "(n, T) leave-one-out predictions (None unless asked for).");
  add_repr(sol, {});

  const std::vector<std::string> mn_scalars = {"n_iter",    "converged",      "objective",
                                               "grad_norm", "hessian_passes", "hessian_products"};
  py::class_<MnFitOut> mnfit(m, "MultinomialFitResult", "A multinomial logistic fit.");
  mnfit.def_readonly("coef", &MnFitOut::coef, "(K, p) coefficients.")
      .def_readonly("intercept", &MnFitOut::intercept, "(K,) intercepts (zeros when not fitted).")
      .def_readonly("n_iter", &MnFitOut::n_iter, "Newton iterations.")
      .def_readonly("converged", &MnFitOut::converged, "Whether the fit reached tol.")
      .def_readonly("objective", &MnFitOut::objective, "The penalized objective at the fit.")
      .def_readonly("grad_norm", &MnFitOut::grad_norm, "max |gradient| / sum(w) at the fit.")
      .def_readonly("hessian_passes", &MnFitOut::hessian_passes, "Full Hessian passes over X.")
      .def_readonly("hessian_products", &MnFitOut::hessian_products,
                    "Hessian-vector products of the Newton-CG steps.");
  add_repr(mnfit, mn_scalars);

  py::class_<MnLooOut, MnFitOut> mnloo(m, "MultinomialLooResult",
                                       "A multinomial fit and its leave-one-out values.");
  mnloo.def_readonly("predictions", &MnLooOut::predictions, "(n, K) leave-one-out class scores.")
      .def_readonly("losses", &MnLooOut::losses, "(n,) leave-one-out cross-entropies.")
      .def_readonly("n_not_converged", &MnLooOut::n_not_converged,
                    "Exact refits that did not reach tol.")
      .def_readonly("leverages", &MnLooOut::leverages, "(n, K, K) blocks K_i (None for 'exact').")
      .def_readonly("det", &MnLooOut::det, "(n,) det(I - D_i K_i) (None for 'exact').")
      .def_readonly("gradient", &MnLooOut::gradient,
                    "(p,) d mean / d l2 weights (None unless asked for).");
  add_repr(mnloo, with(mn_scalars, {"n_not_converged"}));

  py::class_<ChunkSumsOut> cs(m, "ChunkSumsResult", "One row chunk's sums at beta.");
  cs.def_readonly("loss", &ChunkSumsOut::loss, "sum w l.")
      .def_readonly("weight", &ChunkSumsOut::weight, "sum w.")
      .def_readonly("grad", &ChunkSumsOut::grad, "X~^T (w l').")
      .def_readonly("hess", &ChunkSumsOut::hess,
                    "X~^T diag(w l'') X~, unpenalized (None unless asked for).")
      .def_readonly("step_max", &ChunkSumsOut::step_max,
                    "max |X~ step| (0.0 without a step; None for the multinomial sums).");
  add_repr(cs, {"loss", "weight", "step_max"});

  py::class_<ChunkLooOut> cl(m, "ChunkLooResult",
                             "One row chunk's leave-one-out values given the whole problem's "
                             "fit and Hessian.");
  cl.def_readonly("eta", &ChunkLooOut::eta, "Linear predictors at the fit.")
      .def_readonly("losses", &ChunkLooOut::losses, "Leave-one-out losses.")
      .def_readonly("predictions", &ChunkLooOut::predictions, "Leave-one-out predictions.")
      .def_readonly("leverages", &ChunkLooOut::leverages, "Leverages (blocks K_i: multinomial).")
      .def_readonly("downdate", &ChunkLooOut::downdate,
                    "1 - d_i h_i (det(I - D_i K_i): multinomial).")
      .def_readonly("r", &ChunkLooOut::r,
                    "X~^T (c A) of the exact hypergradient (None without gradient or for the "
                    "multinomial loss).")
      .def_readonly("S", &ChunkLooOut::S,
                    "The hypergradient's first accumulation (None without gradient).");
  add_repr(cl, {});

  py::class_<ChunkRefitsOut> cr(m, "ChunkRefitsResult",
                                "One row chunk's sums for a batch of B leave-one-out refits.");
  cr.def_readonly("loss", &ChunkRefitsOut::loss, "(B,) sum w l of each refit.")
      .def_readonly("grad", &ChunkRefitsOut::grad, "(p1, B) X~^T (w l') of each refit.")
      .def_readonly("hess", &ChunkRefitsOut::hess,
                    "(p1, p1, m) X~^T D X~ of the refits hess_cols.");
  add_repr(cr, {});

  py::class_<SumsFitOut> sf(m, "SumsFitResult",
                            "A Newton fit over a sums source (cpp/include/aloocv/sums_model.hpp).");
  sf.def_readonly("beta", &SumsFitOut::beta, "(p1,) coefficients, intercept first.")
      .def_readonly("grad", &SumsFitOut::grad, "(p1,) penalized gradient at beta.")
      .def_readonly("hessian", &SumsFitOut::hessian, "The penalized Hessian of the held factor.")
      .def_readonly("unpenalized_hessian", &SumsFitOut::unpenalized_hessian,
                    "Its unpenalized part X~^T D X~.")
      .def_readonly("hessian_at_point", &SumsFitOut::hessian_at_point,
                    "Whether the held factor is the Hessian at beta.")
      .def_readonly("objective", &SumsFitOut::objective, "The penalized objective at beta.")
      .def_readonly("n_iter", &SumsFitOut::n_iter, "Newton iterations.")
      .def_readonly("hessian_passes", &SumsFitOut::hessian_passes, "Hessians factored.")
      .def_readonly("n_evals", &SumsFitOut::n_evals, "Evaluations of the source.")
      .def_readonly("converged", &SumsFitOut::converged, "Whether the fit reached tol.")
      .def_readonly("stalled", &SumsFitOut::stalled, "Whether rounding stalled the fit.")
      .def_readonly("grad_norm", &SumsFitOut::grad_norm, "max |gradient| / weight_sum.")
      .def_readonly("loss", &SumsFitOut::loss, "The source's sum w l at beta (unpenalized).")
      .def_readonly("loss_grad", &SumsFitOut::loss_grad,
                    "(p1,) the source's X~^T (w l') at beta (unpenalized).")
      .def_readonly("end_guard_step", &SumsFitOut::end_guard_step,
                    "(p1,) the Newton step of the end Hessian whose move max |X~ step| the "
                    "caller measures (defer_end_guard), or None when no guard is pending.")
      .def_readonly("end_guard_dec", &SumsFitOut::end_guard_dec,
                    "The decrement -grad^T step of that step (0 when none is pending).");
  add_repr(sf, {"hessian_at_point", "objective", "n_iter", "hessian_passes", "n_evals", "converged",
                "stalled", "grad_norm"});

  py::class_<EnetSumsFitOut> ef(
      m, "EnetSumsFitResult",
      "An elastic-net fit over a sums source (cpp/include/aloocv/enet.hpp).");
  ef.def_readonly("beta", &EnetSumsFitOut::beta, "(p1,) coefficients, intercept first.")
      .def_readonly("grad", &EnetSumsFitOut::grad, "Gradient of the smooth part at beta.")
      .def_readonly("hessian", &EnetSumsFitOut::hessian,
                    "The penalized Hessian at beta on the intercept (first, if fitted) and the "
                    "active columns.")
      .def_readonly("active", &EnetSumsFitOut::active,
                    "Feature indices of the nonzero coefficients.")
      .def_readonly("objective", &EnetSumsFitOut::objective, "Loss + L2 + L1 at beta.")
      .def_readonly("n_iter", &EnetSumsFitOut::n_iter, "Iterations.")
      .def_readonly("hessian_passes", &EnetSumsFitOut::hessian_passes,
                    "Evaluations with a Hessian.")
      .def_readonly("n_evals", &EnetSumsFitOut::n_evals, "Evaluations of the source.")
      .def_readonly("converged", &EnetSumsFitOut::converged, "Whether the fit reached tol.")
      .def_readonly("grad_norm", &EnetSumsFitOut::grad_norm, "KKT violation / weight_sum.");
  add_repr(ef, {"objective", "n_iter", "hessian_passes", "n_evals", "converged", "grad_norm"});
}

}  // namespace aloocv::bind
