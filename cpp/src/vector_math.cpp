#include "aloocv/vector_math.hpp"

#include <algorithm>
#include <cmath>

#ifdef ALOOCV_X86_SIMD
#include <immintrin.h>
#endif

namespace aloocv::vmath {

#ifdef ALOOCV_X86_SIMD
namespace {
// fdlibm's e_log.c coefficients (log(1 + f) = f - f^2 / 2 + s (f^2 / 2 + R(s^2)),
// s = f / (2 + f)) and log(2) in two parts.
constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01,
                 kLg3 = 2.857142874366239149e-01, kLg4 = 2.222219843214978396e-01,
                 kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                 kLg7 = 1.479819860511658591e-01;
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kSqrt2 = 1.4142135623730951;

__attribute__((target("avx2,fma"))) inline __m256d c_(double v) { return _mm256_set1_pd(v); }

__attribute__((target("avx2,fma"))) inline __m256d log1p_unit4(__m256d e) {
  const __m256d one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5);
  const __m256d u = _mm256_add_pd(one, e);
  const __m256d c = _mm256_sub_pd(e, _mm256_sub_pd(u, one));  // exact: u - 1 is exact
  const __m256d big = _mm256_cmp_pd(u, _mm256_set1_pd(kSqrt2), _CMP_GT_OQ);
  const __m256d k = _mm256_and_pd(big, one);
  const __m256d f =
      _mm256_blendv_pd(_mm256_sub_pd(u, one), _mm256_sub_pd(_mm256_mul_pd(half, u), one), big);
  const __m256d hfsq = _mm256_mul_pd(_mm256_mul_pd(half, f), f);
  const __m256d s = _mm256_div_pd(f, _mm256_add_pd(_mm256_set1_pd(2.0), f));
  const __m256d z = _mm256_mul_pd(s, s);
  const __m256d w = _mm256_mul_pd(z, z);
  const __m256d t1 = _mm256_mul_pd(
      w, _mm256_add_pd(c_(kLg2),
                       _mm256_mul_pd(w, _mm256_add_pd(c_(kLg4), _mm256_mul_pd(w, c_(kLg6))))));
  const __m256d t2 = _mm256_mul_pd(
      z, _mm256_add_pd(
             c_(kLg1),
             _mm256_mul_pd(
                 w, _mm256_add_pd(
                        c_(kLg3),
                        _mm256_mul_pd(w, _mm256_add_pd(c_(kLg5), _mm256_mul_pd(w, c_(kLg7))))))));
  const __m256d R = _mm256_add_pd(t2, t1);
  const __m256d corr = _mm256_add_pd(_mm256_mul_pd(k, c_(kLn2Lo)), _mm256_div_pd(c, u));
  const __m256d inner = _mm256_add_pd(_mm256_mul_pd(s, _mm256_add_pd(hfsq, R)), corr);
  return _mm256_sub_pd(_mm256_mul_pd(k, c_(kLn2Hi)), _mm256_sub_pd(_mm256_sub_pd(hfsq, inner), f));
}

__attribute__((target("avx2,fma"))) void log1p_unit_avx2(const double* e, double* out, Index m) {
  Index k = 0;
  for (; k + 4 <= m; k += 4) _mm256_storeu_pd(out + k, log1p_unit4(_mm256_loadu_pd(e + k)));
  if (k < m) {  // the tail through the same four-wide code: the same bits wherever it lies
    alignas(32) double buf[4] = {0.0, 0.0, 0.0, 0.0};
    for (Index r = k; r < m; ++r) buf[r - k] = e[r];
    _mm256_store_pd(buf, log1p_unit4(_mm256_load_pd(buf)));
    for (Index r = k; r < m; ++r) out[r] = buf[r - k];
  }
}

// exp(x) for x in [kExpMin, kExpMax]: x = n log(2) + r, |r| <= log(2) / 2 (n rounded through
// the 1.5 2^52 shift, r in two fused parts of log(2)), exp(r) by its Taylor polynomial of degree 13
// (truncation below 2^-58 relative) in Horner form, times 2^n built in the exponent bits.
// Lanes outside that range (a subnormal result below, n > 1023 or overflow above), the
// infinities and NaN are recomputed by std::exp.
constexpr double kLog2e = 1.4426950408889634, kShift = 6755399441055744.0;  // 1.5 2^52
constexpr double kLn2Hi1 = 6.93147180559945286e-01, kLn2Lo1 = 2.319046813846299558e-17;
constexpr double kExpMin = -708.0, kExpMax = 709.0;

__attribute__((target("avx2,fma"))) inline __m256d exp4(__m256d x) {
  const __m256d t = _mm256_fmadd_pd(x, c_(kLog2e), c_(kShift));
  const __m256d n = _mm256_sub_pd(t, c_(kShift));
  __m256d r = _mm256_fnmadd_pd(n, c_(kLn2Hi1), x);
  r = _mm256_fnmadd_pd(n, c_(kLn2Lo1), r);
  // 1 / k! for k = 13 down to 2
  __m256d q = c_(1.6059043836821613e-10);
  q = _mm256_fmadd_pd(q, r, c_(2.08767569878681e-09));
  q = _mm256_fmadd_pd(q, r, c_(2.505210838544172e-08));
  q = _mm256_fmadd_pd(q, r, c_(2.755731922398589e-07));
  q = _mm256_fmadd_pd(q, r, c_(2.7557319223985893e-06));
  q = _mm256_fmadd_pd(q, r, c_(2.48015873015873e-05));
  q = _mm256_fmadd_pd(q, r, c_(0.0001984126984126984));
  q = _mm256_fmadd_pd(q, r, c_(0.001388888888888889));
  q = _mm256_fmadd_pd(q, r, c_(0.008333333333333333));
  q = _mm256_fmadd_pd(q, r, c_(0.041666666666666664));
  q = _mm256_fmadd_pd(q, r, c_(0.16666666666666666));
  q = _mm256_fmadd_pd(q, r, c_(0.5));
  q = _mm256_fmadd_pd(q, r, c_(1.0));
  q = _mm256_fmadd_pd(q, r, c_(1.0));
  // 2^n: the shifted t holds n in its low mantissa bits
  const __m256i bits = _mm256_add_epi64(_mm256_slli_epi64(_mm256_castpd_si256(t), 52),
                                        _mm256_set1_epi64x(1023LL << 52));
  return _mm256_mul_pd(q, _mm256_castsi256_pd(bits));
}

__attribute__((target("avx2,fma"))) void exp_avx2(const double* x, double* out, Index m) {
  const __m256d lo = c_(kExpMin), hi = c_(kExpMax);
  Index k = 0;
  alignas(32) double buf[4];
  for (; k < m; k += 4) {
    const Index w = std::min<Index>(4, m - k);
    __m256d v;
    if (w == 4) {
      v = _mm256_loadu_pd(x + k);
    } else {  // the tail through the same four-wide code: the same bits wherever it lies
      for (Index r = 0; r < 4; ++r) buf[r] = r < w ? x[k + r] : 0.0;
      v = _mm256_load_pd(buf);
    }
    const __m256d e = exp4(v);
    const __m256d in =
        _mm256_and_pd(_mm256_cmp_pd(v, lo, _CMP_GE_OQ), _mm256_cmp_pd(v, hi, _CMP_LE_OQ));
    const int odd = ~_mm256_movemask_pd(in) & 0xF;  // outside [lo, hi] or NaN
    if (w == 4 && odd == 0) {
      _mm256_storeu_pd(out + k, e);
      continue;
    }
    _mm256_store_pd(buf, e);
    for (Index r = 0; r < w; ++r) out[k + r] = (odd >> r) & 1 ? std::exp(x[k + r]) : buf[r];
  }
}

}  // namespace
#endif

namespace {
#ifdef ALOOCV_X86_SIMD
#define ALOOCV_VMATH_KERNEL(f) (f)
#else
#define ALOOCV_VMATH_KERNEL(f) nullptr
#endif
using Kernel = void (*)(const double*, double*, Index);

// out = f(x) elementwise: the AVX2 kernel where there is one and the CPU has it, the C
// library's function `scalar` otherwise.
template <class Scalar>
void elementwise([[maybe_unused]] Kernel avx2, Scalar scalar, const double* x, double* out,
                 Index m) {
#ifdef ALOOCV_X86_SIMD
  if (avx2 != nullptr && cpu_has_avx2_fma()) {
    avx2(x, out, m);
    return;
  }
#endif
  for (Index k = 0; k < m; ++k) out[k] = scalar(x[k]);
}
}  // namespace

void log1p_unit(const double* e, double* out, Index m) {
  elementwise(
      ALOOCV_VMATH_KERNEL(log1p_unit_avx2), [](double v) { return std::log1p(v); }, e, out, m);
}

void exp(const double* x, double* out, Index m) {
  elementwise(ALOOCV_VMATH_KERNEL(exp_avx2), [](double v) { return std::exp(v); }, x, out, m);
}

#undef ALOOCV_VMATH_KERNEL

}  // namespace aloocv::vmath
