// The matrix-free route for the multinomial loss (matrix_free_multinomial.hpp;
// docs/math/matrix_free.md, "The multinomial loss").
#include "aloocv/matrix_free_multinomial.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "aloocv/newton_driver.hpp"

namespace aloocv {

namespace {

using ConstRowMap = Eigen::Map<const RowMat>;

// beta (class-major, K p1) as the p1 x K block and back.
RowMat to_block(const MnProblem& pb, const Vec& beta) {
  return Eigen::Map<const Mat>(beta.data(), pb.p1(), pb.K);
}
Vec to_class_major(const RowMat& B) {
  Vec out(B.size());
  Eigen::Map<Mat>(out.data(), B.rows(), B.cols()) = B;
  return out;
}

// The index of entry (a, b), a <= b, of a packed symmetric K x K block.
inline Index packed_at(Index K, Index a, Index b) { return a * K - a * (a - 1) / 2 + (b - a); }

// The state of the softmax at the scores: mu (n x K), G = w (mu - e_y) (n x K), and the
// objective's data part sum_i w_i ce_i.
struct Softmax {
  RowMat mu, G;
  double loss = 0.0;
};

Softmax softmax_at(const MnProblem& pb, const RowMat& eta, int nt) {
  const Index n = pb.n(), K = pb.K;
  Softmax s;
  s.mu.resize(n, K);
  s.G.resize(n, K);
  s.loss = parallel_sum(n, nt, [&](Index i) {
    const double w = pb.weight(i);
    const double lse = mn_softmax(eta.data() + i * K, K, s.mu.data() + i * K);
    const Index y = static_cast<Index>(pb.y[i]);
    for (Index a = 0; a < K; ++a) s.G(i, a) = w * (s.mu(i, a) - (a == y ? 1.0 : 0.0));
    return w == 0.0 ? 0.0 : w * (lse - eta(i, y));
  });
  return s;
}

// sum_i w_i ce(y_i, eta_i) alone.
double data_loss(const MnProblem& pb, const RowMat& eta, int nt) {
  const Index K = pb.K;
  return parallel_sum(pb.n(), nt, [&](Index i) {
    const double w = pb.weight(i);
    if (w == 0.0) return 0.0;
    double m = eta(i, 0);
    for (Index a = 1; a < K; ++a) m = std::max(m, eta(i, a));
    double s = 0.0;
    for (Index a = 0; a < K; ++a) s += std::exp(eta(i, a) - m);
    return w * (m + std::log(s) - eta(i, static_cast<Index>(pb.y[i])));
  });
}

// 1/2 sum_j pen_j |B_j|^2 + tau/2 (sum_a B_0a)^2 (the gauge, with an intercept).
double penalty(const MnProblem& pb, const RowMat& B) {
  double f = 0.0;
  for (Index j = 0; j < B.rows(); ++j) f += pb.pen[j] * B.row(j).squaredNorm();
  const double sb = pb.intercept ? B.row(0).sum() : 0.0;
  return 0.5 * f + 0.5 * pb.gauge() * sb * sb;
}

// out += pen .* V + the gauge term, per probe (K columns each) of the p1 x mK block V.
void add_penalty(const MnProblem& pb, const RowMat& V, RowMat& out) {
  const Index K = pb.K, m = V.cols() / K;
  out.array() += V.array().colwise() * pb.pen.array();
  if (!pb.intercept) return;
  const double tau = pb.gauge();
  for (Index q = 0; q < m; ++q) {
    const double sb = V.row(0).segment(q * K, K).sum();
    out.row(0).segment(q * K, K).array() += tau * sb;
  }
}

// The scores X~ B + offset (n x K).
RowMat scores(const mf::Operator& op, const RowMat& B, const double* offset) {
  RowMat eta;
  op.forward(B, eta);
  if (offset) eta += ConstRowMap(offset, eta.rows(), eta.cols());
  return eta;
}

}  // namespace

namespace mf {

// H V for m probes side by side: V (p1 x mK), probe q in the columns [qK, (q+1)K).
struct MnHessianOp {
  const Operator& op;
  const MnProblem& pb;
  const RowMat& mu;  // (n x K) the probabilities at the point
  int nt;
  void apply(const RowMat& V, RowMat& out, RowMat& work) const {
    const Index n = pb.n(), K = pb.K, m = V.cols() / K;
    op.forward(V, work);
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(nt, 4.0 * double(n) * double(m * K)))
    for (Index i = 0; i < n; ++i) {
      const double w = pb.weight(i);
      const double* mi = mu.data() + i * K;
      for (Index q = 0; q < m; ++q) {
        double* u = work.data() + i * m * K + q * K;
        double s = 0.0;
        for (Index a = 0; a < K; ++a) s += mi[a] * u[a];
        for (Index a = 0; a < K; ++a) u[a] = w * mi[a] * (u[a] - s);
      }
    }
    op.adjoint(work, out);
    add_penalty(pb, V, out);
  }
};

// Block-Jacobi: minv (p1 x K) = 1 / H_(ja)(ja) for the features' rows; with an intercept,
// row 0 of every probe solved with the K x K intercept block sum_i w_i J_i + pen_0 I +
// tau 1 1^T (positive definite: J_i's null direction 1 carries the gauge term).
struct MnPrecond {
  RowMat minv;
  Eigen::LLT<Mat> icpt;
  bool has_icpt = false;
  // Z = M^{-1} R for the p1 x mK block R.
  void apply(const RowMat& R, RowMat& Z) const {
    const Index K = minv.cols(), m = R.cols() / K;
    Z.resize(R.rows(), R.cols());
    for (Index j = 0; j < R.rows(); ++j) {
      for (Index q = 0; q < m; ++q) {
        for (Index a = 0; a < K; ++a) Z(j, q * K + a) = R(j, q * K + a) * minv(j, a);
      }
    }
    if (!has_icpt) return;
    for (Index q = 0; q < m; ++q) {
      Vec r = R.row(0).segment(q * K, K).transpose();
      icpt.solveInPlace(r);
      Z.row(0).segment(q * K, K) = r.transpose();
    }
  }
};

MnPrecond mn_precond(const Operator& op, const MnProblem& pb, const RowMat& mu) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1();
  MnPrecond M;
  M.minv.resize(p1, K);
  Vec d(n), diag(p1);
  for (Index a = 0; a < K; ++a) {
    for (Index i = 0; i < n; ++i) d[i] = pb.weight(i) * mu(i, a) * (1.0 - mu(i, a));
    op.weighted_squares(d.data(), diag.data());
    for (Index j = 0; j < p1; ++j) {
      const double h = diag[j] + pb.pen[j];
      M.minv(j, a) = h > 0.0 ? 1.0 / h : 1.0;
    }
  }
  if (pb.intercept) {
    Mat C = Mat::Zero(K, K);
    for (Index i = 0; i < n; ++i) {
      const double w = pb.weight(i);
      if (w == 0.0) continue;
      const Eigen::Map<const Vec> m(mu.data() + i * K, K);
      C.noalias() -= w * m * m.transpose();
      C.diagonal() += w * m;
    }
    C.diagonal().array() += pb.pen[0];
    C.array() += pb.gauge();
    M.icpt.compute(C);
    M.has_icpt = M.icpt.info() == Eigen::Success;
  }
  return M;
}

// S = H^{-1} B by PCG from S = 0, one system per probe (K columns of the block), each
// stopped at ||r_q|| <= rtol ||b_q|| (Frobenius norms of its p1 x K residual).
CgReport mn_pcg(const MnHessianOp& H, const MnPrecond& M, const RowMat& B, RowMat& S, double rtol,
                Index max_iter) {
  const Index p1 = B.rows(), K = H.pb.K, m = B.cols() / K;
  CgReport rep;
  S.setZero(p1, B.cols());
  RowMat R = B, Z, P, Q, work;
  M.apply(R, Z);
  P = Z;
  // per-probe sums over its K columns
  auto dots = [&](const RowMat& A, const RowMat& C) {
    Vec out = Vec::Zero(m);
    for (Index j = 0; j < p1; ++j) {
      for (Index q = 0; q < m; ++q) {
        double s = 0.0;
        for (Index a = 0; a < K; ++a) s += A(j, q * K + a) * C(j, q * K + a);
        out[q] += s;
      }
    }
    return out;
  };
  Vec rz = dots(R, Z), bnorm = dots(B, B).cwiseSqrt(), rnorm = bnorm;
  std::vector<char> active(static_cast<size_t>(m), 0);
  Index n_active = 0;
  for (Index q = 0; q < m; ++q) {
    if (bnorm[q] > 0.0) {
      active[static_cast<size_t>(q)] = 1;
      ++n_active;
    } else {
      P.middleCols(q * K, K).setZero();
    }
  }
  Vec alpha(m), beta(m);
  while (n_active > 0 && rep.iterations < max_iter) {
    interrupt::check();
    H.apply(P, Q, work);
    ++rep.iterations;
    const Vec pq = dots(P, Q);
    for (Index q = 0; q < m; ++q) {
      alpha[q] = 0.0;
      if (!active[static_cast<size_t>(q)]) continue;
      if (!(pq[q] > 0.0)) {  // no curvature left along p: stop this probe
        active[static_cast<size_t>(q)] = 0;
        --n_active;
        continue;
      }
      alpha[q] = rz[q] / pq[q];
    }
    for (Index j = 0; j < p1; ++j) {
      for (Index q = 0; q < m; ++q) {
        const double al = alpha[q];
        for (Index a = 0; a < K; ++a) {
          const Index c = q * K + a;
          S(j, c) += al * P(j, c);
          R(j, c) -= al * Q(j, c);
        }
      }
    }
    M.apply(R, Z);
    const Vec rz_new = dots(R, Z);
    rnorm = dots(R, R).cwiseSqrt();
    for (Index q = 0; q < m; ++q) {
      beta[q] = 0.0;
      if (!active[static_cast<size_t>(q)]) continue;
      if (rnorm[q] <= rtol * bnorm[q]) {
        active[static_cast<size_t>(q)] = 0;
        --n_active;
        continue;
      }
      beta[q] = rz_new[q] / rz[q];
      rz[q] = rz_new[q];
    }
    for (Index j = 0; j < p1; ++j) {
      for (Index q = 0; q < m; ++q) {
        const bool on = active[static_cast<size_t>(q)] != 0;
        for (Index a = 0; a < K; ++a) {
          const Index c = q * K + a;
          P(j, c) = on ? Z(j, c) + beta[q] * P(j, c) : 0.0;
        }
      }
    }
  }
  for (Index q = 0; q < m; ++q) {
    if (!(bnorm[q] > 0.0)) continue;
    rep.worst = std::max(rep.worst, rnorm[q] / bnorm[q]);
    rep.converged = rep.converged && rnorm[q] <= rtol * bnorm[q];
  }
  return rep;
}

}  // namespace mf

namespace detail {
namespace {  // (Softmax, a member, is this file's own)

// The multinomial objective as a model of newton_drive without any K p1 x K p1 matrix (as
// CgModel of matrix_free.cpp for the scalar losses): the direction by PCG on
// Hessian-vector products to the forcing tolerance min(0.5, sqrt(max|grad| / sum(w))),
// the move by the shared Armijo test on eta + t X~ step. Coordinates: the p1 x K block,
// flattened row by row (the driver only takes norms and dot products of them).
class MnCgModel {
 public:
  MnCgModel(const MnProblem& pb, MnState& st, RowMat& B, const mf::Operator& op,
            const double* offset, int nt, Index max_cg)
      : pb_(pb), st_(st), B_(B), op_(op), nt_(nt), max_cg_(max_cg) {
    sw_ = pb.weight_sum();
    eta_ = scores(op, B, offset);
    sm_ = softmax_at(pb, eta_, nt);
    f_ = sm_.loss + penalty(pb, B);
    gradient_at_point();
  }
  double gnorm() const { return grad_.cwiseAbs().maxCoeff(); }
  double objective() const { return f_; }
  void refactor() {
    pre_ = mf::mn_precond(op_, pb_, sm_.mu);
    ++st_.hessian_passes;
    at_point_ = true;
  }
  bool factor_at_point() const { return at_point_; }
  bool newton_at_point() const { return at_point_; }
  bool chord_ok() const { return false; }
  double direction(Vec& step) {
    const Index p1 = pb_.p1(), K = pb_.K;
    const mf::MnHessianOp H{op_, pb_, sm_.mu, nt_};
    const RowMat Bm = -ConstRowMap(grad_.data(), p1, K);
    RowMat S;
    const mf::CgReport rep =
        mf::mn_pcg(H, pre_, Bm, S, std::min(0.5, std::sqrt(gnorm() / sw_)), max_cg_);
    st_.hessian_products += rep.iterations;
    step = Eigen::Map<const Vec>(S.data(), S.size());
    if (!(-grad_.dot(step) > 0.0)) {  // no curvature: the preconditioned gradient step
      RowMat Z;
      pre_.apply(Bm, Z);
      step = Eigen::Map<const Vec>(Z.data(), Z.size());
    }
    return -grad_.dot(step);
  }
  double move(const Vec& step, double dec) {
    if (!(dec > 0.0)) return 0.0;
    const Index p1 = pb_.p1(), K = pb_.K;
    const ConstRowMap Sm(step.data(), p1, K);
    RowMat xs, eta_try;
    op_.forward(RowMat(Sm), xs);
    const double t = armijo(f_, dec, [&](double s) {
      eta_try = eta_ + s * xs;
      return data_loss(pb_, eta_try, nt_) + penalty(pb_, B_ + s * Sm);
    });
    if (t == 0.0) return 0.0;
    B_ += t * Sm;
    eta_.swap(eta_try);
    sm_ = softmax_at(pb_, eta_, nt_);
    f_ = sm_.loss + penalty(pb_, B_);
    gradient_at_point();
    at_point_ = false;
    return t;
  }
  void finish(const DriveResult& r) {
    st_.n_iter += r.n_iter;
    st_.objective = f_;
    st_.grad_norm = gnorm() / sw_;
    st_.converged = r.converged;
    st_.eta = Eigen::Map<const Vec>(eta_.data(), eta_.size());
    st_.grad = to_class_major(ConstRowMap(grad_.data(), pb_.p1(), pb_.K));
  }

 private:
  void gradient_at_point() {
    RowMat g;
    op_.adjoint(sm_.G, g);
    add_penalty(pb_, B_, g);
    grad_ = Eigen::Map<const Vec>(g.data(), g.size());
    if (!grad_.allFinite() || !std::isfinite(f_)) {
      throw InvalidInput(
          "the gradient is not finite (overflow at extreme linear predictors); rescale X or "
          "increase the penalty");
    }
  }
  const MnProblem& pb_;
  MnState& st_;
  RowMat& B_;
  const mf::Operator& op_;
  int nt_;
  Index max_cg_;
  RowMat eta_;
  Softmax sm_;
  mf::MnPrecond pre_;
  Vec grad_;
  double f_ = 0.0, sw_ = 1.0;
  bool at_point_ = false;
};

}  // namespace
}  // namespace detail

MnState mn_cg_fit(const MnProblem& pb, const MnCgOptions& opt, const Vec* beta0,
                  const double* offset) {
  if (!(pb.weight_sum() > 0.0)) throw InvalidInput("the sample weights sum to zero");
  const int nt = resolve_threads(opt.fit.n_threads);
  const mf::Operator op(pb.X, pb.intercept, nt);
  MnState st;
  RowMat B = to_block(pb, beta0 ? *beta0 : mn_cold_start(pb));
  detail::MnCgModel m(pb, st, B, op, offset, nt, opt.max_cg);
  DriveOptions o;
  o.tol = o.target = opt.fit.tol;
  o.scale = pb.weight_sum();
  o.max_iter = std::max<Index>(0, opt.fit.max_iter);  // 0: the state at beta0
  o.check_first = true;
  const DriveResult r = newton_drive(m, o, RefreshPolicy{});
  m.finish(r);
  st.beta = to_class_major(B);
  return st;
}

MnRandomBlocks mn_random_blocks(const MnProblem& pb, const Vec& beta, const double* offset,
                                const LeverageOptions& o) {
  if (o.n_groups < 1 || o.n_probes < o.n_groups || o.n_probes % o.n_groups != 0) {
    throw InvalidInput("n_probes must be a positive multiple of n_groups");
  }
  const Index n = pb.n(), K = pb.K, p = pb.X.p, T = mn_packed(K), G = o.n_groups;
  const Index per = o.n_probes / G;
  const int nt = resolve_threads(o.n_threads);
  const mf::Operator op(pb.X, pb.intercept, nt), op0(op, false);
  MnRandomBlocks out;
  const RowMat B = to_block(pb, beta);
  out.eta = scores(op, B, offset);
  const Softmax sm = softmax_at(pb, out.eta, nt);
  const mf::MnPrecond pre = mf::mn_precond(op, pb, sm.mu);
  // the blocks of A0: diag_a(sum_j x_ij^2 minv(j, a)) + the intercept block's inverse
  out.diag0.setZero(n, T);
  {
    Vec c(p), col(n);
    const Index off = pb.intercept ? 1 : 0;
    for (Index a = 0; a < K; ++a) {
      c = pre.minv.col(a).tail(p);
      op0.squares_times(c.data(), col.data());
      for (Index i = 0; i < n; ++i) out.diag0(i, packed_at(K, a, a)) = col[i];
    }
    if (off) {
      Mat Ci = Mat::Identity(K, K);
      if (pre.has_icpt) {
        pre.icpt.solveInPlace(Ci);
      } else {
        Ci.diagonal() = pre.minv.row(0).transpose();
      }
      for (Index a = 0; a < K; ++a)
        for (Index b = a; b < K; ++b) out.diag0.col(packed_at(K, a, b)).array() += Ci(a, b);
    }
  }
  // probe weights s_i = sqrt(w_i tr(J_i) + floor): the estimated S A S is about the
  // weighted hat matrix (eigenvalues in [0, 1]), as the scalar route's probes
  Vec s(n);
  for (Index i = 0; i < n; ++i) s[i] = pb.weight(i) * (1.0 - sm.mu.row(i).squaredNorm());
  const double smean = s.cwiseMax(0.0).mean();
  const double floor = smean > 0.0 ? kProbeWeightFloor * smean : 1.0;
  s = (s.cwiseMax(0.0).array() + floor).sqrt().matrix();
  out.plain.setZero(n, G * T);
  out.control.setZero(n, G * T);
  const mf::MnHessianOp H{op, pb, sm.mu, nt};
  const Index batch = std::max<Index>(1, kMnBatchColumns / K);  // probes per block
  const Index gpb = std::max<Index>(1, batch / per);            // groups per block
  RowMat Z, Bz, S, AZ, A0Z, MB;
  for (Index g0 = 0; g0 < G; g0 += gpb) {
    const Index g1 = std::min(G, g0 + gpb), m = (g1 - g0) * per;
    Z.resize(n, m * K);
#pragma omp parallel for schedule(static) num_threads(threads_for(nt, double(n) * double(m * K)))
    for (Index i = 0; i < n; ++i) {
      for (Index q = 0; q < m; ++q) {
        const Index k = o.first_probe + g0 * per + q;
        for (Index a = 0; a < K; ++a) Z(i, q * K + a) = s[i] * rademacher(o.seed, i * K + a, k);
      }
    }
    op.adjoint(Z, Bz);  // X~^T S z
    const mf::CgReport rep = mf::mn_pcg(H, pre, Bz, S, o.cg_rtol, o.max_cg);
    out.cg_iterations += rep.iterations;
    out.converged = out.converged && rep.converged;
    out.worst_residual = std::max(out.worst_residual, rep.worst);
    op.forward(S, AZ);  // A S z
    pre.apply(Bz, MB);
    op.forward(MB, A0Z);  // A0 S z
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(nt, double(n) * double(m * K * K)))
    for (Index i = 0; i < n; ++i) {
      const double scale = 1.0 / (2.0 * double(per) * s[i] * s[i]);
      for (Index gg = g0; gg < g1; ++gg) {
        double* pl = out.plain.data() + i * G * T + gg * T;
        double* ct = out.control.data() + i * G * T + gg * T;
        for (Index q = (gg - g0) * per; q < (gg - g0 + 1) * per; ++q) {
          const double* z = Z.data() + i * m * K + q * K;
          const double* az = AZ.data() + i * m * K + q * K;
          const double* a0 = A0Z.data() + i * m * K + q * K;
          for (Index a = 0; a < K; ++a) {
            for (Index b = a; b < K; ++b) {
              const Index t = packed_at(K, a, b);
              pl[t] += (z[a] * az[b] + z[b] * az[a]) * scale;
              ct[t] += (z[a] * (az[b] - a0[b]) + z[b] * (az[a] - a0[a])) * scale;
            }
          }
        }
      }
    }
  }
  out.passes = op.passes + op0.passes;
  return out;
}

Vec mn_row_blocks(const MnProblem& pb, const Vec& beta, const double* offset, const Index* rows,
                  Index r, double rtol, Index max_cg, int n_threads) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1();
  for (Index k = 0; k < r; ++k) {
    if (rows[k] < 0 || rows[k] >= n) throw InvalidInput("row_blocks: a row is out of range");
  }
  const int nt = resolve_threads(n_threads);
  const mf::Operator op(pb.X, pb.intercept, nt);
  const RowMat eta = scores(op, to_block(pb, beta), offset);
  const Softmax sm = softmax_at(pb, eta, nt);
  const mf::MnPrecond pre = mf::mn_precond(op, pb, sm.mu);
  const mf::MnHessianOp H{op, pb, sm.mu, nt};
  Vec out(r * K * K);
  Vec x(p1);
  const Index batch = std::max<Index>(1, kMnBatchColumns / (K * K));  // samples per solve
  RowMat Bx, S;
  for (Index k0 = 0; k0 < r; k0 += batch) {
    const Index k1 = std::min(r, k0 + batch), m = (k1 - k0) * K;
    // the right-hand sides X~_i^T e_b: x~_i in class b's column, one probe per (i, b)
    Bx.setZero(p1, m * K);
    for (Index k = k0; k < k1; ++k) {
      pb.X.row(rows[k], pb.intercept, x.data());
      for (Index b = 0; b < K; ++b) Bx.col(((k - k0) * K + b) * K + b) = x;
    }
    mf::mn_pcg(H, pre, Bx, S, rtol, max_cg);
    for (Index k = k0; k < k1; ++k) {
      pb.X.row(rows[k], pb.intercept, x.data());
      for (Index b = 0; b < K; ++b) {
        const Index q = (k - k0) * K + b;
        for (Index a = 0; a < K; ++a)
          out[k * K * K + a * K + b] = x.dot(S.col(q * K + a));  // (X~_i H^{-1} X~_i^T e_b)_a
      }
    }
  }
  return out;
}

}  // namespace aloocv
