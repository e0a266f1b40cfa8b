// Exact leave-one-out refits on the matrix-free route, advanced in lockstep
// (matrix_free.hpp, cg_refits; docs/math/matrix_free.md, "Exact refits").
#include <algorithm>
#include <cmath>

#include "aloocv/matrix_free.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

namespace {

// One refit of a batch: the problem without sample `row` (newton_drive's state for cg_fit's
// model, CgModel in matrix_free.cpp).
struct Refit {
  Index row = 0;
  double scale = 1.0;  // the weight sum without the sample
  Vec beta, eta, g, d, grad, step, eta_try;
  double f = 0.0, gn = 0.0, dec = 0.0;
  detail::YPartCache yc;
  detail::StallDetector stall;
  Index n_iter = 0, attempts = 0;
  bool done = false;
};

// Compiled once: the loss enters through its O(n) passes (detail::LossPasses).
class Lockstep {
 public:
  Lockstep(const detail::LossPasses& loss, const mf::Point& pt, const CgFitOptions& opt)
      : loss_(loss),
        pb_(pt.pb),
        op_(pt.op),
        opt_(opt),
        nt_(pt.nt),
        minv_(pt.minv),
        head_(pt.head()) {}

  // Refits rows[0..m) from the columns of B0 (p1 x m); results into out at `first`.
  void run(const Index* rows, Index m, const RowMat& B0, CgRefits& out, Index first) {
    const double sw = pb_.weight_sum();
    refits_.assign(static_cast<size_t>(m), Refit{});
    RowMat E;
    op_.forward(B0, E);
    for (Index k = 0; k < m; ++k) {
      Refit& r = refits_[static_cast<size_t>(k)];
      r.row = rows[k];
      r.scale = sw - pb_.weight(r.row);
      r.beta = B0.col(k);
      r.eta = E.col(k);
      pb_.add_offset(r.eta.data());
      r.yc = loss_.y_part_cache(pb_);
      r.g.resize(pb_.n());
      r.d.resize(pb_.n());
      r.f = evaluate(r);
    }
    std::vector<Index> all(static_cast<size_t>(m));
    for (Index k = 0; k < m; ++k) all[static_cast<size_t>(k)] = k;
    gradients(all);
    for (Refit& r : refits_) {
      r.done = r.gn / r.scale <= opt_.fit.tol;  // check_first
    }
    while (true) {
      interrupt::check();
      std::vector<Index> act;
      for (Index k = 0; k < m; ++k) {
        if (!refits_[static_cast<size_t>(k)].done) act.push_back(k);
      }
      if (act.empty()) break;
      directions(act);
      moves(act);
    }
    for (Index k = 0; k < m; ++k) {
      const Refit& r = refits_[static_cast<size_t>(k)];
      out.predictions[first + k] = r.eta[r.row];
      out.converged[static_cast<size_t>(first + k)] = r.gn / r.scale <= opt_.fit.tol;
      out.n_iter[static_cast<size_t>(first + k)] = r.n_iter;
    }
    out.cg_iterations += cg_iterations_;
    cg_iterations_ = 0;
  }

 private:
  // f, g = w l', d = w l'' at the refit's eta (its sample's weight 0)
  double evaluate(Refit& r) {
    return loss_.derivatives_objective(pb_, r.eta.data(), r.g.data(), r.d.data(), r.beta, nt_,
                                       r.row, detail::cache_of(r.yc));
  }

  // the gradients X~^T g_k + pen .* beta_k of the refits `idx` (one block product)
  void gradients(const std::vector<Index>& idx) {
    const Index m = Index(idx.size());
    RowMat G(pb_.n(), m), out;
    for (Index j = 0; j < m; ++j) G.col(j) = refits_[static_cast<size_t>(idx[j])].g;
    op_.adjoint(G, out);
    for (Index j = 0; j < m; ++j) {
      Refit& r = refits_[static_cast<size_t>(idx[j])];
      r.grad = out.col(j);
      r.grad.array() += pb_.pen.array() * r.beta.array();
      if (!r.grad.allFinite()) {
        throw InvalidInput(
            "the gradient is not finite (overflow of the loss at extreme linear predictors); "
            "rescale X or increase the penalty");
      }
      r.gn = r.grad.cwiseAbs().maxCoeff();
    }
  }

  // each active refit's Newton direction at its point, by one block PCG solve to each
  // one's forcing tolerance (CgModel::direction)
  void directions(const std::vector<Index>& act) {
    const Index m = Index(act.size()), n = pb_.n();
    RowMat D(n, m), B(pb_.p1(), m), S;
    mf::CgOptions o;
    o.max_iter = opt_.max_cg;
    if (!head_.empty()) o.head = &head_;
    o.col_rtol.resize(m);
    for (Index j = 0; j < m; ++j) {
      const Refit& r = refits_[static_cast<size_t>(act[j])];
      D.col(j) = r.d;
      B.col(j) = -r.grad;
      const double floor = kResidualShare * opt_.fit.tol * r.scale / r.grad.norm();
      o.col_rtol[j] = std::min(0.5, std::max(std::sqrt(r.gn / r.scale), floor));
    }
    const mf::MultiHessianOp H{op_, D, pb_.pen};
    cg_iterations_ += mf::block_pcg(H, minv_, B, S, o).iterations;
    for (Index j = 0; j < m; ++j) {
      Refit& r = refits_[static_cast<size_t>(act[j])];
      r.step = S.col(j);
      if (!(-r.grad.dot(r.step) > 0.0)) r.step = -r.grad.cwiseProduct(minv_);  // no curvature
      r.dec = -r.grad.dot(r.step);
    }
  }

  // the Armijo search of each active refit along its step (X~ step: one block product for
  // all), then the gradients at the points reached (one more); newton_drive's tests
  void moves(const std::vector<Index>& act) {
    const Index m = Index(act.size());
    RowMat Sm(pb_.p1(), m), XS;
    for (Index j = 0; j < m; ++j) Sm.col(j) = refits_[static_cast<size_t>(act[j])].step;
    op_.forward(Sm, XS);
    std::vector<Index> moved;
    std::vector<double> decs;
    for (Index j = 0; j < m; ++j) {
      Refit& r = refits_[static_cast<size_t>(act[j])];
      ++r.attempts;
      double t = 0.0, f_try = r.f;
      if (r.dec > 0.0) {
        r.eta_try.resize(pb_.n());
        t = detail::armijo(r.f, r.dec, [&](double s) {
          r.eta_try = r.eta + s * XS.col(j);
          f_try = loss_.objective(pb_, r.eta_try.data(), r.beta + s * r.step, nt_, r.row,
                                  detail::cache_of(r.yc));
          return f_try;
        });
      }
      if (t == 0.0) {  // no decrease along a fresh Newton direction: stalled
        r.done = true;
        continue;
      }
      ++r.n_iter;
      r.beta += t * r.step;
      r.eta.swap(r.eta_try);
      // the objective there is the accepted trial's (derivatives_objective's value: the same
      // terms and sums); the loss's derivatives without its value
      r.f = f_try;
      loss_.derivatives(pb_, r.eta.data(), r.g.data(), r.d.data(), nt_, r.row);
      moved.push_back(act[j]);
      decs.push_back(r.dec);
    }
    if (moved.empty()) return;
    gradients(moved);
    for (size_t j = 0; j < moved.size(); ++j) {
      Refit& r = refits_[static_cast<size_t>(moved[j])];
      const bool stalled = r.stall.update(decs[j], r.f, r.gn);
      r.done = stalled || r.gn / r.scale <= opt_.fit.tol ||
               r.attempts >= std::max<Index>(1, opt_.fit.max_iter);
    }
  }

  const detail::LossPasses loss_;
  const Problem& pb_;
  const mf::Operator& op_;
  const CgFitOptions& opt_;
  int nt_;
  std::vector<Refit> refits_;
  const Vec& minv_;  // the Point's preconditioner (at beta)
  const mf::HeadBlock& head_;
  Index cg_iterations_ = 0;
};

}  // namespace

CgRefits cg_refits(const mf::Point& pt, const CgFitOptions& opt, const Index* rows, Index r,
                   const RowMat* starts) {
  const Problem& pb = pt.pb;
  if (pb.has_l1()) {
    throw InvalidInput(
        "the matrix-free route fits smooth (L2) penalties; an L1 term uses solver='primal'");
  }
  const Index n = pb.n(), p1 = pb.p1();
  if (starts && (starts->rows() != r || starts->cols() != p1)) {
    throw InvalidInput("cg_refits: starts must be (len(rows), p1)");
  }
  for (Index k = 0; k < r; ++k) {
    if (rows[k] < 0 || rows[k] >= n) throw InvalidInput("cg_refits: a row is out of range");
  }
  CgRefits out;
  out.predictions.resize(r);
  out.converged.assign(static_cast<size_t>(r), 0);
  out.n_iter.assign(static_cast<size_t>(r), 0);
  const Index passes0 = pt.op.passes;
  dispatch_loss(pt.loss, [&](auto L) {
    using Loss = decltype(L);
    Lockstep lock(detail::loss_passes<Loss>(), pt, opt);
    RowMat B0;
    for (Index k0 = 0; k0 < r; k0 += kBatchRefits) {
      const Index m = std::min(kBatchRefits, r - k0);
      B0.resize(p1, m);
      for (Index k = 0; k < m; ++k)
        B0.col(k) = starts ? Vec(starts->row(k0 + k).transpose()) : pt.beta;
      lock.run(rows + k0, m, B0, out, k0);
    }
  });
  out.passes = pt.op.passes - passes0;
  return out;
}

}  // namespace aloocv
