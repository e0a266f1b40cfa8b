// The n x n dual route: kernel, fit, leverages, exact refits. See docs/math/dual.md.
#include "aloocv/dual.hpp"

#include <Eigen/Cholesky>
#include <limits>
#include <sstream>
#include <type_traits>
#include <vector>

#include "aloocv/blas.hpp"
#include "aloocv/hessian.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

Mat dual_kernel(const Problem& pb, int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), p = pb.X.p, off = pb.intercept ? 1 : 0;
  Vec isd(p);
  for (Index j = 0; j < p; ++j) {
    const double lam = pb.pen[off + j];
    if (!(lam > 0.0)) {
      throw InvalidInput("the dual route needs a strictly positive penalty on every feature (" +
                         std::string("feature ") + std::to_string(j) +
                         " has lam = " + std::to_string(lam) + "); use solver='primal'");
    }
    isd[j] = 1.0 / std::sqrt(lam);
  }
  Mat K = Mat::Zero(n, n);
  if (pb.X.sparse) {
    // One sparse product (cost ~ sum of squared column counts, not n^2 p).
    pb.X.with_rows(0, n, [&](const auto& X) {
      using T = std::decay_t<decltype(X)>;
      if constexpr (std::is_base_of_v<Eigen::SparseMatrixBase<T>, T>) {
        using SM = Eigen::SparseMatrix<double, Eigen::RowMajor, int>;
        const SM A = X * isd.asDiagonal();
        const SM At = A.transpose();
        K = Mat(A * At);
      }
    });
    return K;
  }
  // Column blocks of X scaled by P^{-1/2} (packed by the design, in its storage order), one
  // SYRK each into per-chunk partials summed in chunk order: 8 chunks (fewer for small p)
  // whatever the thread count, hence bitwise the same K for every thread count.
  const Index pb_cols =
      std::max<Index>(32, std::min<Index>(1024, Index(131072) / std::max<Index>(1, n)));
  const Partition part{p, std::max<Index>(1, std::min<Index>(8, p / pb_cols))};
  std::vector<Mat> partial(static_cast<size_t>(part.chunks));
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
    std::vector<double> buf;
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        Mat& acc = partial[static_cast<size_t>(c)];
        acc = Mat::Zero(n, n);
        for (Index j0 = part.begin(c); j0 < part.begin(c + 1); j0 += pb_cols) {
          interrupt::check();
          const Index m = std::min(part.begin(c + 1), j0 + pb_cols) - j0;
          buf.resize(static_cast<size_t>(n * m));
          pb.X.pack_cols(j0, j0 + m, isd.data() + j0, buf.data());
          blas::syrk_lower(n, m, buf.data(), n, 1.0, acc.data(), n);
        }
      });
    }
  }
  guard.rethrow();
  for (Index c = 0; c < part.chunks; ++c) K += partial[static_cast<size_t>(c)];
  K.triangularView<Eigen::StrictlyUpper>() = K.transpose();
  return K;
}

namespace {

Eigen::LLT<Mat> factor_spd(const Mat& M, const char* what) {
  Eigen::LLT<Mat> llt(M);
  if (llt.info() != Eigen::Success) {
    throw SingularHessian(std::string("the ") + what +
                          " is not positive definite; use a larger penalty");
  }
  return llt;
}

// Refinement steps of a quadratic full fit in the dual (see dual_fit).
constexpr Index kMaxRefine = 3;

// The loss as the dual route uses it, through function pointers: the route's O(n^2) and
// O(n^3) linear algebra is compiled once, not once per loss; the loss enters in O(n) loops.
struct DualLoss {
  bool constant_curvature;
  double (*init_intercept)(double, const LossParams&);
  double (*value)(double, double, const LossParams&);
  // sum_i w_i l(y_i, eta_i) over i != skip
  double (*value_sum)(const Problem&, const double* eta, Index skip);
  // u_i = w_i l'_i (when u is not null), d_i = w_i l''_i; zero at skip and where w_i = 0
  void (*derivs)(const Problem&, const double* eta, Index skip, double* u, double* d);
  void (*derivatives)(const Problem&, const double*, double*, double*, int, Index);
  double (*objective)(const Problem&, const double*, const Vec&, int, Index, detail::YPartCache*);
  void (*formulas)(const Problem&, const double*, LooMethod, LooResult&, int);
};

template <class Loss>
double dual_value_sum(const Problem& pb, const double* eta, Index skip) {
  double f = 0.0;
  for (Index i = 0; i < pb.n(); ++i) {
    const double w = i == skip ? 0.0 : pb.weight(i);
    if (w != 0.0) f += w * Loss::value(pb.y[i], eta[i], pb.lp);
  }
  return f;
}

template <class Loss>
void dual_derivs(const Problem& pb, const double* eta, Index skip, double* u, double* d) {
  for (Index i = 0; i < pb.n(); ++i) {
    const double w = i == skip ? 0.0 : pb.weight(i);
    if (u) u[i] = w == 0.0 ? 0.0 : w * Loss::d1(pb.y[i], eta[i], pb.lp);
    d[i] = w == 0.0 ? 0.0 : w * Loss::d2(pb.y[i], eta[i], pb.lp);
  }
}

template <class Loss>
DualLoss dual_loss() {
  return DualLoss{Loss::constant_curvature, &Loss::init_intercept, &Loss::value,
                  &dual_value_sum<Loss>,    &dual_derivs<Loss>,    &detail::derivatives<Loss>,
                  &detail::objective<Loss>, &loo_formulas<Loss>};
}

// The dual problem (sample `skip` left out) as a model of newton_drive: coordinates
// (alpha, b) with theta = X^T alpha / pen, eta = K alpha + b + offset; the Newton matrix
// I + S K S (S = diag(sqrt(w l''))) is factored fresh for every step.
class DualModel {
 public:
  DualModel(const DualLoss& loss, const Problem& pb, const Mat& K, DualState& st, Index skip,
            bool have_x, int nt)
      : loss_(loss), pb_(pb), K_(K), st_(st), skip_(skip), have_x_(have_x), nt_(nt) {
    const Index n = pb.n();
    u_.resize(n);
    d_.resize(n);
    s_.resize(n);
    eta_try_.resize(n);
    gx_.resize(pb.p1());
    const Index off = pb.intercept ? 1 : 0;
    pen_max_ = have_x ? pb.pen.tail(pb.pen.size() - off).maxCoeff() : 0.0;
    Ka_ = K * st.alpha;
    f_ = value(st.eta, st.alpha, Ka_);
    evaluate();
  }
  double gnorm() const { return gnorm_; }
  double objective() const { return f_; }
  void refactor() {
    Mat M = s_.asDiagonal() * K_ * s_.asDiagonal();
    M.diagonal().array() += 1.0;
    llt_ = factor_spd(M, "dual Newton matrix I + S K S");
    at_point_ = true;
  }
  bool factor_at_point() const { return at_point_; }
  bool newton_at_point() const { return factor_at_point(); }
  bool chord_ok() const { return false; }
  // step = dalpha; the intercept's step db and K dalpha are kept for move.
  double direction(Vec& step) {
    const Vec t = llt_.solve(s_.cwiseProduct(Kr_));
    db_ = 0.0;
    Vec v = -t;
    if (pb_.intercept) {
      const Vec ms = llt_.solve(s_);
      const double denom = s_.dot(ms);
      if (!(denom > 0.0)) throw SingularHessian("no curvature left for the intercept");
      db_ = (s_.dot(t) - gb_) / denom;
      v -= db_ * (s_ - ms);
    }
    step = -r_ - s_.cwiseProduct(v) - db_ * d_;
    Kda_ = K_ * step;
    return -(gb_ * db_ + r_.dot(Kda_));  // -grad^T step
  }
  double move(const Vec& step, double dec) {
    const double t = detail::armijo(f_, dec, [&](double tt) {
      eta_try_ = st_.eta + tt * (Kda_.array() + db_).matrix();
      f_try_ = value(eta_try_, st_.alpha + tt * step, Ka_ + tt * Kda_);
      return f_try_;
    });
    if (t == 0.0) return 0.0;
    st_.alpha += t * step;
    st_.b += t * db_;
    Ka_ += t * Kda_;
    st_.eta.swap(eta_try_);
    f_ = f_try_;
    at_point_ = false;
    evaluate();
    return t;
  }

 private:
  double value(const Vec& eta, const Vec& alpha, const Vec& Kalpha) const {
    return loss_.value_sum(pb_, eta.data(), skip_) + 0.5 * alpha.dot(Kalpha);
  }
  // Derivatives at the point and the primal gradient norm: (sum u, X^T r) with r = u + alpha.
  void evaluate() {
    const Index n = pb_.n();
    gb_ = 0.0;
    loss_.derivs(pb_, st_.eta.data(), skip_, u_.data(), d_.data());
    for (Index i = 0; i < n; ++i) {
      s_[i] = sqrt_curvature(d_[i]);
      gb_ += u_[i];
    }
    r_ = u_ + st_.alpha;
    Kr_ = K_ * r_;
    double g = pb_.intercept ? std::abs(gb_) : 0.0;
    if (have_x_ && skip_ < 0) {
      gradient(pb_.X, r_.data(), false, gx_.data(), nt_);
      g = std::max(g, gx_.head(pb_.X.p).cwiseAbs().maxCoeff());
    } else if (have_x_) {
      // LOO refits stay off X: (x_j^T r)^2 / pen_j <= sum_k (x_k^T r)^2 / pen_k = r^T K r
      // bounds the primal gradient from above (conservative: may cost one more step)
      g = std::max(g, std::sqrt(std::max(0.0, pen_max_ * r_.dot(Kr_))));
    } else {
      g = std::max(g, Kr_.cwiseAbs().maxCoeff());
    }
    gnorm_ = g;
  }

  const DualLoss& loss_;
  const Problem& pb_;
  const Mat& K_;
  DualState& st_;
  Index skip_;
  bool have_x_;
  int nt_;
  bool at_point_ = false;
  double f_ = 0.0, f_try_ = 0.0, gb_ = 0.0, db_ = 0.0, gnorm_ = 0.0, pen_max_ = 0.0;
  Vec u_, d_, s_, r_, Kr_, Ka_, Kda_, eta_try_, gx_;
  Eigen::LLT<Mat> llt_;
};

// Newton in the dual (newton_drive on a DualModel), from `warm` or from alpha = 0 with
// the intercept at the link of the mean. O(n^3) steps are cheap next to forming K:
// converge 100x below tol, as the primal fits that end on a fresh Hessian do, so both
// routes return the same point. A quadratic objective is solved by one step up to
// rounding; at small lambda rounding leaves residuals that 1 / (1 - d_i h_i) amplifies in
// the LOO formulas: the full fit refines them while that pays (n = 50, p = 200, lambda =
// 1e-4: LOO predictions 3.5e-2 -> 5e-9 relative error against brute-force refits).
DualState dual_fit(const DualLoss& loss, const Problem& pb, const Mat& K, const FitOptions& opt,
                   const DualState* warm, Index skip, bool have_x) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n();
  const double sw = pb.weight_sum() - (skip >= 0 ? pb.weight(skip) : 0.0);
  DualState st;
  if (warm) {
    st = *warm;
    st.n_iter = 0;
  } else {
    st.alpha = Vec::Zero(n);
    st.b = 0.0;
    if (pb.intercept) {
      double sy = 0.0;
      for (Index i = 0; i < n; ++i)
        if (i != skip) sy += pb.weight(i) * pb.y[i];
      st.b = loss.init_intercept(sy / sw, pb.lp) - pb.offset_mean();
    }
    st.eta = Vec::Constant(n, st.b);
    pb.add_offset(st.eta.data());
  }
  DualModel m(loss, pb, K, st, skip, have_x, nt);
  DriveOptions o;
  o.tol = opt.tol;
  o.target = 0.01 * opt.tol;
  o.scale = sw;
  o.max_iter = std::max<Index>(1, opt.max_iter);
  o.check_first = false;
  if (loss.constant_curvature && skip < 0) o.refine = kMaxRefine;
  const DriveResult r = newton_drive(m, o, RefreshPolicy{});
  st.n_iter = r.n_iter;
  st.grad_norm = r.grad_norm;
  st.converged = r.converged;
  st.objective = m.objective();
  return st;
}

// The leverages and the downdate factors 1 - d_i h_i of the dual route.
//
// Without an intercept, with A = S K S and M = I + A: d_i h_i = [A M^{-1}]_ii, so
//   1 - d_i h_i = [M^{-1}]_ii,
// the squared norm of column i of L^{-1} (M = L L^T). Computing it as 1 - d_i (K_ii -
// ||(L^{-1} S K)_i||^2), a difference of two numbers of size p / lambda, loses all
// accuracy at small lambda (1.5e-4 relative error at lambda = 1e-4, spurious "singular"
// at 1e-6). With the intercept eliminated by its Schur complement (K_c = C K C^T), A = S K_c S
// satisfies A s = 0, and 1 - d_i h_i = [Q^T (I + Q A Q^T)^{-1} Q]_ii with Q (n-1 x n) an
// orthonormal basis of the complement of s (rows of a Householder reflection taking s to
// a coordinate axis): the same stable form on that complement.
// The leverages: h_i = (1 - den_i) / d_i (accurate where the direct form cancels), except
// for samples with d_i = 0 or with a tiny d_i h_i and A_ii < 1, which take the direct form
// h_i = 1 / sum(d) + K_c,ii - ||(L^{-1} Q S K_c)_i||^2 (accurate where it does not cancel).
struct DualLeverages {
  Vec h, den;
};

// Below this d_i h_i, the leverage is computed by the direct form (see dual_leverages).
constexpr double kDirectLeverage = 1e-3;

DualLeverages dual_leverages(const DualLoss& loss, const Problem& pb, const Mat& K,
                             const DualState& st) {
  const Index n = pb.n();
  Vec d(n), s(n);
  loss.derivs(pb, st.eta.data(), -1, nullptr, d.data());
  for (Index i = 0; i < n; ++i) s[i] = sqrt_curvature(d[i]);
  Mat Kc = K;
  double base = 0.0;
  if (pb.intercept) {
    const double sd = d.sum();
    if (!(sd > 0.0)) throw SingularHessian("no curvature for the intercept (all d_i = 0)");
    const Vec kd = K * d / sd;
    const double dkd = d.dot(kd) / sd;
    Kc.colwise() -= kd;  // K - (K d) 1^T / sd
    Kc.rowwise() -= kd.transpose();
    Kc.array() += dkd;
    base = 1.0 / sd;
  }
  const Mat SK = s.asDiagonal() * Kc;  // S K_c
  Mat A = SK * s.asDiagonal();         // S K_c S
  A = 0.5 * (A + A.transpose()).eval();
  Mat B, Q;  // B = Q A Q^T, Q (m x n) orthonormal rows
  if (pb.intercept) {
    Index k = 0;
    s.cwiseAbs().maxCoeff(&k);
    Vec u = s;
    u[k] += s[k] >= 0.0 ? s.norm() : -s.norm();  // P = I - 2 u u^T / u^T u maps s to the axis k
    const double c = 2.0 / u.squaredNorm();
    const Vec Au = A * u;
    const double uAu = u.dot(Au);
    // P A P = A - c (u Au^T + Au u^T) + c^2 (u^T A u) u u^T
    Mat PAP = A;
    PAP.noalias() -= c * (u * Au.transpose() + Au * u.transpose());
    PAP.noalias() += (c * c * uAu) * (u * u.transpose());
    std::vector<Index> keep;
    keep.reserve(static_cast<size_t>(n));
    for (Index i = 0; i < n; ++i)
      if (i != k) keep.push_back(i);
    const Index m = n - 1;
    B.resize(m, m);
    Q.resize(m, n);
    for (Index b = 0; b < m; ++b) {
      const Index rb = keep[static_cast<size_t>(b)];
      for (Index a = 0; a < m; ++a) B(a, b) = PAP(keep[static_cast<size_t>(a)], rb);
    }
    for (Index j = 0; j < n; ++j) {
      const double cu = c * u[j];
      for (Index a = 0; a < m; ++a) {
        const Index ra = keep[static_cast<size_t>(a)];
        Q(a, j) = (ra == j ? 1.0 : 0.0) - cu * u[ra];
      }
    }
  } else {
    B = std::move(A);
    Q = Mat::Identity(n, n);
  }
  const Index m = B.rows();
  B.diagonal().array() += 1.0;  // eigenvalues >= 1: positive definite unless not finite
  if (!B.allFinite() || (m > 0 && blas::potrf_lower(m, B.data(), m) != 0)) {
    throw SingularHessian(
        "the dual leverage matrix I + S K S is not positive definite (non-finite kernel or "
        "curvature); rescale X or use a larger penalty");
  }
  // Z = L^{-1} Q in column blocks (interruptible); den_i = ||Z e_i||^2
  constexpr Index kCols = 256;
  for (Index j0 = 0; m > 0 && j0 < n; j0 += kCols) {
    interrupt::check();
    blas::trsm_lower(m, std::min(kCols, n - j0), B.data(), m, Q.data() + j0 * m, m);
  }
  DualLeverages out;
  out.h.resize(n);
  out.den.resize(n);
  std::vector<Index> direct;  // samples whose leverage takes the direct form
  for (Index i = 0; i < n; ++i) {
    const double den = m > 0 ? Q.col(i).squaredNorm() : 1.0;
    out.den[i] = d[i] > 0.0 ? den : 1.0;
    // (1 - den_i) / d_i has relative error ~ eps / (d_i h_i); the direct form ~ eps A_ii /
    // (d_i h_i): the latter only where d_i h_i is tiny and A_ii < 1, or d_i = 0
    if (d[i] > 0.0 && (1.0 - den >= kDirectLeverage || d[i] * Kc(i, i) >= 1.0)) {
      out.h[i] = (1.0 - den) / d[i];
    } else {
      direct.push_back(i);
    }
  }
  // direct form h_i = 1 / sum(d) + K_c,ii - ||Z S K_c e_i||^2 for those samples
  Mat SKJ(n, kCols), W(m, kCols);
  for (size_t a0 = 0; a0 < direct.size(); a0 += static_cast<size_t>(kCols)) {
    interrupt::check();
    const Index nb = std::min<Index>(kCols, static_cast<Index>(direct.size() - a0));
    for (Index t = 0; t < nb; ++t) SKJ.col(t) = SK.col(direct[a0 + static_cast<size_t>(t)]);
    if (m > 0) blas::gemm(m, nb, n, Q.data(), m, SKJ.data(), n, W.data(), m);
    for (Index t = 0; t < nb; ++t) {
      const Index i = direct[a0 + static_cast<size_t>(t)];
      out.h[i] = base + Kc(i, i) - (m > 0 ? W.col(t).squaredNorm() : 0.0);
    }
  }
  return out;
}

// The state at a given beta = (b, theta), taken as the fit ("bring your own fit", as
// prepare_at in the primal): eta, objective and gradient norm; no representer form.
DualState dual_state_at(const DualLoss& loss, const Problem& pb, const Vec& beta,
                        const FitOptions& opt) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n();
  DualState st;
  st.eta.resize(n);
  linear_predictor(pb.X, beta.data(), pb.intercept, st.eta.data(), nt);
  pb.add_offset(st.eta.data());
  Vec g(n), d(n), grad;
  loss.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
  detail::full_gradient(pb, g.data(), beta, grad, nt);
  st.b = pb.intercept ? beta[0] : 0.0;
  st.objective = loss.objective(pb, st.eta.data(), beta, nt, -1, nullptr);
  st.grad_norm = grad.cwiseAbs().maxCoeff() / pb.weight_sum();
  st.converged = st.grad_norm <= opt.tol;
  return st;
}

DualResult dual_impl(const DualLoss& loss, const Problem& pb, const Mat& K, LooMethod method,
                     const FitOptions& opt, bool want_loo, const Vec* beta, SampleSet set) {
  const bool have_x = pb.X.n > 0 && pb.X.p > 0 && (pb.X.sparse || !pb.X.dense.empty());
  if (!have_x && !loss.constant_curvature) {
    throw InvalidInput("a user kernel supports the squared loss only");
  }
  if (beta && (!have_x || beta->size() != pb.p1())) {
    throw InvalidInput("a given beta needs X and p + intercept entries");
  }
  DualResult out;
  if (beta) {
    out.st = dual_state_at(loss, pb, *beta, opt);
    out.coef = beta->tail(pb.X.p);
  } else {
    out.st = dual_fit(loss, pb, K, opt, nullptr, -1, have_x);
  }
  if (have_x && !beta) {
    // theta = P^{-1} X^T alpha
    const Index off = pb.intercept ? 1 : 0;
    Vec xa(pb.p1());
    gradient(pb.X, out.st.alpha.data(), pb.intercept, xa.data(), opt.n_threads);
    out.coef.resize(pb.X.p);
    for (Index j = 0; j < pb.X.p; ++j) out.coef[j] = xa[off + j] / pb.pen[off + j];
  }
  if (!want_loo) return out;
  const Index n = pb.n();
  if (method == LooMethod::Exact) {
    set.check(n);
    const Index ns = set.size(n);
    out.loo.losses.resize(ns);
    out.loo.predictions.resize(ns);
    // refits warm-start from the dual fit (a given beta need not have a representer form)
    DualState fitted;
    if (beta) fitted = dual_fit(loss, pb, K, opt, nullptr, -1, have_x);
    const DualState& from = beta ? fitted : out.st;
    FitOptions serial = opt;
    serial.n_threads = 1;
    Index not_converged = 0;
    std::vector<char> singular(static_cast<size_t>(ns), 0);
    ExceptionCatcher guard;
    interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(dynamic, 1) num_threads(resolve_threads(opt.n_threads)) \
    reduction(+ : not_converged)
    for (Index k = 0; k < ns; ++k) {
      if (guard.failed()) continue;
      interrupt::Share share(ictx);
      guard.run([&] {
        const Index i = set(k);
        double e = from.eta[i];
        if (pb.weight(i) != 0.0) {
          DualState r;
          try {
            r = dual_fit(loss, pb, K, serial, &from, i, have_x);
          } catch (const SingularHessian&) {  // no curvature left without sample i
            ++not_converged;
            detail::mark_singular(out.loo, singular, k);
            return;
          }
          if (!r.converged) ++not_converged;
          e = r.eta[i];
        }
        out.loo.predictions[k] = e;
        out.loo.losses[k] = loss.value(pb.y[i], e, pb.lp);
      });
    }
    guard.rethrow();
    out.loo.n_not_converged = not_converged;
    detail::collect_singular(out.loo, singular, set);
    return out;
  }
  DualLeverages lev = dual_leverages(loss, pb, K, out.st);
  out.loo.leverages = std::move(lev.h);
  out.loo.den = std::move(lev.den);
  loss.formulas(pb, out.st.eta.data(), method, out.loo, opt.n_threads);
  return out;
}

}  // namespace

DualResult dual_loo(const Problem& pb, LossKind loss, const Mat& K, LooMethod method,
                    const FitOptions& opt, bool want_loo, const Vec* beta, SampleSet set) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return dual_impl(dual_loss<Loss>(), pb, K, method, opt, want_loo, beta, set);
  });
}

}  // namespace aloocv
