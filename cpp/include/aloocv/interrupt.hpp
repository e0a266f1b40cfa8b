// Cooperative interruption of long computations (Ctrl-C from Python), with no Python in
// the core. A caller (the binding layer) installs an InterruptContext on its thread for
// the duration of a call: an atomic stop flag plus a poll callback. Long loops call
// interrupt::check():
//  - every thread reads the atomic flag and throws Interrupted once it is set;
//  - only the thread that owns the context (the caller, which is the master thread of
//    the OpenMP teams it starts) calls the poll callback, at most once per
//    kPollInterval; the callback returns true when the call must stop (a pending
//    signal), and the flag is set for everyone.
// OpenMP workers see the caller's context through interrupt::Share, a one-line RAII
// object at the top of a parallel region or loop body. Interrupted is an ordinary
// exception: ExceptionCatcher carries it out of parallel regions, RAII frees the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

namespace aloocv {

// The computation was stopped by the caller's poll callback (e.g. a pending SIGINT).
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

namespace interrupt {

// How often the owning thread may call the poll callback.
constexpr std::chrono::milliseconds kPollInterval{50};

struct Context {
  using Poll = bool (*)(void*);
  std::atomic<bool> stop{false};
  Poll poll = nullptr;  // true: stop (called on the owning thread only)
  void* arg = nullptr;
  std::thread::id owner = std::this_thread::get_id();
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
};

// The context of the calling thread (nullptr: not interruptible).
inline Context*& current() noexcept {
  thread_local Context* ctx = nullptr;
  return ctx;
}

// Throws Interrupted when the current call has been interrupted; on the owning thread,
// polls the callback when kPollInterval has passed since the last poll.
inline void check() {
  Context* c = current();
  if (!c) return;
  if (c->stop.load(std::memory_order_relaxed)) throw Interrupted();
  if (!c->poll || std::this_thread::get_id() != c->owner) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - c->last < kPollInterval) return;
  c->last = now;
  if (c->poll(c->arg)) {
    c->stop.store(true, std::memory_order_relaxed);
    throw Interrupted();
  }
}

// True when the current call has been interrupted (no polling, no throw): for loops
// that must not throw (they return early and let a later check() throw).
inline bool stopped() noexcept {
  const Context* c = current();
  return c && c->stop.load(std::memory_order_relaxed);
}

// Makes `ctx` (the caller's context, read before a parallel region) current on this
// thread for the lifetime of the object: the first statement of an OpenMP region or
// loop body whose work calls check().
class Share {
 public:
  explicit Share(Context* ctx) noexcept : prev_(current()) { current() = ctx; }
  ~Share() { current() = prev_; }
  Share(const Share&) = delete;
  Share& operator=(const Share&) = delete;

 private:
  Context* prev_;
};

// Installs a context on the calling thread for the lifetime of the object.
class Scope {
 public:
  Scope(Context::Poll poll, void* arg) : prev_(current()) {
    ctx_.poll = poll;
    ctx_.arg = arg;
    current() = &ctx_;
  }
  ~Scope() { current() = prev_; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool interrupted() const noexcept { return ctx_.stop.load(std::memory_order_relaxed); }

 private:
  Context ctx_;
  Context* prev_;
};

}  // namespace interrupt
}  // namespace aloocv
