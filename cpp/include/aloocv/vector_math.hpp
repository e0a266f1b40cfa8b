// Elementwise math over arrays, vectorized where the CPU allows (chosen at run time).
#pragma once

#include "common.hpp"

namespace aloocv::vmath {

// out[k] = log(1 + e[k]) for e[k] in [0, 1] (the logistic loss's softplus at
// e = exp(-|eta|)): fdlibm's log kernel on u = fl(1 + e) = 2^j (1 + f), j in {0, 1}, plus
// the rounding correction (e - (u - 1)) / u; within 1 ulp of glibc's log1p (tested on 2e7
// values), four at a time in AVX2 where the CPU has it, std::log1p otherwise. out may be e.
void log1p_unit(const double* e, double* out, Index m);

// out[k] = exp(x[k]): a degree-13 Taylor polynomial on |r| <= log(2) / 2 times 2^n, within
// 1 ulp of glibc's exp (tested), four at a time in AVX2 where the CPU has it; std::exp
// otherwise and outside [-708, 709] (subnormal results, overflow), for infinities and NaN.
// out may be x.
void exp(const double* x, double* out, Index m);

}  // namespace aloocv::vmath
