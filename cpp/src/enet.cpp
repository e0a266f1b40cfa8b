#include "aloocv/enet.hpp"

#include "aloocv/losses.hpp"

namespace aloocv {

// The one compiled copy of the elastic-net fit layer per loss (declared extern in enet.hpp).
#define ALOOCV_ENET_DEFINE(T) ALOOCV_ENET_INSTANCES(, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_ENET_DEFINE)
#undef ALOOCV_ENET_DEFINE

EnetSumsFit enet_sums_fit(SumsSource& source, LossKind loss, const Vec& lam, const Vec& l1,
                          bool intercept, const Vec& beta0, double weight_sum,
                          const FitOptions& opt) {
  const Index off = intercept ? 1 : 0, p = lam.size(), p1 = p + off;
  if (l1.size() != p) {
    throw InvalidInput("l1 has " + std::to_string(l1.size()) + " entries, expected " +
                       std::to_string(p));
  }
  if (beta0.size() != p1) {
    throw InvalidInput("beta0 has " + std::to_string(beta0.size()) + " entries, expected " +
                       std::to_string(p1));
  }
  if (!(weight_sum > 0.0)) throw InvalidInput("the sum of the weights must be positive");
  const bool cc = dispatch_loss(loss, [](auto L) { return decltype(L)::constant_curvature; });
  Vec pen = Vec::Zero(p1), l1_1 = Vec::Zero(p1);
  pen.tail(p) = lam;
  l1_1.tail(p) = l1;
  detail::EnetSumsModel m(source, pen, l1_1, beta0);
  if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  const detail::EnetDrive r = detail::enet_drive(m, pen, l1_1, off, cc, weight_sum, opt);
  EnetSumsFit out;
  detail::enet_active_hessian(m, r, pen, off, cc, true, out.hessian, out.active);
  out.beta = m.beta();
  out.grad = m.grad();
  out.objective = m.objective();
  out.n_iter = r.n_iter;
  out.hessian_passes = m.hessian_passes();
  out.n_evals = m.n_evals();
  out.converged = r.converged;
  out.grad_norm = r.grad_norm;
  return out;
}

}  // namespace aloocv
