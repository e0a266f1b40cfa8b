#include "aloocv/enet.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

// The one compiled copy of the Newton fit layer per loss (declared extern in newton.hpp).
#define ALOOCV_NEWTON_DEFINE(T) ALOOCV_NEWTON_INSTANCES(, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_NEWTON_DEFINE)
#undef ALOOCV_NEWTON_DEFINE

FitState fit(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec* beta0) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return pb.has_l1() ? enet_fit<Loss>(pb, opt, beta0) : newton_fit<Loss>(pb, opt, beta0);
  });
}

FitState fit_coefficients(const Problem& pb, LossKind loss, const FitOptions& opt,
                          const Vec* beta0) {
  if (!pb.has_l1()) return fit(pb, loss, opt, beta0);
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return enet_fit<Loss>(pb, opt, beta0, -1, false);
  });
}

FitState prepare(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec& beta) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return pb.has_l1() ? enet_prepare_at<Loss>(pb, beta, opt) : prepare_at<Loss>(pb, beta, opt);
  });
}

FitState fit_from(const Problem& pb, LossKind loss, const FitOptions& opt, const FitState& prev) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    if (pb.has_l1())
      return enet_fit<Loss>(pb, opt, prev.beta.size() == pb.p1() ? &prev.beta : nullptr);
    return path_fit<Loss>(pb, opt, prev);
  });
}

double step(const Problem& pb, LossKind loss, FitState& st, bool refresh, int n_threads) {
  if (pb.has_l1()) throw InvalidInput("a single Newton step needs a smooth (L2) penalty");
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    settle_deferred_end<Loss>(pb, st, n_threads);  // a step from the settled point
    return newton_step<Loss>(pb, st, refresh, n_threads);
  });
}

bool settle_end_guard(const Problem& pb, LossKind loss, FitState& st, int n_threads) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    return settle_deferred_end<Loss>(pb, st, n_threads);
  });
}

}  // namespace aloocv
