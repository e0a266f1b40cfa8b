// The matrix-free route (docs/math/matrix_free.md): fits, leverages and the hypergradient
// from products with X~ and X~^T only, O(nnz) each, never a p1 x p1 (or n x n) matrix.
//
//  - Operator: the products X~ V and X~^T U for one vector or a block of m columns (the
//    probes of a randomized estimate side by side), dense (BLAS where the rows have unit
//    stride) or CSR (a CSC index of the same entries for threaded X~^T U, so that every
//    product sums in the same order whatever the thread count).
//  - block_pcg: preconditioned conjugate gradients on H S = B, H = X~^T D X~ + diag(pen),
//    each column with its own step lengths, preconditioned by diag(H) (Jacobi).
//  - cg_fit: truncated Newton (Newton-CG) as a model of the one Newton driver
//    (newton_driver.hpp): the direction by PCG to a forcing tolerance, the move by the
//    shared Armijo test.
//  - random_leverages: Hutchinson estimates of h_i = x~_i^T H^{-1} x~_i from Rademacher
//    probes, plain and with the Jacobi diagonal as a control variate, kept per group of
//    probes (the jackknife of the Python layer debiases and gives the standard error).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <Eigen/Cholesky>

#include "problem.hpp"

namespace aloocv {

// Row-major blocks: row i of an n x m block holds sample i's m probe values.
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace mf {

// Products with X~ = [1, X] (the intercept column when `intercept`), restricted to no
// column subset. Counts the passes over X it makes.
class Operator {
 public:
  Operator(const Design& X, bool intercept, int n_threads);
  // The same X with or without the intercept column, sharing `other`'s CSC index (built
  // once for both).
  Operator(const Operator& other, bool intercept);
  Index n() const { return X_.n; }
  Index p1() const { return X_.p + off_; }
  // out (n) = X~ v, v (p1).
  void forward(const double* v, double* out) const;
  // out (p1) = X~^T u, u (n).
  void adjoint(const double* u, double* out) const;
  // out (n x m) = X~ V, V (p1 x m).
  void forward(const RowMat& V, RowMat& out) const;
  // out (p1 x m) = X~^T U, U (n x m).
  void adjoint(const RowMat& U, RowMat& out) const;
  // out (n x m) = X diag(cscale) X^T U (X without the intercept column: an operator built
  // without it) in one pass over the columns' entries, with no p x m intermediate, the same
  // sums as adjoint, scaling and forward one after the other; false (nothing done) where
  // that serial pass does not apply (dense X, n >= p, threads, or no CSC index).
  bool gram(const RowMat& U, const double* cscale, RowMat& out) const;
  // out (p1 x m) = X~^T diag(max(d, 0)) X~ V in one pass over the rows (a CSR X with
  // n >= p1, one thread): each row's m sums are scaled and scattered at once, with no n x m
  // intermediate and the same sums as forward, scaling and adjoint; false (nothing done)
  // where that pass does not apply.
  bool hessian_rows(const RowMat& V, const Vec& d, RowMat& out) const;
  // The same with a curvature column per column of V (D n x m, row-major).
  bool hessian_rows(const RowMat& V, const RowMat& D, RowMat& out) const;
  // out (p1) = sum_i d_i x~_ij^2: the diagonal of X~^T D X~.
  void weighted_squares(const double* d, double* out) const;
  // out (n) = sum_j x~_ij^2 c_j.
  void squares_times(const double* c, double* out) const;
  mutable Index passes = 0;

 private:
  template <class Curv>
  bool hessian_rows_impl(const RowMat& V, const Curv& curv, RowMat& out) const;
  const Design& X_;
  Index off_;
  int nt_;
  // CSC index of a sparse X, built on first use (csc): column j's entries at
  // [cptr[j], cptr[j+1]).
  struct CscIndex {
    std::vector<Index> ptr;
    std::vector<int> row;
    std::vector<double> val;
  };
  std::shared_ptr<CscIndex> csc_ = std::make_shared<CscIndex>();
  // Whether the CSC index serves a product (a block of columns, or one vector threaded):
  // builds it then. Call outside parallel regions.
  bool csc(bool block) const;
};

// H v = X~^T (d .* X~ v) + pen .* v for a block (the curvature d clipped at 0: a direction
// of descent where a loss has negative curvature).
struct HessianOp {
  const Operator& op;
  const Vec& d;    // (n) w_i l''_i
  const Vec& pen;  // (p1)
  void apply(const RowMat& V, RowMat& out, RowMat& work) const;
};

// The dense part of a block-Jacobi preconditioner (CSR designs): the coordinates `idx`
// (the intercept and the kHeadColumns columns of largest curvature, the frequent terms of
// text-like data, whose couplings Jacobi leaves out) preconditioned by the inverse of
// their block of H, every other coordinate by 1 / H_jj. Empty: Jacobi alone.
struct HeadBlock {
  std::vector<Index> idx;
  Eigen::LLT<Mat> llt;
  bool empty() const { return idx.empty(); }
  // Z.row(idx[a]) = (H_head^{-1} R.row(idx))_a for every column of the block.
  void apply(const RowMat& R, RowMat& Z) const;
};

// Columns of the dense part of HeadBlock: at most kHeadColumns and half of X's, none below
// kMinHeadColumns. Measured on 20000 x 5000 text-like rows (30 per row; block PCG
// iterations of 8 probes to 3e-3 and of 10 exact leverages to 1e-5) with 64 / 128 / 256
// columns: at C = 1 8 / 7 / 7 and 10 / 10 / 9, at C = 100 25 / 25 / 22 and 37 / 33 / 35, at
// C = 0.01 3 / 3 / 3 and 5 / 4 / 4; 5000 x 20000, C = 1: 5 / 5 / 5 and 8 / 7 / 7. The block
// costs a pass over the rows' head entries once per point (about 3 ms at 128) and a
// 129 x 129 triangular pair per column and iteration (1% of a block product).
constexpr Index kHeadColumns = 128;
constexpr Index kMinHeadColumns = 64;

struct DualHead;

struct CgOptions {
  double rtol = 1e-6;                   // ||r_k|| <= rtol ||b_k|| per column
  Index max_iter = 1000;                // iterations at most
  Vec col_rtol;                         // per column instead of rtol (empty: rtol for every column)
  const HeadBlock* head = nullptr;      // the dense part of the preconditioner (none: Jacobi)
  const DualHead* dual_head = nullptr;  // the dual form's (DualHatOp) dense part
};

struct CgReport {
  Index iterations = 0;
  bool converged = true;
  double worst = 0.0;  // the largest ||r_k|| / ||b_k|| at the end
};

// S = H^{-1} B by PCG with the preconditioner diag(minv) (the inverse of diag(H)), from
// S = 0, each column on its own; a column whose curvature p^T H p vanishes stops there.
CgReport block_pcg(const HessianOp& H, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o);

// H_k v_k = X~^T (d_k .* X~ v_k) + pen .* v_k for each column k of a block, with its own
// curvature d_k (column k of D; clipped at 0 as HessianOp's): the Hessians of several
// problems on the same X~ (the refits of cg_refits) in one block product.
struct MultiHessianOp {
  const Operator& op;
  const RowMat& D;  // (n x m) w_i l''_i of each column's problem
  const Vec& pen;   // (p1)
  void apply(const RowMat& V, RowMat& out, RowMat& work) const;
};

CgReport block_pcg(const MultiHessianOp& H, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o);

// The dual operator of the leverages (docs/math/matrix_free.md, "The dual form"): with
// A = D^{1/2} X P^{-1/2} (P the features' L2 weights, all positive) and M the projection
// off u = D^{1/2} 1 (the identity without an intercept), V -> (M A A^T M + I) V on blocks of
// n-vectors. Its inverse gives the weighted hat matrix D^{1/2} X~ H^{-1} X~^T D^{1/2} =
// P_u + I - (M A A^T M + I)^{-1}, with every CG vector of length n instead of p + 1.
struct DualHatOp {
  const Operator& op;  // X without the intercept column
  const Vec& sd;       // (n) sqrt(max(d, 0))
  const Vec& pinv;     // (p) 1 / P_j
  bool intercept;
  // M V in place (per column: V - u (u^T V) / |u|^2; nothing without an intercept)
  void project(RowMat& V) const;
  void apply(const RowMat& V, RowMat& out, RowMat& work) const;
};

CgReport block_pcg(const DualHatOp& K, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o);

// The head part of the dual form's preconditioner (CSR designs; docs/math/matrix_free.md,
// "The dual form of the probe solves"): with A_h the k columns of A = D^{1/2} X P^{-1/2}
// of largest squared norm (the frequent terms of text-like data), C = M A_h (projected off
// u, kept as A_h less a rank one term) and E = I + diag(t) (t_i: row i's squared norm in
// the other columns), (E + C C^T)^{-1} = E^{-1} - E^{-1} C (I + C^T E^{-1} C)^{-1} C^T E^{-1}
// (Woodbury). PCG takes einv (E^{-1}) as its diagonal and `apply` the rest. A_h is kept
// sparse, by rows: applying it costs a product with X's entries in those columns, forming
// the k x k matrix the squares of each row's head entries.
struct DualHead {
  std::vector<Index> ptr;   // n + 1 offsets of the rows' head entries
  std::vector<int> idx;     // their head column, 0 .. k - 1
  std::vector<double> val;  // their entry of A
  Vec c;                    // (k) A_h^T sd / |sd|^2: C = A_h - sd c^T (empty: C = A_h)
  Vec sd;                   // (n) sqrt(max(d, 0)), as DualHatOp's
  Vec einv;                 // (n) E^{-1}
  Eigen::LLT<Mat> llt;      // of I + C^T E^{-1} C
  int n_threads = 1;
  bool empty() const { return ptr.empty(); }
  // Z (= einv .* R on entry) -= einv .* C (I + C^T E^{-1} C)^{-1} C^T Z, every column.
  void apply(RowMat& Z) const;
};

// DualHead's columns: those whose squared norm in A exceeds kDualHeadNorm (each puts an
// eigenvalue of about 1 + |a_j|^2 into M A A^T M + I, coupling every row it touches, which
// Jacobi leaves to CG), at most kDualHeadColumns (and a quarter of X's). Measured on
// 20000 x 100000 text-like rows (50 per row, Zipf 1.1), 8 probes to 3e-3: at C = 1e4
// (1385 columns above 10) the solves took 46 Jacobi iterations, 16 with 512 head columns
// (0.84 -> 0.42 s per call), 13 with 1024 (0.51 s: the k x k matrix's cost); at C = 1e3
// 40 -> 13 (512) and 10 (1024), 0.70 -> 0.32-0.33 s.
constexpr double kDualHeadNorm = 10.0;
constexpr Index kDualHeadColumns = 512;
// The pairs of head entries per row that form DualHead's k x k matrix, at most this many
// per entry of X (k halved until they fit): its cost stays that of about two block
// iterations. 20000 x 100000 text-like rows (50 per row): 5.2 pairs per entry at k = 512;
// rows of 300 entries, all in head columns, would take 125 (k = 276: 69 kept).
constexpr double kDualHeadPairs = 16.0;

// DualHead of the dual operator (sd, pinv as DualHatOp's) for a CSR design, with kinv the
// Jacobi inverse 1 / (1 + sum_j A_ij^2) of the whole row; empty for a dense design, too few
// columns, or a k x k matrix that is not numerically positive definite.
DualHead dual_head(const Design& X, const Vec& sd, const Vec& pinv, bool intercept, const Vec& kinv,
                   int n_threads);

// The inverse Jacobi preconditioner 1 / diag(H) (1 where a diagonal entry is 0).
Vec jacobi(const Operator& op, const Vec& d, const Vec& pen);

// HeadBlock of H = X~^T diag(max(d, 0)) X~ + diag(pen) for a CSR design, its columns chosen
// by the inverse diagonal minv (jacobi's); empty for a dense design or where the block is
// not numerically positive definite. One pass over the rows' entries.
HeadBlock head_block(const Design& X, bool intercept, const Vec& d, const Vec& pen,
                     const Vec& minv);

// The route's state at one beta that every solve there shares (docs/math/matrix_free.md,
// "One point, many solves"): the linear predictor, the loss's derivatives, the products
// (one Operator: its CSC index built once) and the preconditioner (Jacobi, and the head
// block on first use). The leverage estimates, the exact leverages of some samples, the
// self-check's refits and the hypergradient at a fit take one Point: its set-up (a pass for
// eta, one for the Jacobi diagonal, one for the head block) is made once, not per call.
// Holds pb by reference: pb (and the arrays it reads) must outlive it.
class Point {
 public:
  Point(const Problem& pb, LossKind loss, const Vec& beta, int n_threads);
  const Problem& pb;
  const LossKind loss;
  const int nt;
  const Operator op;
  const Vec beta;
  Vec eta;   // (n) X~ beta + offset
  Vec g, d;  // (n) w l', w l'' at eta
  Vec minv;  // (p1) 1 / diag(H) (jacobi)
  // head_block at d (built on first use: the dual form does not take it)
  const HeadBlock& head() const;

 private:
  mutable bool head_built_ = false;
  mutable HeadBlock head_;
};

}  // namespace mf

// Options of the matrix-free fit.
struct CgFitOptions {
  FitOptions fit;
  Index max_cg = 250;  // CG iterations per Newton step at most
};

// Newton-CG from beta0 (nullptr: the loss's start) to max|grad| / sum(w) <= tol (smooth
// L2 problems). The state holds no factor; matvec_passes counts every pass over X
// (Hessian-vector products included), cg_iterations the CG iterations.
FitState cg_fit(const Problem& pb, LossKind loss, const CgFitOptions& opt, const Vec* beta0);

// The state at a given beta (eta, gradient; no factor), for ALO at a given fit.
FitState cg_prepare(const Problem& pb, LossKind loss, const Vec& beta, const FitOptions& opt);

// Refits advanced together by cg_refits (one block product serves them all).
constexpr Index kBatchRefits = 16;

// Exact leave-one-out refits on the matrix-free route (docs/math/matrix_free.md, "Exact
// refits"): refit k minimizes the objective without sample rows[k] (its weight set to 0)
// by cg_fit's Newton-CG (a fresh direction by PCG to the forcing tolerance
// min(0.5, sqrt(max|grad| / sw_k)) every step, the shared Armijo search, the stall rule,
// max|grad| / sw_k <= tol with sw_k the weight sum without the sample), from starts.row(k)
// (nullptr: from beta). The refits advance in lockstep, kBatchRefits at a time: the
// Hessian-vector products of a batch are one block product (MultiHessianOp), the gradients
// and the trial steps one block product each, the line searches O(n) per refit and trial.
struct CgRefits {
  Vec predictions;              // (r) x~_i^T beta_(-i) + offset_i, i = rows[k]
  std::vector<char> converged;  // (r) whether refit k reached tol
  std::vector<Index> n_iter;    // (r) its Newton steps
  Index cg_iterations = 0;      // block PCG iterations (a block counts once)
  Index passes = 0;             // block products over X
};

// The refits' Newton directions are preconditioned by the Point's (Jacobi and head block
// at beta: a preconditioner only, each refit's steps are tested on its own objective).
CgRefits cg_refits(const mf::Point& pt, const CgFitOptions& opt, const Index* rows, Index r,
                   const RowMat* starts);

// The floor of the probe weights, relative to the mean curvature (random_leverages).
constexpr double kProbeWeightFloor = 1e-3;
// Probes solved side by side. Measured per probe and product at n = 2e4, p = 1e5, 7.5e5
// entries, one thread: 3.6 ms one at a time (through the block code), 1.1 ms in blocks of
// 8, 1.4 ms in blocks of 32 (the p1 x 32 block, 26 MB, leaves the cache).
constexpr Index kBatchProbes = 8;
// The dual form: rows whose |w l'| exceeds kDualGainRatio x w l'' turn the dual's absolute
// error in d_i h_i into a large error of ALO's step g_i h_i; at most kDualExactRows of them
// get exact leverages (one PCG solve), more send the call to the primal form.
constexpr double kDualGainRatio = 10.0;
constexpr Index kDualExactRows = 16;

// The forcing tolerance of a Newton-CG direction (the fit's and the refits') never asks the
// PCG for a linear residual below kResidualShare times the stopping test's max|grad|
// (tol sw): the step's linear part then meets the test with room to spare, and the test
// itself is made at the point reached (another step where the nonlinear remainder spoils
// it). The Newton forcing sqrt(max|grad| / sw) alone takes a refit started at the
// Sherman-Morrison step, whose gradient is already near tol, far below it (20000 x 5000
// text-like: 14 CG iterations where 5 meet the test), and a fit along a path the same way.
constexpr double kResidualShare = 0.1;

struct LeverageOptions {
  Index n_probes = 64;  // Rademacher probes in all
  Index n_groups = 8;   // groups of n_probes / n_groups probes (the jackknife's units)
  std::uint64_t seed = 0;
  Index first_probe = 0;  // probes first_probe, first_probe + 1, ... of the seed's sequence
  double cg_rtol = 1e-4;
  Index max_cg = 1000;
  int n_threads = 0;
  // Allow the dual form (CG on n-vectors) where it applies: n < p + 1, every feature
  // penalized, few rows with a large gain |g_i| / d_i (kDualExactRows).
  bool dual = false;
};

// Per-group Hutchinson estimates of the leverages at st (st.eta at its beta).
struct RandomLeverages {
  RowMat plain;    // (n x G) group means of z_ik (A z_k)_i, A = X~ H^{-1} X~^T
  RowMat control;  // (n x G) group means of z_ik ((A - A0) z_k)_i, A0 = X~ diag(H)^{-1} X~^T
  Vec diag0;       // (n) diag(A0)_i = sum_j x~_ij^2 / H_jj
  Vec d;           // (n) w_i l''_i at the fit
  Vec g;           // (n) w_i l'_i at the fit
  Index cg_iterations = 0;
  Index passes = 0;
  bool converged = true;
  double worst_residual = 0.0;
  bool dual = false;     // whether the dual form ran
  Index exact_rows = 0;  // rows given exact leverages by the dual form
};

RandomLeverages random_leverages(const mf::Point& pt, const LeverageOptions& o);

// The exact leverages h_i = x~_i^T H^{-1} x~_i of the samples rows[0..r) at pt, by one
// block PCG solve with the columns x~_i (H with the curvature clipped at 0, as the probes').
Vec row_leverages(const mf::Point& pt, const Index* rows, Index r, double rtol, Index max_cg,
                  RowMat* solves = nullptr);

// ALO from per-group leverage estimates (random_leverages' plain or control columns, n x
// G, G >= 2) and its delete-one-group jackknife (docs/math/matrix_free.md, "The jackknife:
// bias and standard error"): at h, the mean of a row's G estimates, and at each h_(k), the
// mean without group k, the leverage clipped (h >= 0, d+ h <= dh_clip, d+ = max(d, 0)),
// ALO's prediction eta + g h / (1 - d+ h) and its loss L. One pass over the estimates, the
// loss evaluated G + 1 times per sample; the group sums in fixed row chunks (the same bits
// for any thread count).
struct AloJackknife {
  Vec losses;       // (n) G L(h) - (G - 1) / G sum_k L(h_(k)): the jackknife's losses
  Vec plain;        // (n) L(h): the plug-in losses
  Vec predictions;  // (n) at h
  Vec leverages;    // (n) h clipped
  Vec group_means;  // (G) the mean (weighted by w) of L(h_(k)) over the samples
  Vec leverage_se;  // (n) the standard deviation of a row's G estimates / sqrt(G)
};

AloJackknife alo_jackknife(LossKind loss, const LossParams& lp, const double* y, const double* w,
                           const Eigen::Ref<const Vec>& eta, const Eigen::Ref<const Vec>& g,
                           const Eigen::Ref<const Vec>& d, const Eigen::Ref<const RowMat>& groups,
                           double dh_clip, int n_threads);

// The exact derivative of a reported ALO mean built on random_leverages' estimates, in
// the per-feature penalty weights (docs/math/matrix_free.md, "Hypergradient"): the caller
// (the Python layer, which assembles the jackknife) gives, per sample, the coefficients of
// the mean on the group estimates and on eta:
//   rho (n x G)  d mean / d (per-probe contribution z_ik (A W z_k)_i / s_i) of a probe of
//                group g, summed over the jackknife's subsets that hold the group;
//   alpha (n)    d mean / d eta_i at fixed leverages;
//   gamma (n)    d mean / d h_i summed over the subsets (the control variate's diagonal).
// The probes are solved again (same seed: the same solves), then one adjoint PCG solve per
// probe and one for beta. Returns d mean / d pen (p1; the intercept's entry is 0).
Vec random_leverages_gradient(const mf::Point& pt, const LeverageOptions& o, bool control,
                              const RowMat& rho, const Vec& alpha, const Vec& gamma);

// Rademacher value (+1 or -1) of probe k at sample i for a seed: a counter-based hash, the
// same for any batching or thread count.
inline double rademacher(std::uint64_t seed, Index i, Index k) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL +
                    static_cast<std::uint64_t>(i) * 0xBF58476D1CE4E5B9ULL +
                    static_cast<std::uint64_t>(k) * 0x94D049BB133111EBULL;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (z & 1ULL) ? 1.0 : -1.0;
}

}  // namespace aloocv
