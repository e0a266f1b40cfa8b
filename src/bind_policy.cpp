// The core's Newton policy as module constants (the dask backend's multinomial cold start
// reads MIN_CLASS_SHARE; its lockstep refits run the core's RefitBatch, refit_batch.hpp; the
// memory model reads DUAL_HEAD_COLUMNS).
#include <pybind11/pybind11.h>

#include "aloocv/loo.hpp"
#include "aloocv/matrix_free.hpp"
#include "aloocv/multinomial.hpp"
#include "aloocv/newton_driver.hpp"

namespace aloocv::bind {
namespace py = pybind11;

void bind_policy(py::module_& m) {
  // newton_driver.hpp: the one Armijo line search and the stall detection
  m.attr("ARMIJO") = aloocv::detail::kArmijo;
  m.attr("MAX_HALVINGS") = aloocv::detail::kMaxHalvings;
  m.attr("TINY_DECREASE") = aloocv::detail::kTinyDecrease;
  m.attr("STALL_ITERS") = aloocv::detail::kStallIters;
  // loo.hpp: exact_loo's chord phase
  m.attr("EXACT_CHORD_RATIO") = kExactChordRatio;
  m.attr("EXACT_MAX_CHORD") = kExactMaxChord;
  // multinomial.hpp: the cold start's clip of the class shares
  m.attr("MIN_CLASS_SHARE") = kMinClassShare;
  // matrix_free.hpp: the dual form's head columns at most (the memory model counts them)
  m.attr("DUAL_HEAD_COLUMNS") = mf::kDualHeadColumns;
}

}  // namespace aloocv::bind
