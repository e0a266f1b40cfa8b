#include "aloocv/enet.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

FitState fit(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec* beta0) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n());
    return pb.has_l1() ? enet_fit<Loss>(pb, opt, beta0) : newton_fit<Loss>(pb, opt, beta0);
  });
}

FitState prepare(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec& beta) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n());
    return pb.has_l1() ? enet_prepare_at<Loss>(pb, beta, opt) : prepare_at<Loss>(pb, beta, opt);
  });
}

}  // namespace aloocv
