// Multinomial fits, ALO with K x K blocks and its hypergradient. See docs/math/multinomial.md.
#include "aloocv/multinomial.hpp"

#include <Eigen/LU>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "aloocv/blas.hpp"

namespace aloocv {

namespace {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Softmax of e (K) into mu; returns logsumexp(e).
double softmax(const double* e, Index K, double* mu) {
  double m = e[0];
  for (Index a = 1; a < K; ++a) m = std::max(m, e[a]);
  double s = 0.0;
  for (Index a = 0; a < K; ++a) {
    mu[a] = std::exp(e[a] - m);
    s += mu[a];
  }
  for (Index a = 0; a < K; ++a) mu[a] /= s;
  return m + std::log(s);
}

double cross_entropy(const double* e, Index K, Index y) {
  double m = e[0];
  for (Index a = 1; a < K; ++a) m = std::max(m, e[a]);
  double s = 0.0;
  for (Index a = 0; a < K; ++a) s += std::exp(e[a] - m);
  return m + std::log(s) - e[y];
}

Index label(const MnProblem& pb, Index i) { return static_cast<Index>(pb.y[i]); }

// Dense designs take the products of mn_eta, mn_gradient and mn_pass through the
// registered BLAS GEMM (Eigen's portable kernels are about 3x slower): a row block of a
// C-order X (unit column stride) is a column-major p x m matrix with leading dimension
// row_stride, one of a Fortran-order X a column-major m x p matrix with leading
// dimension col_stride. Other layouts, sparse X or no registered BLAS: Eigen.
enum class BlasLayout { None, Rows, Cols };
BlasLayout blas_layout(const MnProblem& pb) {
  if (pb.X.sparse || pb.X.p == 0 || !blas::enabled()) return BlasLayout::None;
  if (pb.X.dense.is_f32()) return BlasLayout::None;  // widened block by block
  if (pb.X.dense.col_stride == 1) return BlasLayout::Rows;
  if (pb.X.dense.row_stride == 1) return BlasLayout::Cols;
  return BlasLayout::None;
}

// Z (m x K, row-major) = X_b theta for the rows [i0, i0 + m) (no intercept); theta (p x K)
// and its transpose theta_t (K x p), both contiguous column-major; buf: scratch.
void block_times(const MnProblem& pb, BlasLayout layout, Index i0, Index m, const Mat& theta,
                 const Mat& theta_t, double* Z, Mat& buf) {
  const Index K = theta.cols(), p = theta.rows();
  const DenseView& X = pb.X.dense;
  if (layout == BlasLayout::Rows) {  // Z^T (K x m) = theta^T X_b^T
    blas::gemm(K, m, p, theta_t.data(), K, X.data + i0 * X.row_stride, X.row_stride, Z, K);
  } else if (layout == BlasLayout::Cols) {
    buf.resize(m, K);
    blas::gemm(m, K, p, X.data + i0, X.col_stride, theta.data(), p, buf.data(), m);
    Eigen::Map<RowMat>(Z, m, K) = buf;
  } else {
    pb.X.with_rows(i0, i0 + m,
                   [&](const auto& M) { Eigen::Map<RowMat>(Z, m, K).noalias() = M * theta; });
  }
}

// T (p x K, column-major, leading dimension ldt) = X_b^T Zc for the rows [i0, i0 + m),
// Zc (m x K) column-major; layout Rows or Cols only.
void block_t_times(const MnProblem& pb, BlasLayout layout, Index i0, Index m, Index K,
                   const double* Zc, double* T, Index ldt) {
  const Index p = pb.X.p;
  const DenseView& X = pb.X.dense;
  if (layout == BlasLayout::Rows) {
    blas::gemm(p, K, m, X.data + i0 * X.row_stride, X.row_stride, Zc, m, T, ldt);
  } else {
    blas::gemm_ex(true, false, p, K, m, 1.0, X.data + i0, X.col_stride, Zc, m, 0.0, T, ldt);
  }
}

// eta (n K, row-major) = X~ B^T for beta (K p1, class-major).
void mn_eta(const MnProblem& pb, const Vec& beta, double* eta, int nt) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), p = pb.X.p, off = pb.intercept ? 1 : 0;
  Eigen::Map<const Mat> B(beta.data(), p1, K);
  const Mat theta = B.bottomRows(p);
  const Mat theta_t = theta.transpose();  // K x p
  const BlasLayout layout = blas_layout(pb);
  const Index blk = 4096, nblocks = (n + blk - 1) / blk;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(nt, double(n) * double(p1) * double(K)))
  for (Index c = 0; c < nblocks; ++c) {
    interrupt::Share share(ictx);
    guard.run([&] {
      interrupt::check();
      const Index i0 = c * blk, i1 = std::min(n, i0 + blk);
      Eigen::Map<RowMat> out(eta + i0 * K, i1 - i0, K);
      Mat buf;
      block_times(pb, layout, i0, i1 - i0, theta, theta_t, eta + i0 * K, buf);
      if (off) out.rowwise() += B.row(0);
    });
  }
  guard.rethrow();
}

// Sum of w_i ce_i (sample `skip` left out); mu = softmax(eta_i), G_i = w_i (mu_i - e_y).
double mn_eval(const MnProblem& pb, const double* eta, Index skip, double* mu, double* G, int nt) {
  const Index K = pb.K;
  return parallel_sum(pb.n(), nt, [&](Index i) {
    const double w = i == skip ? 0.0 : pb.weight(i);
    const double lse = softmax(eta + i * K, K, mu + i * K);
    const Index y = label(pb, i);
    for (Index a = 0; a < K; ++a) G[i * K + a] = w * (mu[i * K + a] - (a == y ? 1.0 : 0.0));
    return w == 0.0 ? 0.0 : w * (lse - eta[i * K + y]);
  });
}

// out (K p1, class-major) = X~^T G, G (n K) row-major; fixed-order chunk reduction.
void mn_gradient(const MnProblem& pb, const double* G, double* out, int nt_in) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), p = pb.X.p, size = p1 * K;
  const int nt = threads_for(nt_in, double(n) * double(size));
  const Partition part{n, reduction_chunks(n, size, nt, 1024)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * size), 0.0);
  const BlasLayout layout = blas_layout(pb);
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (Index c = 0; c < part.chunks; ++c) {
    interrupt::Share share(ictx);
    guard.run([&] {
      interrupt::check();
      const Index i0 = part.begin(c), i1 = part.begin(c + 1);
      Eigen::Map<Mat> acc(partial.data() + c * size, p1, K);
      Eigen::Map<const RowMat> Gb(G + i0 * K, i1 - i0, K);
      if (pb.intercept) acc.row(0) = Gb.colwise().sum();
      if (layout != BlasLayout::None) {
        const Mat Gc = Gb;
        block_t_times(pb, layout, i0, i1 - i0, K, Gc.data(), acc.data() + (pb.intercept ? 1 : 0),
                      p1);
      } else {
        pb.X.with_rows(i0, i1,
                       [&](const auto& M) { acc.bottomRows(p).noalias() = M.transpose() * Gb; });
      }
    });
  }
  guard.rethrow();
  Eigen::Map<Vec> o(out, size);
  o.setZero();
  for (Index c = 0; c < part.chunks; ++c)
    o += Eigen::Map<const Vec>(partial.data() + c * size, size);
}

// One pass over X for out (K p1, class-major) = X~^T F(X~ V^T): each row block of X is
// read once, while in cache, for both products (the pair of GEMM passes of mn_eta and
// mn_gradient reads it twice). For rows [i0, i0 + m) of chunk c, Z (m x K, row-major)
// holds X~_b V^T when f(c, i0, m, Z) is called and the block's F(Z) after it. Fixed
// chunks: the sums do not depend on the thread count. Returns the number of chunks.
// Compiled once (f called once per row block through a FunctionRef).
using BlockFn = FunctionRef<void(Index, Index, Index, double*)>;
Index mn_pass(const MnProblem& pb, const Vec& v, BlockFn f, double* out, int nt_in) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), p = pb.X.p, size = p1 * K;
  const Index off = pb.intercept ? 1 : 0;
  const int nt = threads_for(nt_in, 4.0 * double(n) * double(size));
  const Partition part{n, reduction_chunks(n, size, nt, 1024)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * size), 0.0);
  Eigen::Map<const Mat> V(v.data(), p1, K);
  const Mat theta = V.bottomRows(p);
  const Mat theta_t = theta.transpose();  // K x p
  const BlasLayout layout = blas_layout(pb);
  const Index B = std::max<Index>(64, std::min<Index>(2048, Index(65536) / std::max<Index>(1, p)));
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
    RowMat Z;
    Mat Zc, T, buf;
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        Eigen::Map<Mat> acc(partial.data() + c * size, p1, K);
        for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
          const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
          Z.resize(m, K);
          block_times(pb, layout, i0, m, theta, theta_t, Z.data(), buf);
          if (off) Z.rowwise() += V.row(0);
          f(c, i0, m, Z.data());
          if (off) acc.row(0) += Z.colwise().sum();
          if (layout != BlasLayout::None) {
            Zc = Z;
            T.resize(p, K);
            block_t_times(pb, layout, i0, m, K, Zc.data(), T.data(), p);
            acc.bottomRows(p) += T;
          } else {
            // Z as mn_gradient's G: the same product types, compiled once
            const Eigen::Map<const RowMat> Zm(Z.data(), m, K);
            pb.X.with_rows(
                i0, i1, [&](const auto& M) { acc.bottomRows(p).noalias() += M.transpose() * Zm; });
          }
        }
      });
    }
  }
  guard.rethrow();
  Eigen::Map<Vec> o(out, size);
  o.setZero();
  for (Index c = 0; c < part.chunks; ++c)
    o += Eigen::Map<const Vec>(partial.data() + c * size, size);
  return part.chunks;
}

// H (dim x dim, both triangles) += sum_i X~_i^T C_i X~_i with C_i symmetric K x K given per
// pair (a >= b) by coef(i, a, b); one row-blocked SYRK pass per pair and sign.
template <class Coef>
void mn_block_hessian(const MnProblem& pb, Coef&& coef, double* H, int nt) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), dim = pb.dim();
  Vec dpos(n), dneg(n);
  Mat block(p1, p1);
  for (Index a = 0; a < K; ++a) {
    for (Index b = 0; b <= a; ++b) {
      interrupt::check();
      bool any_pos = false, any_neg = false;
      for (Index i = 0; i < n; ++i) {
        const double v = coef(i, a, b);
        dpos[i] = v > 0.0 ? v : 0.0;
        dneg[i] = v < 0.0 ? -v : 0.0;
        any_pos = any_pos || v > 0.0;
        any_neg = any_neg || v < 0.0;
      }
      for (int sign = 1; sign >= -1; sign -= 2) {
        if ((sign > 0 && !any_pos) || (sign < 0 && !any_neg)) continue;
        hessian(pb.X, sign > 0 ? dpos.data() : dneg.data(), pb.intercept, block.data(), nt);
        for (Index k = 0; k < p1; ++k) {
          for (Index j = 0; j < p1; ++j) {
            const double v = sign * block(j, k);
            H[(b * p1 + k) * dim + a * p1 + j] += v;
            if (a != b) H[(a * p1 + j) * dim + b * p1 + k] += v;
          }
        }
      }
    }
  }
}

// H (dim x dim) += the unpenalized Hessian at mu (sample `skip` left out).
void mn_loss_hessian(const MnProblem& pb, const double* mu, Index skip, double* H, int nt) {
  const Index K = pb.K;
  mn_block_hessian(
      pb,
      [&](Index i, Index a, Index b) {
        const double w = i == skip ? 0.0 : pb.weight(i);
        const double* m = mu + i * K;
        return a == b ? w * m[a] * (1.0 - m[a]) : -w * m[a] * m[b];
      },
      H, nt);
}

// Penalized, gauge-fixed Hessian at mu (sample `skip` left out), factored into chol.
void mn_factor(const MnProblem& pb, const double* mu, Index skip, Cholesky& chol, int nt,
               Mat* Hout = nullptr) {
  const Index K = pb.K, p1 = pb.p1(), dim = pb.dim();
  Mat H = Mat::Zero(dim, dim);
  mn_loss_hessian(pb, mu, skip, H.data(), nt);
  const double tau = pb.gauge();
  for (Index a = 0; a < K; ++a) {
    for (Index j = 0; j < p1; ++j) H(a * p1 + j, a * p1 + j) += pb.pen[j];
    if (pb.intercept)
      for (Index b = 0; b < K; ++b) H(a * p1, b * p1) += tau;
  }
  chol.factor(H.data(), dim);
  if (Hout) *Hout = std::move(H);
}

// The Hessian with the per-sample K x K curvature blocks C_i replaced by one block C:
// C (x) X~^T W X~ plus the penalty and the gauge term, one SYRK pass instead of
// K (K + 1) / 2. Exact where every sample has the same probabilities m (a cold start with
// zero slopes, C = diag(m) - m m^T); with C the weighted mean of the C_i it is the
// preconditioner of the Newton-CG solves.
void mn_factor_kron(const MnProblem& pb, const Mat& C, Index skip, Cholesky& chol, int nt) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), dim = pb.dim();
  Vec d(n);
  for (Index i = 0; i < n; ++i) d[i] = i == skip ? 0.0 : pb.weight(i);
  Mat A(p1, p1);
  hessian(pb.X, d.data(), pb.intercept, A.data(), nt);
  Mat H(dim, dim);
  for (Index a = 0; a < K; ++a) {
    for (Index b = 0; b < K; ++b) H.block(a * p1, b * p1, p1, p1) = C(a, b) * A;
  }
  const double tau = pb.gauge();
  for (Index a = 0; a < K; ++a) {
    for (Index j = 0; j < p1; ++j) H(a * p1 + j, a * p1 + j) += pb.pen[j];
    if (pb.intercept)
      for (Index b = 0; b < K; ++b) H(a * p1, b * p1) += tau;
  }
  chol.factor(H.data(), dim);
}

double mn_penalty(const MnProblem& pb, const Vec& beta) {
  const Index p1 = pb.p1();
  double f = 0.0, sb = 0.0;
  for (Index a = 0; a < pb.K; ++a) {
    for (Index j = 0; j < p1; ++j) f += pb.pen[j] * beta[a * p1 + j] * beta[a * p1 + j];
    if (pb.intercept) sb += beta[a * p1];
  }
  return 0.5 * f + 0.5 * pb.gauge() * sb * sb;
}

void mn_add_penalty_gradient(const MnProblem& pb, const Vec& beta, Vec& grad) {
  const Index p1 = pb.p1();
  double sb = 0.0;
  for (Index a = 0; a < pb.K; ++a) {
    for (Index j = 0; j < p1; ++j) grad[a * p1 + j] += pb.pen[j] * beta[a * p1 + j];
    if (pb.intercept) sb += beta[a * p1];
  }
  if (pb.intercept)
    for (Index a = 0; a < pb.K; ++a) grad[a * p1] += pb.gauge() * sb;
}

// out[i K K + a K + b] = x~_i^T S_ab x~_i, S_ab the symmetrized (a, b) block of A (dim x dim):
// one pass over packed row blocks, one GEMM per block pair.
void mn_quadforms(const MnProblem& pb, const Mat& A, double* out, int nt_in) {
  const Index n = pb.n(), K = pb.K, p1 = pb.p1();
  std::vector<Mat> S;
  for (Index a = 0; a < K; ++a) {
    for (Index b = 0; b <= a; ++b) {
      S.emplace_back(
          0.5 * (A.block(a * p1, b * p1, p1, p1) + A.block(b * p1, a * p1, p1, p1).transpose()));
    }
  }
  const Index B = block_rows(p1), nblocks = (n + B - 1) / B;
  const int nt = threads_for(nt_in, double(n) * double(p1 * p1) * double(K * (K + 1)));
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
    Mat P, Y;
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < nblocks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index i0 = c * B, i1 = std::min(n, i0 + B), m = i1 - i0;
        P.resize(p1, m);
        Y.resize(p1, m);
        pb.X.pack_rows(i0, i1, nullptr, pb.intercept, P.data());
        Index s = 0;
        for (Index a = 0; a < K; ++a) {
          for (Index b = 0; b <= a; ++b, ++s) {
            blas::gemm(p1, m, p1, S[s].data(), p1, P.data(), p1, Y.data(), p1);
            for (Index k = 0; k < m; ++k) {
              const double v = P.col(k).dot(Y.col(k));
              out[(i0 + k) * K * K + a * K + b] = v;
              out[(i0 + k) * K * K + b * K + a] = v;
            }
          }
        }
      });
    }
  }
  guard.rethrow();
}

}  // namespace

void MnProblem::check() const {
  for (Index i = 0; i < X.n; ++i) {
    const double v = y[i];
    if (!(v >= 0.0 && v < static_cast<double>(K) && v == std::floor(v))) {
      std::ostringstream msg;
      msg << "y must hold integer class labels in 0.." << K - 1 << " for the multinomial loss: y["
          << i << "] = " << v;
      throw InvalidInput(msg.str());
    }
  }
}

namespace {

// Newton-CG (truncated Newton) replaces Newton with exact Hessians from this
// (K + 1) p1 on: an exact Hessian pass costs K (K + 1) / 2 SYRK passes over X, about
// (K + 1) p1 / 8 Hessian-vector products (two GEMM passes over X with K columns each),
// and the preconditioned solves need a few products per Newton step.
constexpr Index kNewtonCgMin = 256;
// The most conjugate-gradient iterations of one Newton step.
constexpr Index kMaxCg = 200;
// Forcing term of the inexact Newton steps: relative residual min(kForcingMax,
// sqrt(max|grad| / sum(w))), superlinear convergence near the optimum.
constexpr double kForcingMax = 0.5;

// The multinomial problem (sample `skip` left out) as a model of newton_drive: the point,
// gradient and factor live in st; mu, G are the probabilities and w (mu - e_y) at the
// point. A cold start (zero slopes: the same probabilities for every sample) factors the
// Kronecker form of the Hessian (one SYRK pass instead of K (K + 1) / 2), exact there.
// In Newton-CG mode (`cg`) the steps solve with the Hessian at the point by
// preconditioned conjugate gradients on Hessian-vector products; the preconditioner is
// `precond` (an exact LOO refit: the full fit's factor) or the Kronecker form with the
// weighted mean curvature block, and the exact Hessian is formed only when the caller
// wants a factor at the returned point.
class MnModel {
 public:
  MnModel(const MnProblem& pb, MnState& st, int nt, Index skip, bool cold, bool cg,
          const Cholesky* precond, double wsum)
      : pb_(pb),
        st_(st),
        nt_(nt),
        skip_(skip),
        cold_(cold),
        cg_(cg || precond),
        pre_(precond),
        wsum_(wsum) {
    const Index nk = pb.n() * pb.K;
    st.eta.resize(nk);
    mu_.resize(nk);
    G_.resize(nk);
    eta_try_.resize(nk);
    mu_try_.resize(nk);
    G_try_.resize(nk);
    xs_.resize(nk);
    st.grad.resize(pb.dim());
    mn_eta(pb, st.beta, st.eta.data(), nt);
    f_ = mn_eval(pb, st.eta.data(), skip, mu_.data(), G_.data(), nt) + mn_penalty(pb, st.beta);
    gradient();
  }
  double gnorm() const { return st_.grad.cwiseAbs().maxCoeff(); }
  double objective() const { return f_; }
  void refactor() {
    const Index K = pb_.K;
    if (cold_) {
      Eigen::Map<const Vec> m(mu_.data() + (skip_ == 0 ? K : 0), K);
      mn_factor_kron(pb_, Mat(m.asDiagonal()) - m * m.transpose(), skip_, st_.chol, nt_);
    } else {
      mn_factor(pb_, mu_.data(), skip_, st_.chol, nt_);
    }
    at_point_ = true;
  }
  bool factor_at_point() const { return at_point_; }
  // Newton-CG solves with the Hessian at the point whatever the factor held.
  bool newton_at_point() const { return cg_ || at_point_; }
  bool chord_ok() const { return true; }
  double direction(Vec& step) {
    if (at_point_ || !cg_) {
      step = -st_.grad;
      st_.chol.solve(step.data());
    } else {
      if (!pre_) build_preconditioner();
      pcg(step);
    }
    return -st_.grad.dot(step);
  }
  // The full step is tried in one fused pass (X~ step, the loss and probabilities at the
  // new point and the gradient there); otherwise Armijo backtracking.
  double move(const Vec& step, double dec) {
    const Index K = pb_.K;
    std::vector<double> loss(static_cast<size_t>(kMaxReductionChunks), 0.0);  // per chunk
    Vec gX(pb_.dim());
    const Index chunks = mn_pass(
        pb_, step,
        [&](Index c, Index i0, Index m, double* Z) {
          double fsum = 0.0;
          for (Index k = 0; k < m; ++k) {
            const Index i = i0 + k;
            const double w = i == skip_ ? 0.0 : pb_.weight(i);
            double* z = Z + k * K;
            double* e = eta_try_.data() + i * K;
            double* mu = mu_try_.data() + i * K;
            double* g = G_try_.data() + i * K;
            for (Index a = 0; a < K; ++a) {
              xs_[i * K + a] = z[a];
              e[a] = st_.eta[i * K + a] + z[a];
            }
            const double lse = softmax(e, K, mu);
            const Index y = label(pb_, i);
            for (Index a = 0; a < K; ++a) {
              g[a] = w * (mu[a] - (a == y ? 1.0 : 0.0));
              z[a] = g[a];
            }
            if (w != 0.0) fsum += w * (lse - e[y]);
          }
          loss[static_cast<size_t>(c)] += fsum;
        },
        gX.data(), nt_);
    double floss = 0.0;
    for (Index c = 0; c < chunks; ++c) floss += loss[static_cast<size_t>(c)];
    const Vec b1 = st_.beta + step;
    const double f1 = floss + mn_penalty(pb_, b1);
    double t = 1.0;
    if (std::isfinite(f1) && (detail::tiny_decrease(dec, f_) || f1 <= f_ - detail::kArmijo * dec)) {
      st_.beta = b1;
      f_ = f1;
      st_.grad = gX;
    } else {
      t = detail::armijo(f_, dec, [&](double tt) {
        eta_try_ = st_.eta + tt * xs_;
        f_try_ = mn_eval(pb_, eta_try_.data(), skip_, mu_try_.data(), G_try_.data(), nt_) +
                 mn_penalty(pb_, st_.beta + tt * step);
        return f_try_;
      });
      if (t == 0.0) return 0.0;
      st_.beta += t * step;
      f_ = f_try_;
      mn_gradient(pb_, G_try_.data(), st_.grad.data(), nt_);
    }
    st_.eta.swap(eta_try_);
    mu_.swap(mu_try_);
    G_.swap(G_try_);
    at_point_ = cold_ = false;
    mn_add_penalty_gradient(pb_, st_.beta, st_.grad);
    check_finite();
    return t;
  }

 private:
  void gradient() {
    mn_gradient(pb_, G_.data(), st_.grad.data(), nt_);
    mn_add_penalty_gradient(pb_, st_.beta, st_.grad);
    check_finite();
  }
  void check_finite() const {
    if (!st_.grad.allFinite() || !std::isfinite(f_)) {
      throw InvalidInput(
          "the gradient is not finite (overflow at extreme linear predictors); rescale X or "
          "increase the penalty");
    }
  }

  // The Kronecker preconditioner with the weighted mean curvature block (one SYRK pass).
  void build_preconditioner() {
    const Index K = pb_.K;
    Mat C = Mat::Zero(K, K);
    for (Index i = 0; i < pb_.n(); ++i) {
      const double w = i == skip_ ? 0.0 : pb_.weight(i);
      if (w == 0.0) continue;
      Eigen::Map<const Vec> m(mu_.data() + i * K, K);
      C.noalias() -= w * m * m.transpose();
      C.diagonal() += w * m;
    }
    C /= wsum_;
    mn_factor_kron(pb_, C, skip_, own_pre_, nt_);
    pre_ = &own_pre_;
    ++st_.hessian_passes;
  }

  // out = H v at the point: X~^T [w_i (diag(mu_i) - mu_i mu_i^T) (V x~_i)] + penalty part,
  // in one pass over X.
  void hessian_times(const Vec& v, Vec& out) {
    const Index K = pb_.K;
    out.resize(pb_.dim());
    mn_pass(
        pb_, v,
        [&](Index, Index i0, Index m, double* Z) {
          for (Index k = 0; k < m; ++k) {
            const Index i = i0 + k;
            const double w = i == skip_ ? 0.0 : pb_.weight(i);
            double* z = Z + k * K;
            const double* mu = mu_.data() + i * K;
            double s = 0.0;
            for (Index a = 0; a < K; ++a) s += mu[a] * z[a];
            for (Index a = 0; a < K; ++a) z[a] = w * mu[a] * (z[a] - s);
          }
        },
        out.data(), nt_);
    mn_add_penalty_gradient(pb_, v, out);
    ++st_.hessian_products;
  }

  // step ~ -H^{-1} grad by preconditioned conjugate gradients from 0, to the relative
  // residual of the forcing term (each iterate is a descent direction).
  void pcg(Vec& x) {
    const Vec& g = st_.grad;
    const double g0 = g.cwiseAbs().maxCoeff();
    const double eta = std::min(kForcingMax, std::sqrt(g0 / wsum_));
    x = Vec::Zero(g.size());
    Vec r = -g, z = r, d, Hd;
    pre_->solve(z.data());
    d = z;
    double rz = r.dot(z);
    for (Index k = 0; k < kMaxCg; ++k) {
      interrupt::check();
      hessian_times(d, Hd);
      const double dHd = d.dot(Hd);
      if (!(dHd > 0.0)) break;
      const double alpha = rz / dHd;
      x += alpha * d;
      r -= alpha * Hd;
      if (r.cwiseAbs().maxCoeff() <= eta * g0) break;
      z = r;
      pre_->solve(z.data());
      const double rz_new = r.dot(z);
      d = z + (rz_new / rz) * d;
      rz = rz_new;
    }
    if (!(-g.dot(x) > 0.0)) {  // no progress (no curvature left): the preconditioned step
      x = -g;
      pre_->solve(x.data());
    }
  }

  const MnProblem& pb_;
  MnState& st_;
  int nt_;
  Index skip_;
  bool cold_, cg_, at_point_ = false;
  const Cholesky* pre_;
  Cholesky own_pre_;
  double wsum_, f_ = 0.0, f_try_ = 0.0;
  Vec mu_, G_, eta_try_, mu_try_, G_try_, xs_;
};

}  // namespace

double mn_softmax(const double* e, Index K, double* mu) { return softmax(e, K, mu); }

Vec mn_cold_start(const MnProblem& pb, Index skip) {
  const Index K = pb.K, p1 = pb.p1();
  Vec beta = Vec::Zero(pb.dim());
  if (!pb.intercept) return beta;
  Vec share = Vec::Zero(K);
  for (Index i = 0; i < pb.n(); ++i)
    if (i != skip) share[label(pb, i)] += pb.weight(i);
  share /= std::max(share.sum(), 1e-300);
  Vec b = share.array().max(kMinClassShare).log();
  b.array() -= b.mean();
  for (Index a = 0; a < K; ++a) beta[a * p1] = b[a];
  return beta;
}

// Damped Newton (newton_drive on an MnModel): chord steps on the kept factor while each
// step cuts the gradient norm 4x (near the optimum the Hessian barely changes, and a
// K p1 x K p1 Hessian pass costs K (K + 1) / 2 SYRK passes over X), a fresh Hessian
// otherwise or when a chord step finds no decrease.
MnState mn_fit(const MnProblem& pb, const FitOptions& opt, const Vec* beta0, bool factor_end,
               Index skip, const Cholesky* precond) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n(), K = pb.K, p1 = pb.p1();
  MnState st;
  st.beta = beta0 ? *beta0 : mn_cold_start(pb, skip);
  const double wsum = pb.weight_sum() - (skip >= 0 ? pb.weight(skip) : 0.0);
  if (!(wsum > 0.0)) throw InvalidInput("the sample weights sum to zero");
  const bool cg = (K + 1) * p1 >= kNewtonCgMin;
  MnModel m(pb, st, nt, skip, beta0 == nullptr && n > 1, cg, precond, wsum);
  DriveOptions o;
  o.tol = o.target = opt.tol;
  o.scale = wsum;
  o.max_iter = opt.max_iter;
  o.factor_end = factor_end;
  RefreshPolicy pol;
  pol.chord_ratio = kMnChordRatio;
  pol.rechord = pol.rechord_confirmed = true;
  const DriveResult r = newton_drive(m, o, pol);
  st.factored = factor_end;
  st.n_iter = r.n_iter;
  st.hessian_passes += r.hessian_passes;
  st.grad_norm = r.grad_norm;
  st.converged = r.converged;
  st.objective = m.objective();
  return st;
}

namespace {

// The per-sample closed forms of mn_loo given eta (n K) and the blocks K_i in lev; with
// alpha (n K) and Gs (n K K) non-null also the hypergradient's per-sample terms, the
// losses' weights w_i / vsum (docs/math/multinomial.md, the hypergradient with K x K blocks).
void mn_loo_samples(const MnProblem& pb, const Vec& eta, int method, double vsum, const double* lev,
                    double* pred, double* loss, double* det, double* alpha, double* Gs, int nt) {
  const Index n = pb.n(), K = pb.K;
  const bool want_grad = alpha != nullptr && method == 0;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(nt, double(n) * double(K * K * K) * 4.0))
  for (Index i = 0; i < n; ++i) {
    interrupt::Share share(ictx);
    if (guard.failed()) continue;
    guard.run([&] {
      if (i % 1024 == 0) interrupt::check();
      const double w = pb.weight(i);
      const Index y = label(pb, i);
      Eigen::Map<const Vec> e(eta.data() + i * K, K);
      Vec mu(K);
      softmax(e.data(), K, mu.data());
      Vec ey = Vec::Zero(K);
      ey[y] = 1.0;
      const Mat J = Mat(mu.asDiagonal()) - mu * mu.transpose();
      const Mat D = w * J;
      const Vec g = w * (mu - ey);
      Eigen::Map<const RowMat> Ki(lev + i * K * K, K, K);
      const Mat Mm = Mat::Identity(K, K) - D * Ki;
      const Eigen::PartialPivLU<Mat> lu(Mm);
      det[i] = lu.determinant();
      const Vec r = lu.solve(g);
      const Vec s = Ki * r;
      Eigen::Map<Vec> out(pred + i * K, K);
      if (method == 1) {
        out = e + Ki * g;
        loss[i] = cross_entropy(out.data(), K, y);
      } else {
        out = e + s;
        loss[i] = method == 2 ? cross_entropy(e.data(), K, y) + (mu - ey).dot(s)
                              : cross_entropy(out.data(), K, y);
      }
      if (!want_grad) return;
      Vec mt(K);
      softmax(out.data(), K, mt.data());
      const Vec c = w * (mt - ey) / vsum;
      const Vec u = lu.transpose().solve(Ki * c);
      const Vec z = w * (u.cwiseProduct(s) - mu.dot(s) * u - mu.dot(u) * s);
      const Vec bv = c + D * u;
      Eigen::Map<Vec>(alpha + i * K, K) = bv + J * z;
      const Mat Gm = bv * r.transpose();
      Eigen::Map<RowMat>(Gs + i * K * K, K, K) = 0.5 * (Gm + Gm.transpose());
    });
  }
  guard.rethrow();
}

// S (dim x dim) += sum_i X~_i^T Gs_i X~_i.
void mn_loo_adjoint_sum(const MnProblem& pb, const Vec& Gs, double* S, int nt) {
  const Index K = pb.K;
  mn_block_hessian(pb, [&](Index i, Index a, Index b) { return Gs[i * K * K + a * K + b]; }, S, nt);
}

// rho (dim) = X~^T gamma with gamma_i = alpha_i - J_i zeta_i, zeta_i from the blocks
// Q_i = X~_i Mbig X~_i^T.
void mn_loo_rho(const MnProblem& pb, const Vec& eta, const Mat& Mbig, const Vec& alpha, double* rho,
                int nt) {
  const Index n = pb.n(), K = pb.K;
  Vec Q(n * K * K);
  mn_quadforms(pb, Mbig, Q.data(), nt);
  Vec gamma(n * K);
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(nt, double(n) * double(K * K) * 8.0))
  for (Index i = 0; i < n; ++i) {
    const double w = pb.weight(i);
    Vec mu(K);
    softmax(eta.data() + i * K, K, mu.data());
    const Mat J = Mat(mu.asDiagonal()) - mu * mu.transpose();
    Eigen::Map<const RowMat> Qi(Q.data() + i * K * K, K, K);
    const Vec zeta = w * (Qi.diagonal() - 2.0 * Qi * mu);
    Eigen::Map<Vec>(gamma.data() + i * K, K) =
        Eigen::Map<const Vec>(alpha.data() + i * K, K) - J * zeta;
  }
  mn_gradient(pb, gamma.data(), rho, nt);
}

}  // namespace

void mn_loo(const MnProblem& pb, const MnState& st, int method, double* pred, double* loss,
            double* lev, double* det, double* grad, int nt_in) {
  if (!st.factored) throw InvalidInput("the multinomial fit has no Hessian factor");
  const int nt = resolve_threads(nt_in);
  const Index n = pb.n(), K = pb.K, p1 = pb.p1(), p = pb.X.p, off = pb.intercept ? 1 : 0;
  const Mat Hinv = st.chol.inverse();
  mn_quadforms(pb, Hinv, lev, nt);
  const bool want_grad = grad != nullptr && method == 0;
  Vec alpha, Gs;
  if (want_grad) {
    alpha.resize(n * K);
    Gs.resize(n * K * K);
  }
  mn_loo_samples(pb, st.eta, method, pb.weight_sum(), lev, pred, loss, det,
                 want_grad ? alpha.data() : nullptr, want_grad ? Gs.data() : nullptr, nt);
  if (!want_grad) return;
  // Reverse mode (docs/math/multinomial.md): S = sum_i X~_i^T Gs_i X~_i,
  // Mbig = H^{-1} S H^{-1}, Q_i = X~_i Mbig X~_i^T, gamma_i = alpha_i - J_i zeta_i.
  const Index dim = pb.dim();
  Mat S = Mat::Zero(dim, dim);
  mn_loo_adjoint_sum(pb, Gs, S.data(), nt);
  const Mat Mbig = Hinv * S * Hinv;
  Vec rho(dim);
  mn_loo_rho(pb, st.eta, Mbig, alpha, rho.data(), nt);
  st.chol.solve(rho.data());
  for (Index j = 0; j < p; ++j) {
    double s = 0.0;
    for (Index a = 0; a < K; ++a) {
      const Index q = a * p1 + off + j;
      s += rho[q] * st.beta[q] + Mbig(q, q);
    }
    grad[j] = -s;
  }
}

Index mn_exact(const MnProblem& pb, const MnState& st, const FitOptions& opt, double* pred,
               double* loss, SampleSet set) {
  const Index n = pb.n(), K = pb.K;
  set.check(n);
  const Index m = set.size(n);
  const int nt = threads_for(opt.n_threads, double(m) * double(n) * double(pb.dim()));
  FitOptions one = opt;
  one.n_threads = 1;
  MnState at_fit;
  const Cholesky* pre = &st.chol;
  if (!st.factored) {  // the factor of the Hessian at the full fit
    FitOptions none = opt;
    none.max_iter = 0;
    at_fit = mn_fit(pb, none, &st.beta, true);
    pre = &at_fit.chol;
  }
  Index failed = 0;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(+ : failed)
  for (Index k = 0; k < m; ++k) {
    interrupt::Share share(ictx);
    if (guard.failed()) continue;
    guard.run([&] {
      interrupt::check();
      const Index i = set(k);
      // Newton-CG preconditioned by the full fit's factor (the Hessian without sample i
      // differs from it by a rank-K term): no Hessian pass per refit
      const MnState s = mn_fit(pb, one, &st.beta, false, i, pre);
      if (!s.converged) ++failed;
      Eigen::Map<const Mat> B(s.beta.data(), pb.p1(), K);
      Vec xi(pb.p1());
      pb.X.row(i, pb.intercept, xi.data());
      Eigen::Map<Vec> out(pred + k * K, K);
      out = B.transpose() * xi;
      loss[k] = cross_entropy(out.data(), K, label(pb, i));
    });
  }
  guard.rethrow();
  return failed;
}

double mn_chunk_sums(const MnProblem& pb, const Vec& beta, double* grad, double* hess, int nt_in) {
  const int nt = resolve_threads(nt_in);
  const Index nk = pb.n() * pb.K, dim = pb.dim();
  Vec eta(nk), mu(nk), G(nk);
  mn_eta(pb, beta, eta.data(), nt);
  const double loss = mn_eval(pb, eta.data(), -1, mu.data(), G.data(), nt);
  mn_gradient(pb, G.data(), grad, nt);
  if (hess) {
    Eigen::Map<Mat>(hess, dim, dim).setZero();
    mn_loss_hessian(pb, mu.data(), -1, hess, nt);
  }
  return loss;
}

namespace {

// The state of a chunk at beta with the factor of the whole problem's Hessian H.
MnState chunk_state(const MnProblem& pb, const Vec& beta, const Mat& H, int nt) {
  MnState st;
  st.beta = beta;
  st.eta.resize(pb.n() * pb.K);
  mn_eta(pb, beta, st.eta.data(), nt);
  st.chol.factor(H.data(), pb.dim());
  st.factored = true;
  return st;
}

}  // namespace

void mn_chunk_loo(const MnProblem& pb, const Vec& beta, const Mat& H, int method, double* pred,
                  double* loss, double* lev, double* det, double* eta, int nt_in, double vsum,
                  double* S) {
  const int nt = resolve_threads(nt_in);
  const MnState st = chunk_state(pb, beta, H, nt);
  mn_quadforms(pb, st.chol.inverse(), lev, nt);
  const bool want_grad = S != nullptr && method == 0;
  Vec alpha, Gs;
  if (want_grad) {
    alpha.resize(pb.n() * pb.K);
    Gs.resize(pb.n() * pb.K * pb.K);
  }
  mn_loo_samples(pb, st.eta, method, vsum, lev, pred, loss, det, want_grad ? alpha.data() : nullptr,
                 want_grad ? Gs.data() : nullptr, nt);
  if (want_grad) mn_loo_adjoint_sum(pb, Gs, S, nt);
  std::copy(st.eta.data(), st.eta.data() + st.eta.size(), eta);
}

void mn_chunk_adjoint(const MnProblem& pb, const Vec& beta, const Mat& H, const Mat& Mbig,
                      double vsum, double* rho, int nt_in) {
  const int nt = resolve_threads(nt_in);
  const Index n = pb.n(), K = pb.K;
  const MnState st = chunk_state(pb, beta, H, nt);
  Vec lev(n * K * K), pred(n * K), loss(n), det(n), alpha(n * K), Gs(n * K * K);
  mn_quadforms(pb, st.chol.inverse(), lev.data(), nt);
  mn_loo_samples(pb, st.eta, 0, vsum, lev.data(), pred.data(), loss.data(), det.data(),
                 alpha.data(), Gs.data(), nt);
  mn_loo_rho(pb, st.eta, Mbig, alpha, rho, nt);
}

}  // namespace aloocv
