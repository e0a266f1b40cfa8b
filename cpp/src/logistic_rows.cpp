// The logistic loss's rows in blocks: the fused Newton step's (logistic_fused_rows) and the
// objective and derivative passes' (logistic_rows), newton.hpp.
#include <algorithm>
#include <cmath>

#include "aloocv/losses.hpp"
#include "aloocv/newton.hpp"
#include "aloocv/vector_math.hpp"

namespace aloocv::detail {

namespace {

constexpr Index kChunk = 256;

#if defined(__GNUC__) || defined(__clang__)
#define ALOOCV_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ALOOCV_ALWAYS_INLINE inline
#endif

// The rows [0, m) of one chunk (m <= kChunk), the exp already in e: eta, g = w l',
// d = w l'' and the linear part of w l in lin (per row: summed by the caller in row order).
// Branch-free, so that the compiler vectorizes it (weights in wk, zero at `skip`). Where a
// weight is zero, g and d are zero (w times finite parts) and the row adds nothing.
ALOOCV_ALWAYS_INLINE void rows_body(Index m, const double* eta, const double* e, const double* y,
                                    const double* wk, double* gb, double* d, double* lin) {
  for (Index k = 0; k < m; ++k) {
    const double t = eta[k], w = wk[k], yk = y[k];
    const Logistic::Parts q = Logistic::parts(yk, t, e[k]);
    lin[k] = w == 0.0 ? 0.0 : w * ((t > 0 ? t : 0.0) - yk * t);
    gb[k] = w * q.d1;
    d[k] = w * q.d2;
  }
}

void rows_plain(Index m, const double* eta, const double* e, const double* y, const double* wk,
                double* gb, double* d, double* lin) {
  rows_body(m, eta, e, y, wk, gb, d, lin);
}

#ifdef ALOOCV_X86_SIMD
// the same loop in 256-bit vectors (IEEE divisions and products: the same bits)
__attribute__((target("avx2"))) void rows_avx2(Index m, const double* eta, const double* e,
                                               const double* y, const double* wk, double* gb,
                                               double* d, double* lin) {
  rows_body(m, eta, e, y, wk, gb, d, lin);
}
#endif

// One chunk of rows r0 + [0, mc) at eta t[0, mc): e = exp(-|t|), g = w l', d = w l''
// (g, d nullptr: the values only); returns the sum of w l in row order.
double chunk_rows(const Problem& pb, Index r0, Index mc, const double* t, double* g, double* d,
                  Index skip) {
  double e[kChunk], wk[kChunk], lin[kChunk], gs[kChunk], ds[kChunk];
  for (Index k = 0; k < mc; ++k) e[k] = -std::abs(t[k]);
  vmath::exp(e, e, mc);
  if (pb.w) {
    std::copy(pb.w + r0, pb.w + r0 + mc, wk);
  } else {
    std::fill(wk, wk + mc, 1.0);
  }
  if (skip >= r0 && skip < r0 + mc) wk[skip - r0] = 0.0;
  double* gg = g ? g : gs;
  double* dd = d ? d : ds;
#ifdef ALOOCV_X86_SIMD
  if (cpu_has_avx2_fma()) {
    rows_avx2(mc, t, e, pb.y + r0, wk, gg, dd, lin);
  } else {
    rows_plain(mc, t, e, pb.y + r0, wk, gg, dd, lin);
  }
#else
  rows_plain(mc, t, e, pb.y + r0, wk, gg, dd, lin);
#endif
  vmath::log1p_unit(e, e, mc);
  double sum = 0.0;
  for (Index k = 0; k < mc; ++k) sum += lin[k] + (wk[k] == 0.0 ? 0.0 : wk[k] * e[k]);
  return sum;
}

}  // namespace

double logistic_rows(const Problem& pb, Index i0, Index m, const double* eta, double* g, double* d,
                     Index skip) {
  double sum = 0.0;
  for (Index c0 = 0; c0 < m; c0 += kChunk) {
    const Index r0 = i0 + c0;
    sum += chunk_rows(pb, r0, std::min(m, c0 + kChunk) - c0, eta + r0, g ? g + r0 : nullptr,
                      d ? d + r0 : nullptr, skip);
  }
  return sum;
}

double logistic_fused_rows(const Problem& pb, Index i0, Index m, const double* eta, const double* x,
                           double* eta_new, double* gb, double* d, Index skip) {
  double sum = 0.0;
  for (Index c0 = 0; c0 < m; c0 += kChunk) {
    const Index mc = std::min(m, c0 + kChunk) - c0, r0 = i0 + c0;
    for (Index k = 0; k < mc; ++k) eta_new[r0 + k] = eta[r0 + k] + x[c0 + k];
    sum += chunk_rows(pb, r0, mc, eta_new + r0, gb + c0, d + r0, skip);
  }
  return sum;
}

}  // namespace aloocv::detail
