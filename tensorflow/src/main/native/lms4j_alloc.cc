/*
 * lms4j allocator retry for budgeted workers, preloaded (LD_PRELOAD) into worker JVMs whose
 * TensorFlow ops run one at a time in the caller's thread (inter_op_parallelism_threads = -1).
 *
 * TensorFlow's BFC allocator, when an allocation fails, hands it to tsl::AllocatorRetry, which
 * waits up to 10 s for another thread to free memory before it fails the allocation and logs
 * "ran out of memory trying to allocate". When ops run one at a time nothing frees memory in
 * that wait, except lms4j's own asynchronous swap-outs (liblms4jswap.so's copy thread drops
 * its reference to the device tensor when its copy is done). Every failed allocation thus cost
 * 10 s for nothing: every run that ran out of memory (a probe's failed try, a bisection step,
 * a test that checks the unmodified graph fails) took 10 s longer than its step.
 *
 * This definition of tsl::AllocatorRetry::AllocateRaw (exported by libtensorflow_framework.so.2
 * and called through its PLT, so a preloaded definition takes its place) retries while
 * asynchronous swap-outs are in flight (lms4j_alloc_pending_frees > 0, kept by
 * liblms4jswap.so), within TensorFlow's own deadline, and then makes the last, verbose attempt
 * at once: the allocator logs its out-of-memory line and its dump, and the op fails, as it
 * would have 10 s later. Where the symbol changes in another TensorFlow, nothing is replaced
 * and TensorFlow waits as before.
 *
 * Built with the machine's g++ (it must match TensorFlow's libstdc++ std::function ABI).
 */
#include <time.h>

#include <cstddef>
#include <functional>

extern "C" {
/* Asynchronous swap-out copies queued or running; liblms4jswap.so keeps it (weak reference). */
__attribute__((visibility("default"))) int lms4j_alloc_pending_frees = 0;
/* Allocations that failed for good before TensorFlow's retry deadline (the wait left out). */
__attribute__((visibility("default"))) long lms4j_alloc_unwaited_failures = 0;
/* Allocations that failed at first and then succeeded (a swap-out's copy freed memory). */
__attribute__((visibility("default"))) long lms4j_alloc_waited_successes = 0;
}

namespace tsl {
class AllocatorRetry {
 public:
  void* AllocateRaw(std::function<void*(size_t, size_t, bool)> alloc_func,
                    int max_millis_to_wait, size_t alignment, size_t num_bytes);
};
}  // namespace tsl

static long long now_micros() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

void* tsl::AllocatorRetry::AllocateRaw(
    std::function<void*(size_t, size_t, bool)> alloc_func, int max_millis_to_wait,
    size_t alignment, size_t num_bytes) {
  if (num_bytes == 0) {
    return nullptr;
  }
  void* ptr = alloc_func(alignment, num_bytes, false);
  if (ptr != nullptr) {
    return ptr;
  }
  long long deadline = now_micros() + (long long)max_millis_to_wait * 1000LL;
  while (__atomic_load_n(&lms4j_alloc_pending_frees, __ATOMIC_ACQUIRE) > 0
         && now_micros() < deadline) {
    struct timespec pause = {0, 100 * 1000}; /* 100 us */
    nanosleep(&pause, nullptr);
    ptr = alloc_func(alignment, num_bytes, false);
    if (ptr != nullptr) {
      __atomic_add_fetch(&lms4j_alloc_waited_successes, 1, __ATOMIC_RELAXED);
      return ptr;
    }
  }
  /* the copies in flight are done (or the deadline passed): the last attempt logs a failure */
  ptr = alloc_func(alignment, num_bytes, true);
  if (ptr != nullptr) {
    __atomic_add_fetch(&lms4j_alloc_waited_successes, 1, __ATOMIC_RELAXED);
  } else if (now_micros() < deadline) {
    __atomic_add_fetch(&lms4j_alloc_unwaited_failures, 1, __ATOMIC_RELAXED);
  }
  return ptr;
}
