// Running core work with the GIL released and Ctrl-C honoured. No math here.
//
// run_released(f) installs an interrupt context (cpp/include/aloocv/interrupt.hpp) whose
// poll callback, called by the core on this (the calling, OpenMP master) thread at most
// every 50 ms, takes the GIL and runs Python's pending signal handlers
// (PyErr_CheckSignals). When a handler raises (KeyboardInterrupt for SIGINT), the
// exception is kept, every core thread stops at its next check, and the exception is
// raised here once the GIL is back.
//
// A failed allocation (std::bad_alloc) becomes a MemoryError that says what happened and
// what to do (kAllocationFailed): inside run_released, and through the module's exception
// translator (register_translators) everywhere else in the bindings. No math here.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <memory>
#include <new>

#include "aloocv/interrupt.hpp"

namespace aloocv::bind {

namespace py = pybind11;

namespace detail {

struct PendingSignal {
  std::unique_ptr<py::error_already_set> error;
};

inline bool poll_signals(void* arg) {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  static_cast<PendingSignal*>(arg)->error = std::make_unique<py::error_already_set>();
  return true;
}

}  // namespace detail

// The message of a MemoryError from a failed allocation in the core (never a bare
// "std::bad_alloc").
inline constexpr const char* kAllocationFailed =
    "an allocation in aloocv's C++ core failed (std::bad_alloc): this problem's matrices do "
    "not fit in memory. Pass memory_limit= (bytes, or e.g. '8GB') to have their sizes "
    "checked against a budget before the call, or take a route without them: "
    "solver='matrix_free' (scalar L2 losses: no p x p matrix), solver='dual' when n < p, "
    "fewer classes for the multinomial loss, or dask input for a large n";

// Sets MemoryError(kAllocationFailed) (the GIL held) and throws it to pybind11.
[[noreturn]] inline void raise_allocation_failed() {
  PyErr_SetString(PyExc_MemoryError, kAllocationFailed);
  throw py::error_already_set();
}

// Every std::bad_alloc that leaves a binding of this module, inside run_released or not,
// becomes MemoryError(kAllocationFailed) (pybind11's default says only "std::bad_alloc").
inline void register_translators() {
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, kAllocationFailed);
    }
  });
}

// Calls f() without the GIL; a pending signal stops it and raises the handler's exception.
template <class F>
void run_released(F&& f) {
  detail::PendingSignal pending;
  interrupt::Scope scope(&detail::poll_signals, &pending);
  try {
    py::gil_scoped_release release;
    f();
  } catch (const Interrupted&) {
    if (pending.error) throw py::error_already_set(*pending.error);
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  } catch (const std::bad_alloc&) {
    raise_allocation_failed();  // the GIL is back: the release ended with the try block
  }
}

}  // namespace aloocv::bind
