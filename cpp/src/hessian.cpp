#include "aloocv/hessian.hpp"

#include <cmath>
#include <vector>

#include "aloocv/blas.hpp"

namespace aloocv {

void linear_predictor(const Design& X, const double* beta, bool intercept, double* eta,
                      int n_threads) {
  const Index off = intercept ? 1 : 0;
  const double b = intercept ? beta[0] : 0.0;
  Eigen::Map<const Vec> theta(beta + off, X.p);
  const Index B = 4096;
  const Index nblocks = (X.n + B - 1) / B;
  ExceptionCatcher guard;
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(n_threads, double(X.n) * double(X.p + 1)))
  for (Index blk = 0; blk < nblocks; ++blk) {
    guard.run([&] {
      interrupt::check();
      const Index i0 = blk * B, i1 = std::min(X.n, i0 + B);
      Eigen::Map<Vec> out(eta + i0, i1 - i0);
      if (!X.rows_gemv(i0, i1, false, theta.data(), 0.0, eta + i0)) {
        X.for_row_blocks(i0, i1, [&](const auto& M, Index a) {
          if (!block_gemv(M, false, theta.data(), 0.0, eta + a)) {
            Eigen::Map<Vec>(eta + a, M.rows()).noalias() = M * theta;
          }
        });
      }
      out.array() += b;
    });
  }
  guard.rethrow();
}

namespace {

// Whether every entry of rows [i0, i1) of the view is finite (x - x is 0 exactly for a
// finite x and NaN otherwise: one vectorizable reduction over contiguous runs).
template <class T>
bool rows_finite(const DenseView& v, const T* base, Index i0, Index i1) {
  auto run_finite = [](const T* a, Index len) {
    T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // independent sums: the loop vectorizes
    Index k = 0;
    for (; k + 8 <= len; k += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += a[k + l] - a[k + l];
    }
    for (; k < len; ++k) acc[0] += a[k] - a[k];
    T sum = 0;
    for (int l = 0; l < 8; ++l) sum += acc[l];
    return sum == T(0);
  };
  if (v.col_stride == 1 && v.row_stride == v.p) {  // C order: one run
    return run_finite(base + i0 * v.p, (i1 - i0) * v.p);
  }
  if (v.row_stride == 1) {  // F order: a run per column
    for (Index j = 0; j < v.p; ++j) {
      if (!run_finite(base + j * v.col_stride + i0, i1 - i0)) return false;
    }
    return true;
  }
  if (v.col_stride == 1) {  // rows with unit inner stride
    for (Index i = i0; i < i1; ++i) {
      if (!run_finite(base + i * v.row_stride, v.p)) return false;
    }
    return true;
  }
  for (Index i = i0; i < i1; ++i) {
    for (Index j = 0; j < v.p; ++j) {
      const T x = base[i * v.row_stride + j * v.col_stride];
      if (!(x - x == T(0))) return false;
    }
  }
  return true;
}

}  // namespace

Index first_nonfinite_row(const Design& X, int n_threads) {
  if (X.sparse || X.n == 0 || X.p == 0) return -1;
  const DenseView& v = X.dense;
  // about 64 Ki entries per block; F order: long runs down each column (16 Ki rows)
  const Index B =
      v.row_stride == 1 && v.p > 1 ? Index(1) << 14 : std::max<Index>(1, (Index(1) << 16) / X.p);
  const Index nblocks = (X.n + B - 1) / B;
  std::vector<char> bad(static_cast<size_t>(nblocks), 0);
  ExceptionCatcher guard;
#pragma omp parallel for schedule(static) \
    num_threads(threads_for(n_threads, 0.25 * double(X.n) * double(X.p)))
  for (Index blk = 0; blk < nblocks; ++blk) {
    guard.run([&] {
      if ((blk & 63) == 0) interrupt::check();
      const Index i0 = blk * B, i1 = std::min(X.n, i0 + B);
      v.visit([&](const auto* base) {
        bad[static_cast<size_t>(blk)] = rows_finite(v, base, i0, i1) ? 0 : 1;
      });
    });
  }
  guard.rethrow();
  for (Index blk = 0; blk < nblocks; ++blk) {
    if (!bad[static_cast<size_t>(blk)]) continue;
    const Index i0 = blk * B, i1 = std::min(X.n, i0 + B);
    for (Index i = i0; i < i1; ++i) {
      const bool ok = v.visit([&](const auto* base) { return rows_finite(v, base, i, i + 1); });
      if (!ok) return i;
    }
  }
  return -1;
}

void column_second_moments(const Design& X, const double* w, Index k, double* all, double* sampled,
                           int n_threads) {
  const Index n = X.n, p = X.p;
  const DenseView& v = X.dense;
  const int nt = threads_for(n_threads, 2.0 * double(n) * double(p));
  const Partition part{n, reduction_chunks(n, 2 * p, nt, 1024)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * 2 * p), 0.0);
  ExceptionCatcher guard;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (Index c = 0; c < part.chunks; ++c) {
    guard.run([&] {
      interrupt::check();
      double* acc_all = partial.data() + c * 2 * p;
      double* acc_sampled = acc_all + p;
      v.visit([&](const auto* base) {
        for (Index i = part.begin(c); i < part.begin(c + 1); ++i) {
          const auto* row = base + i * v.row_stride;
          const double wi = w ? w[i] : 1.0;
          double* acc = (i % k == 0) ? acc_sampled : acc_all;
          for (Index j = 0; j < p; ++j) {
            const double x = static_cast<double>(row[j]);
            acc[j] += wi * x * x;
          }
        }
      });
    });
  }
  guard.rethrow();
  // the sampled rows' sums went to acc_sampled only: all = the other rows' + the sample's
  std::fill(all, all + p, 0.0);
  std::fill(sampled, sampled + p, 0.0);
  for (Index c = 0; c < part.chunks; ++c) {
    const double* acc_all = partial.data() + c * 2 * p;
    for (Index j = 0; j < p; ++j) {
      sampled[j] += acc_all[p + j];
      all[j] += acc_all[j] + acc_all[p + j];
    }
  }
}

void gradient(const Design& X, const double* r, bool intercept, double* out, int n_threads) {
  const Index off = intercept ? 1 : 0;
  const Index p1 = X.p + off;
  const int nt = threads_for(n_threads, double(X.n) * double(p1));
  const Partition part{X.n, reduction_chunks(X.n, p1, nt, 1024)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * p1), 0.0);
  ExceptionCatcher guard;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (Index c = 0; c < part.chunks; ++c) {
    guard.run([&] {
      interrupt::check();
      const Index i0 = part.begin(c), i1 = part.begin(c + 1);
      Eigen::Map<Vec> acc(partial.data() + c * p1, p1);
      Eigen::Map<const Vec> rc(r + i0, i1 - i0);
      if (intercept) acc[0] = rc.sum();
      if (X.rows_gemv(i0, i1, true, r + i0, 0.0, acc.data() + off)) return;
      bool first = true;
      X.for_row_blocks(i0, i1, [&](const auto& M, Index a) {
        Eigen::Map<const Vec> rb(r + a, M.rows());
        if (!block_gemv(M, true, rb.data(), first ? 0.0 : 1.0, acc.data() + off)) {
          if (first) {
            acc.tail(X.p).noalias() = M.transpose() * rb;
          } else {
            acc.tail(X.p).noalias() += M.transpose() * rb;
          }
        }
        first = false;
      });
    });
  }
  guard.rethrow();
  Eigen::Map<Vec> o(out, p1);
  o.setZero();
  for (Index c = 0; c < part.chunks; ++c) o += Eigen::Map<const Vec>(partial.data() + c * p1, p1);
}

// Work (flops) per chunk of a sparse Hessian, in units of its dense p1 x p1 partial.
constexpr double kSparseWorkPerPartial = 8.0;

namespace {

// Lower triangle of sum_i d_i x~_i x~_i^T over sparse rows [i0, i1), restricted to the
// columns with pos[j] >= 0 (pos == nullptr: all), added into acc (p1 x p1).
void sparse_outer(const CsrView& X, const double* d, bool intercept, const int* pos, Index i0,
                  Index i1, double* acc, Index p1) {
  const Index off = intercept ? 1 : 0;
  std::vector<Index> jj;
  std::vector<double> vv;
  for (Index i = i0; i < i1; ++i) {
    const double di = d[i];
    if (di == 0.0) continue;
    jj.clear();
    vv.clear();
    for (Index a = X.indptr[i]; a < X.indptr[i + 1]; ++a) {
      const int j = pos ? pos[X.indices[a]] : X.indices[a];
      if (j < 0) continue;
      jj.push_back(off + j);
      vv.push_back(X.val(a));
    }
    if (intercept) {
      acc[0] += di;
      for (size_t a = 0; a < jj.size(); ++a) acc[jj[a]] += di * vv[a];  // row jj, col 0
    }
    for (size_t a = 0; a < jj.size(); ++a) {
      const double va = di * vv[a];
      const Index ja = jj[a];
      for (size_t b = 0; b < jj.size(); ++b) {
        const Index jb = jj[b];
        // lower triangle: row max, column min (duplicate-free rows: a pair counted once per
        // ordered pair, and the diagonal once)
        if (jb > ja) {
          acc[ja * p1 + jb] += va * vv[b];
        } else if (jb == ja && b == a) {
          acc[ja * p1 + ja] += va * vv[b];
        }
      }
    }
  }
}

// The dense float32 route of hessian() for the rows [c0, c1): each block of B rows is
// packed (scaled by sqrt|d_i|) in float32 and multiplied by SSYRK (about twice the rate of
// DSYRK), and the block products, p1 x p1 sums of B terms each, are accumulated into acc in
// float64: the float32 rounding stays that of one block (relative ~sqrt(B) 2^-24 of the
// block's |terms|), the sum over n rows is float64. Returns false when SSYRK did not run.
bool hessian_f32(const Design& X, const double* d, bool intercept, Columns cols, Index c0, Index c1,
                 Index B, Index p1, double* acc, std::vector<float>& pack,
                 std::vector<float>& blk) {
  const Index pp = p1 * p1;
  pack.resize(static_cast<size_t>(p1 * B));
  blk.resize(static_cast<size_t>(pp));
  std::vector<double> scale(static_cast<size_t>(B));
  std::fill(acc, acc + pp, 0.0);
  for (Index i0 = c0; i0 < c1; i0 += B) {
    interrupt::check();
    const Index i1 = std::min(c1, i0 + B), m = i1 - i0;
    for (int sign = 1; sign >= -1; sign -= 2) {
      bool any = false;
      for (Index i = i0; i < i1; ++i) {
        const double v = std::max(sign * d[i], 0.0);
        scale[static_cast<size_t>(i - i0)] = std::sqrt(v);
        any = any || v > 0.0;
      }
      if (!any) continue;
      X.pack_rows(i0, i1, scale.data(), intercept, pack.data(), cols);
      if (!blas::syrk_lower_f32(p1, m, pack.data(), p1, blk.data(), p1)) return false;
      for (Index j = 0; j < p1; ++j)
        for (Index i = j; i < p1; ++i)
          acc[j * p1 + i] += sign * static_cast<double>(blk[static_cast<size_t>(j * p1 + i)]);
    }
  }
  return true;
}

// One chunk's X~^T diag(d) X~ (rows [c0, c1), lower triangle of acc) by the small kernel
// (blas::syrk_small_lower), d of any sign. Rows with unit column stride and every column
// are read in place (the d-scaled copy S alone is packed; the intercept's row of H is
// sum d and the column sums of S); others are packed first. Blocks of B = block_rows(p1)
// rows (a copy of about 1 MiB): the block's rows stream in through the copy, and the
// kernel's runs of 64 rows then come from the caches (at 1e6 x 50: 26.7 GFlop/s with
// blocks of 256 rows, 28.8 with 2048).
void hessian_small(const Design& X, const double* d, bool intercept, Columns cols, Index c0,
                   Index c1, Index p1, Index B, double* acc, std::vector<double>& pack,
                   std::vector<double>& scaled) {
  const DenseView& v = X.dense;
  const bool in_place = cols.all() && v.col_stride == 1 && v.data != nullptr;
  const Index off = intercept ? 1 : 0;
  const Index w = in_place ? X.p : p1;  // the width the kernel sees
  if (!in_place) pack.resize(static_cast<size_t>(p1 * B));
  scaled.resize(static_cast<size_t>(p1 * B));
  std::fill(acc, acc + p1 * p1, 0.0);
  for (Index i0 = c0; i0 < c1; i0 += B) {
    interrupt::check();
    const Index i1 = std::min(c1, i0 + B), m = i1 - i0;
    const double* T = pack.data();
    Index ld = w;
    if (in_place) {
      T = v.data + i0 * v.row_stride;
      ld = v.row_stride;
    } else {
      X.pack_rows(i0, i1, nullptr, intercept, pack.data(), cols);
    }
    double* S = scaled.data();
    const bool head = in_place && intercept;  // H[0][0] += sum d, H[j+1][0] += sum_k S_kj
    for (Index k = 0; k < m; ++k) {
      const double dk = d[i0 + k];
      const double* t = T + k * ld;
      double* sk = S + k * w;
      for (Index j = 0; j < w; ++j) sk[j] = dk * t[j];
      if (head) {
        acc[0] += dk;
        for (Index j = 0; j < w; ++j) acc[1 + j] += sk[j];
      }
    }
    double* C = in_place ? acc + off * p1 + off : acc;
    blas::syrk_small_lower(w, m, S, w, T, ld, C, p1);
  }
}

}  // namespace

void hessian(const Design& X, const double* d, bool intercept, double* H, int n_threads,
             Columns cols, bool single) {
  const bool f32 = !X.sparse && (X.dense.is_f32() || single) && blas::has_ssyrk();
  const Index off = intercept ? 1 : 0;
  const Index q = cols.all() ? X.p : cols.size;
  const Index p1 = q + off;
  const Index pp = p1 * p1;
  // Sparse rows cost about (nnz_i + 1)^2 each, far below a dense partial of p1^2: give
  // every chunk at least kSparseWorkPerPartial times its partial's size of work, or the
  // chunks' dense partials (zeroing and summing 64 p1 x p1 arrays) cost more than the
  // Hessian itself (one-hot designs with a few hundred columns). Depends on the data
  // only, never on the thread count.
  Index min_rows = 256;
  double flops = double(X.n) * double(pp);
  if (X.sparse && X.n > 0) {
    const double nnz_row = double(X.csr.indptr[X.n] - X.csr.indptr[0]) / double(X.n) + double(off);
    const double per_row = std::max(1.0, nnz_row * nnz_row);
    flops = double(X.n) * per_row;
    min_rows = std::max<Index>(min_rows, Index(kSparseWorkPerPartial * double(pp) / per_row));
  }
  const int nt = threads_for(n_threads, flops);
  const Partition part{X.n, reduction_chunks(X.n, pp, nt, min_rows)};
  const Index B = block_rows(p1);
  // Narrow dense float64 rows: the core's own weighted update (blas::syrk_small_lower) on
  // blocks of B rows (read in place or packed) and their d-scaled copy, d of any sign in
  // one pass (hessian_small).
  const bool small = !X.sparse && !f32 && p1 <= blas::kSmallSyrkMax && blas::has_small_syrk();
  // The chunks run in waves of one chunk per thread: a wave's partials are added to H in
  // chunk order before the next wave starts, so that nt partials (not one per chunk, up
  // to kMaxReductionChunks p1 x p1 arrays: 20 MiB at p = 200) are held at once. The sums
  // are those of the chunks in chunk order, whatever the thread count.
  const Index wave = std::min<Index>(part.chunks, std::max(1, nt));
  std::vector<double> partial(static_cast<size_t>(wave * pp));
  std::vector<int> pos;
  if (X.sparse && !cols.all()) {
    pos.assign(static_cast<size_t>(X.p), -1);
    for (Index k = 0; k < q; ++k) pos[static_cast<size_t>(cols.cols[k])] = static_cast<int>(k);
  }
  for (Index j = 0; j < p1; ++j) std::fill(H + j * p1 + j, H + (j + 1) * p1, 0.0);
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
    std::vector<double> pack, scale, neg;
    std::vector<float> pack32, blk32;
    guard.run([&] {
      if (!X.sparse && !f32) {
        pack.resize(static_cast<size_t>(p1 * B));
        scale.resize(static_cast<size_t>(B));
      }
    });
    for (Index w0 = 0; w0 < part.chunks; w0 += wave) {
      const Index w1 = std::min(part.chunks, w0 + wave);
#pragma omp for schedule(dynamic, 1)
      for (Index c = w0; c < w1; ++c) {
        if (guard.failed()) continue;
        guard.run([&] {
          double* acc = partial.data() + (c - w0) * pp;
          const Index c0 = part.begin(c), c1 = part.begin(c + 1);
          interrupt::check();
          if (X.sparse) {
            std::fill(acc, acc + pp, 0.0);
            sparse_outer(X.csr, d, intercept, pos.empty() ? nullptr : pos.data(), c0, c1, acc, p1);
            return;
          }
          if (f32 && hessian_f32(X, d, intercept, cols, c0, c1, B, p1, acc, pack32, blk32)) {
            return;
          }
          if (small) {
            hessian_small(X, d, intercept, cols, c0, c1, p1, B, acc, pack, neg);
            return;
          }
          if (pack.empty()) {  // no SSYRK after all: the float64 blocks
            pack.resize(static_cast<size_t>(p1 * B));
            scale.resize(static_cast<size_t>(B));
          }
          bool first = true;
          for (Index i0 = c0; i0 < c1; i0 += B) {
            interrupt::check();
            const Index i1 = std::min(c1, i0 + B);
            bool negative = false;
            for (Index i = i0; i < i1; ++i) {
              scale[i - i0] = std::sqrt(std::max(d[i], 0.0));
              negative = negative || d[i] < 0.0;
            }
            X.pack_rows(i0, i1, scale.data(), intercept, pack.data(), cols);
            blas::syrk_lower(p1, i1 - i0, pack.data(), p1, first ? 0.0 : 1.0, acc, p1);
            first = false;
            if (negative) {  // a loss with negative curvature somewhere (Tweedie, power > 2)
              for (Index i = i0; i < i1; ++i) scale[i - i0] = std::sqrt(std::max(-d[i], 0.0));
              X.pack_rows(i0, i1, scale.data(), intercept, pack.data(), cols);
              neg.resize(static_cast<size_t>(pp));
              blas::syrk_lower(p1, i1 - i0, pack.data(), p1, 0.0, neg.data(), p1);
              for (Index j = 0; j < p1; ++j)
                for (Index i = j; i < p1; ++i)
                  acc[j * p1 + i] -= neg[static_cast<size_t>(j * p1 + i)];
            }
          }
          if (first) std::fill(acc, acc + pp, 0.0);
        });
      }
      // (implicit barrier) the wave's partials into the lower triangle of H, in chunk
      // order, parallel over columns
#pragma omp for schedule(dynamic, 8)
      for (Index j = 0; j < p1; ++j) {
        if (guard.failed()) continue;
        double* hj = H + j * p1;
        for (Index c = w0; c < w1; ++c) {
          const double* pj = partial.data() + (c - w0) * pp + j * p1;
          for (Index i = j; i < p1; ++i) hj[i] += pj[i];
        }
      }
    }
  }
  guard.rethrow();
  for (Index j = 0; j < p1; ++j)
    for (Index i = j + 1; i < p1; ++i) H[i * p1 + j] = H[j * p1 + i];
}

}  // namespace aloocv
