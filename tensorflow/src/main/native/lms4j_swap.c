/*
 * lms4j native swap ops for TensorFlow (C kernel API). Loaded with TensorFlow.loadLibrary; the
 * ops and kernels register themselves when the library is loaded.
 *
 *   Lms4jSwapOut(x: T) -> y: T       copies x once into host memory outside TensorFlow's
 *                                    allocator (mmap / aligned_alloc); y wraps that memory and
 *                                    TensorFlow's reference counting frees it after its last
 *                                    consumer (also when a step fails).
 *   Lms4jSwapIn(x: T) -> y: T        copies x once into a tensor from TF_AllocateOutput (the
 *                                    device allocator, so it counts in the budget).
 *   Lms4jSwapOutAsync(x: T) -> y: T  returns at once; the copy runs on the library's copy
 *                                    thread while compute goes on. The device tensor is held
 *                                    until the copy is done; a swap-in (or the release of y)
 *                                    waits for it. (TF's C API for async kernels cannot be used:
 *                                    it hands the kernel a pointer to a done callback on the
 *                                    stack of ComputeAsync, dead once that returns.)
 *   Lms4jSwapOutDisk(x: T) -> h      streams x to a file (header + bytes); h is an int64 scalar
 *                                    whose release deletes the file.
 *   Lms4jSwapInDisk(h) -> y: T       reads the file straight into a TF_AllocateOutput tensor.
 *   Lms4jSwapStats() -> int64[13]    counters (see STAT_* below).
 *   Lms4jMemcpyBench(bytes) -> ns[2] for benchmarks: the time of one memcpy of `bytes` between
 *                                    two warm buffers, and of the copy back (a round trip).
 *
 * Large host buffers are mappings of their own, 2 MiB aligned and advised to use huge pages.
 * Fresh memory faults in far below memcpy speed (and huge pages may wait for compaction), so a
 * freed mapping is kept in a small cache for the next swap-out of the same size (the next step
 * swaps the same tensors); mappings unused for CACHE_IDLE_NS are unmapped by a trimmer thread,
 * so the process's memory goes back once training stops. LMS4J_SWAP_CACHE_MB caps the cache
 * (default 4096; 0 turns it off).
 *
 * LMS4J_SWAP_MAPS=memfd backs each large host buffer with memfd_create("lms4j-swap") instead
 * of anonymous memory, so the library's mappings can be told apart from the rest of the process
 * in /proc/PID/maps ("/memfd:lms4j-swap (deleted)") on any kernel (naming anonymous mappings
 * needs CONFIG_ANON_VMA_NAME, which many kernels lack). Tests use it to check from outside the
 * library that host buffers are released; shared memory gets no transparent huge pages unless
 * shmem_enabled allows them, so first touches are slower (0.8 vs 4.3 GB/s measured here).
 */
#define _GNU_SOURCE
#include "lms4j_tf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 64
#define HUGE_PAGE (2u << 20)
#define MMAP_MIN (1u << 20)

enum {
  STAT_HOST_LIVE_BYTES, STAT_HOST_LIVE_BUFFERS, STAT_HOST_PEAK_BYTES, STAT_SWAP_OUTS,
  STAT_SWAP_INS, STAT_SWAP_INS_COPIED_INPUT, STAT_DISK_LIVE_FILES, STAT_DISK_BYTES_WRITTEN,
  STAT_DISK_BYTES_READ, STAT_HOST_FREES, STAT_HOST_CACHED_BYTES,
  /* liblms4jalloc.so's counters when a worker preloads it (-1 without it) */
  STAT_ALLOC_UNWAITED_FAILURES, STAT_ALLOC_WAITED_SUCCESSES, STAT_COUNT
};
static int64_t stats[STAT_COUNT];

/* Kept by liblms4jalloc.so when a worker preloads it (src/main/native/lms4j_alloc.cc): a failed
 * allocation waits for memory only while copies are queued or running, since the copy thread's
 * release of a device tensor is the one free that can come while ops run one at a time. Weak:
 * without the preloaded library their addresses are null and nothing is counted. */
extern int lms4j_alloc_pending_frees __attribute__((weak));
extern long lms4j_alloc_unwaited_failures __attribute__((weak));
extern long lms4j_alloc_waited_successes __attribute__((weak));

#define TYPES "{float, double, int32, uint8, int16, int8, complex64, int64, bool, qint8, " \
    "quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}"

/* ---- host buffers ------------------------------------------------------------------------ */

/* Live host buffers: to tell whether a swap-in's input is still our buffer (TF did not copy it)
 * and whether its asynchronous copy is done. */
typedef struct {
  void* p;
  int ready;
} Live;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cv = PTHREAD_COND_INITIALIZER;
static Live* live = NULL;
static size_t live_n = 0, live_cap = 0;

static void live_add(void* p, int ready) {
  pthread_mutex_lock(&live_mu);
  if (live_n == live_cap) {
    size_t cap = live_cap ? live_cap * 2 : 64;
    Live* l = realloc(live, cap * sizeof(Live));
    if (l) { live = l; live_cap = cap; }
  }
  if (live_n < live_cap) { live[live_n].p = p; live[live_n].ready = ready; live_n++; }
  pthread_mutex_unlock(&live_mu);
}

static Live* live_find(const void* p) {
  for (size_t i = 0; i < live_n; i++) {
    if (live[i].p == p) return &live[i];
  }
  return NULL;
}

/* Waits until p's copy is done; returns whether p is one of our live buffers. */
static int live_wait(const void* p) {
  pthread_mutex_lock(&live_mu);
  Live* l;
  while ((l = live_find(p)) && !l->ready) pthread_cond_wait(&live_cv, &live_mu);
  pthread_mutex_unlock(&live_mu);
  return l != NULL;
}

static void live_ready(const void* p) {
  pthread_mutex_lock(&live_mu);
  Live* l = live_find(p);
  if (l) l->ready = 1;
  pthread_cond_broadcast(&live_cv);
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(void* p) {
  pthread_mutex_lock(&live_mu);
  Live* l;
  while ((l = live_find(p)) && !l->ready) pthread_cond_wait(&live_cv, &live_mu);
  if (l) *l = live[--live_n];
  pthread_mutex_unlock(&live_mu);
}

static size_t mapped_size(size_t len) { return (len + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1); }

/* ---- cache of freed mappings ------------------------------------------------------------- */

#define CACHE_SLOTS 256
#define CACHE_IDLE_NS 10000000000LL
typedef struct {
  void* p;
  size_t size;
  int64_t freed_ns;
} Cached;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static Cached cache[CACHE_SLOTS];
static int cache_n = 0;
static int64_t cache_cap = -1;
static pthread_once_t trimmer_once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void* trimmer(void* arg) {
  (void)arg;
  for (;;) {
    struct timespec d = {0, 250000000L};
    nanosleep(&d, NULL);
    int64_t now = now_ns();
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < cache_n;) {
      if (now - cache[i].freed_ns > CACHE_IDLE_NS) {
        munmap(cache[i].p, cache[i].size);
        __atomic_sub_fetch(&stats[STAT_HOST_CACHED_BYTES], (int64_t)cache[i].size,
            __ATOMIC_SEQ_CST);
        cache[i] = cache[--cache_n];
      } else {
        i++;
      }
    }
    pthread_mutex_unlock(&cache_mu);
  }
  return NULL;
}

static void start_trimmer(void) {
  const char* e = getenv("LMS4J_SWAP_CACHE_MB");
  cache_cap = (e ? atoll(e) : 4096) << 20;
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_create(&t, &a, trimmer, NULL);
  pthread_attr_destroy(&a);
}

static void* cache_take(size_t size) {
  void* p = NULL;
  pthread_mutex_lock(&cache_mu);
  for (int i = 0; i < cache_n; i++) {
    if (cache[i].size == size) {
      p = cache[i].p;
      cache[i] = cache[--cache_n];
      __atomic_sub_fetch(&stats[STAT_HOST_CACHED_BYTES], (int64_t)size, __ATOMIC_SEQ_CST);
      break;
    }
  }
  pthread_mutex_unlock(&cache_mu);
  return p;
}

/* Keeps a mapping for reuse; returns 0 when the cache is full (the caller unmaps it). */
static int cache_put(void* p, size_t size) {
  pthread_once(&trimmer_once, start_trimmer);
  int kept = 0;
  pthread_mutex_lock(&cache_mu);
  if (cache_n < CACHE_SLOTS && __atomic_load_n(&stats[STAT_HOST_CACHED_BYTES], __ATOMIC_SEQ_CST)
      + (int64_t)size <= cache_cap) {
    cache[cache_n].p = p;
    cache[cache_n].size = size;
    cache[cache_n].freed_ns = now_ns();
    cache_n++;
    __atomic_add_fetch(&stats[STAT_HOST_CACHED_BYTES], (int64_t)size, __ATOMIC_SEQ_CST);
    kept = 1;
  }
  pthread_mutex_unlock(&cache_mu);
  return kept;
}

/* Whether LMS4J_SWAP_MAPS=memfd asks for memfd-backed mappings (read once). */
static int maps_memfd(void) {
  static int memfd = -1;
  int m = __atomic_load_n(&memfd, __ATOMIC_RELAXED);
  if (m < 0) {
    const char* e = getenv("LMS4J_SWAP_MAPS");
    m = e != NULL && strcmp(e, "memfd") == 0;
    __atomic_store_n(&memfd, m, __ATOMIC_RELAXED);
  }
  return m;
}

/* Maps an anonymous memfd named lms4j-swap over [a, a + size); 0 when that fails. */
static int map_memfd(void* a, size_t size) {
  int fd = memfd_create("lms4j-swap", MFD_CLOEXEC);
  if (fd < 0) return 0;
  void* p = MAP_FAILED;
  if (ftruncate(fd, (off_t)size) == 0) {
    p = mmap(a, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  }
  close(fd); /* the mapping keeps the memory; munmap frees it */
  return p == a;
}

/* Large buffers: their own mapping, 2 MiB aligned and advised to use huge pages (fresh 4 KiB
 * pages fault in at a fraction of memcpy speed); small ones: aligned_alloc. */
static void* host_alloc(size_t len, int ready) {
  void* p;
  if (len >= MMAP_MIN && (p = cache_take(mapped_size(len))) != NULL) {
    /* reused */
  } else if (len >= MMAP_MIN) {
    size_t size = mapped_size(len);
    char* m = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
        -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = a - (uintptr_t)m;
    if (head) munmap(m, head);
    if (HUGE_PAGE - head) munmap((char*)a + size, HUGE_PAGE - head);
    p = (void*)a;
    if (maps_memfd() && !map_memfd(p, size)) {
      munmap(p, size);
      return NULL;
    }
    madvise(p, size, MADV_HUGEPAGE);
  } else {
    p = aligned_alloc(ALIGN, (len + ALIGN - 1) & ~(size_t)(ALIGN - 1));
    if (!p) return NULL;
  }
  int64_t now = __atomic_add_fetch(&stats[STAT_HOST_LIVE_BYTES], (int64_t)len, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&stats[STAT_HOST_LIVE_BUFFERS], 1, __ATOMIC_SEQ_CST);
  int64_t peak = __atomic_load_n(&stats[STAT_HOST_PEAK_BYTES], __ATOMIC_SEQ_CST);
  while (now > peak && !__atomic_compare_exchange_n(&stats[STAT_HOST_PEAK_BYTES], &peak, now, 0,
      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  live_add(p, ready);
  return p;
}

static void host_free(void* data, size_t len, void* arg) {
  (void)arg;
  if (!data) return;
  live_remove(data); /* waits for a copy still running */
  if (len >= MMAP_MIN) {
    if (!cache_put(data, mapped_size(len))) munmap(data, mapped_size(len));
  } else {
    free(data);
  }
  __atomic_sub_fetch(&stats[STAT_HOST_LIVE_BYTES], (int64_t)len, __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&stats[STAT_HOST_LIVE_BUFFERS], 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&stats[STAT_HOST_FREES], 1, __ATOMIC_SEQ_CST);
}

/* ---- common ------------------------------------------------------------------------------ */

typedef struct {
  TF_DataType dtype;
  char path[4096];
} Kernel;

static void* create_typed(TF_OpKernelConstruction* ctx) {
  Kernel* k = calloc(1, sizeof(Kernel));
  TF_Status* s = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrType(ctx, "T", &k->dtype, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  TF_DeleteStatus(s);
  return k;
}

static void* create_disk(TF_OpKernelConstruction* ctx) {
  Kernel* k = create_typed(ctx);
  TF_Status* s = TF_NewStatus();
  int32_t list_size = 0, total = 0;
  TF_OpKernelConstruction_GetAttrSize(ctx, "path", &list_size, &total, s);
  if (TF_GetCode(s) == LMS4J_TF_OK && total >= (int32_t)sizeof(k->path)) {
    TF_SetStatus(s, LMS4J_TF_INVALID_ARGUMENT, "lms4j swap: path attribute too long");
  }
  if (TF_GetCode(s) == LMS4J_TF_OK) {
    TF_OpKernelConstruction_GetAttrString(ctx, "path", k->path, sizeof(k->path) - 1, s);
    k->path[total] = 0;
  }
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  TF_DeleteStatus(s);
  return k;
}

static void delete_kernel(void* k) { free(k); }

/* TensorFlow's largest rank is 254 (TensorShape::MaxDimensions()). */
#define MAX_DIMS 256

static int dims_of(const TF_Tensor* t, int64_t* dims) {
  int n = TF_NumDims(t);
  for (int i = 0; i < n && i < MAX_DIMS; i++) dims[i] = TF_Dim(t, i);
  return n;
}

static void enqueue_copy(TF_Tensor* in, void* dst, size_t len);

/* Copies in into a fresh host tensor and sets it as output 0 (errors in s). With async, the copy
 * is queued and in is handed to the copy thread: returns 1 then (the caller must not delete in),
 * else 0. */
static int swap_out_copy(TF_OpKernelContext* ctx, TF_Tensor* in, int async, TF_Status* s) {
  int64_t dims[MAX_DIMS];
  int nd = dims_of(in, dims);
  size_t len = TF_TensorByteSize(in);
  TF_Tensor* out;
  int handed = 0;
  if (len == 0) {
    /* nothing to hold outside the budget */
    out = TF_AllocateOutput(ctx, 0, TF_TensorType(in), dims, nd, 0, s);
    if (TF_GetCode(s) != LMS4J_TF_OK) return 0;
  } else {
    void* buf = host_alloc(len, 1);
    if (!buf) {
      TF_SetStatus(s, LMS4J_TF_RESOURCE_EXHAUSTED, "lms4j swap-out: host allocation failed");
      return 0;
    }
    if (!async) memcpy(buf, TF_TensorData(in), len);
    out = TF_NewTensor(TF_TensorType(in), dims, nd, buf, len, host_free, NULL);
    if (!out) {
      /* TF_NewTensor has called host_free on buf already when it returns NULL */
      TF_SetStatus(s, LMS4J_TF_INTERNAL, "lms4j swap-out: TF_NewTensor failed");
      return 0;
    }
    if (async) {
      /* not ready until the copy thread is done with it */
      pthread_mutex_lock(&live_mu);
      Live* l = live_find(buf);
      if (l) l->ready = 0;
      pthread_mutex_unlock(&live_mu);
      enqueue_copy(in, buf, len);
      handed = 1;
    }
    TF_SetOutput(ctx, 0, out, s);
  }
  TF_DeleteTensor(out);
  __atomic_add_fetch(&stats[STAT_SWAP_OUTS], 1, __ATOMIC_SEQ_CST);
  return handed;
}

/* Allocates output 0 like in (counted by TF's allocator); the copy is left to the caller. */
static TF_Tensor* swap_in_alloc(TF_OpKernelContext* ctx, TF_Tensor* in, TF_Status* s) {
  int64_t dims[MAX_DIMS];
  int nd = dims_of(in, dims);
  size_t len = TF_TensorByteSize(in);
  if (len > 0 && !live_wait(TF_TensorData(in))) {
    __atomic_add_fetch(&stats[STAT_SWAP_INS_COPIED_INPUT], 1, __ATOMIC_SEQ_CST);
  }
  TF_Tensor* out = TF_AllocateOutput(ctx, 0, TF_TensorType(in), dims, nd, len, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) {
    if (out) TF_DeleteTensor(out);
    return NULL;
  }
  return out;
}

static void finish_swap_in(TF_Tensor* in, TF_Tensor* out) {
  size_t len = TF_TensorByteSize(in);
  if (len) memcpy(TF_TensorData(out), TF_TensorData(in), len);
  __atomic_add_fetch(&stats[STAT_SWAP_INS], 1, __ATOMIC_SEQ_CST);
}

/* ---- host tier, synchronous -------------------------------------------------------------- */

static void swap_out_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  TF_GetInput(ctx, 0, &in, s);
  if (TF_GetCode(s) == LMS4J_TF_OK) swap_out_copy(ctx, in, 0, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (in) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

static void swap_in_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  TF_GetInput(ctx, 0, &in, s);
  if (TF_GetCode(s) == LMS4J_TF_OK) {
    TF_Tensor* out = swap_in_alloc(ctx, in, s);
    if (out) {
      finish_swap_in(in, out);
      TF_DeleteTensor(out);
    }
  }
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (in) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

/* ---- host tier, asynchronous swap-out: the copy runs on a native thread ------------------- */

typedef struct Job {
  TF_Tensor* in;
  void* dst;
  size_t len;
  struct Job* next;
} Job;

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;
static Job* q_head = NULL;
static Job* q_tail = NULL;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void* copy_thread(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&q_mu);
    while (!q_head) pthread_cond_wait(&q_cv, &q_mu);
    Job* j = q_head;
    q_head = j->next;
    if (!q_head) q_tail = NULL;
    pthread_mutex_unlock(&q_mu);
    memcpy(j->dst, TF_TensorData(j->in), j->len);
    TF_DeleteTensor(j->in); /* the device memory may go now */
    if (&lms4j_alloc_pending_frees) {
      __atomic_sub_fetch(&lms4j_alloc_pending_frees, 1, __ATOMIC_RELEASE);
    }
    live_ready(j->dst);
    free(j);
  }
  return NULL;
}

static void start_pool(void) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_create(&t, &a, copy_thread, NULL);
  pthread_attr_destroy(&a);
}

/* Copies are done in the order the swap-outs ran, by one thread. */
static void enqueue_copy(TF_Tensor* in, void* dst, size_t len) {
  pthread_once(&pool_once, start_pool);
  Job* j = calloc(1, sizeof(Job));
  j->in = in;
  j->dst = dst;
  j->len = len;
  if (&lms4j_alloc_pending_frees) {
    __atomic_add_fetch(&lms4j_alloc_pending_frees, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_lock(&q_mu);
  if (q_tail) q_tail->next = j; else q_head = j;
  q_tail = j;
  pthread_cond_signal(&q_cv);
  pthread_mutex_unlock(&q_mu);
}

static void swap_out_async_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  TF_GetInput(ctx, 0, &in, s);
  int handed = 0;
  if (TF_GetCode(s) == LMS4J_TF_OK) {
    handed = swap_out_copy(ctx, in, 1, s);
  }
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (in && !handed) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

/* ---- disk tier --------------------------------------------------------------------------- */

#define MAGIC "LMS4JSW1"

typedef struct {
  char magic[8];
  int32_t dtype;
  int32_t ndims;
  uint64_t bytes;
} FileHeader;

static int64_t file_counter = 0;

static void file_name(char* buf, size_t n, const char* base, int64_t id) {
  snprintf(buf, n, "%s.%ld.%ld", base, (long)getpid(), (long)id);
}

typedef struct {
  char path[4200];
} FileRef;

/* Deallocator of a disk swap-out's handle: the file goes when its last reader has run. */
static void file_release(void* data, size_t len, void* arg) {
  (void)len;
  FileRef* f = arg;
  if (unlink(f->path) == 0) {
    __atomic_sub_fetch(&stats[STAT_DISK_LIVE_FILES], 1, __ATOMIC_SEQ_CST);
  }
  free(f);
  free(data);
}

static int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static void swap_out_disk_compute(void* kernel, TF_OpKernelContext* ctx) {
  Kernel* k = kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  char msg[4400];
  TF_GetInput(ctx, 0, &in, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) goto out;
  int64_t id = __atomic_add_fetch(&file_counter, 1, __ATOMIC_SEQ_CST);
  FileRef* f = calloc(1, sizeof(FileRef));
  file_name(f->path, sizeof(f->path), k->path, id);
  int64_t dims[MAX_DIMS];
  FileHeader h;
  memcpy(h.magic, MAGIC, 8);
  h.dtype = TF_TensorType(in);
  h.ndims = dims_of(in, dims);
  h.bytes = TF_TensorByteSize(in);
  int fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int ok = fd >= 0 && write_all(fd, (const char*)&h, sizeof h) == 0
      && write_all(fd, (const char*)dims, sizeof(int64_t) * (size_t)h.ndims) == 0
      && write_all(fd, TF_TensorData(in), h.bytes) == 0;
  if (fd >= 0 && close(fd) != 0) ok = 0;
  if (!ok) {
    snprintf(msg, sizeof msg, "lms4j swap-out: cannot write %s: %s", f->path, strerror(errno));
    if (fd >= 0) unlink(f->path);
    free(f);
    TF_SetStatus(s, LMS4J_TF_INTERNAL, msg);
    goto out;
  }
  __atomic_add_fetch(&stats[STAT_DISK_LIVE_FILES], 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&stats[STAT_DISK_BYTES_WRITTEN], (int64_t)h.bytes, __ATOMIC_SEQ_CST);
  int64_t* handle = aligned_alloc(ALIGN, ALIGN);
  *handle = id;
  TF_Tensor* out = TF_NewTensor(LMS4J_TF_INT64, NULL, 0, handle, sizeof(int64_t),
      file_release, f);
  TF_SetOutput(ctx, 0, out, s);
  TF_DeleteTensor(out);
  __atomic_add_fetch(&stats[STAT_SWAP_OUTS], 1, __ATOMIC_SEQ_CST);
out:
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (in) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

static void swap_in_disk_compute(void* kernel, TF_OpKernelContext* ctx) {
  Kernel* k = kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  TF_Tensor* out = NULL;
  char path[4200];
  char msg[4400];
  int fd = -1;
  TF_GetInput(ctx, 0, &in, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) goto out;
  file_name(path, sizeof path, k->path, *(const int64_t*)TF_TensorData(in));
  FileHeader h;
  int64_t dims[MAX_DIMS];
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read_all(fd, (char*)&h, sizeof h) != 0 || memcmp(h.magic, MAGIC, 8) != 0
      || h.ndims < 0 || h.ndims > MAX_DIMS || h.dtype != k->dtype
      || read_all(fd, (char*)dims, sizeof(int64_t) * (size_t)h.ndims) != 0) {
    snprintf(msg, sizeof msg, "lms4j swap-in: cannot read %s", path);
    TF_SetStatus(s, LMS4J_TF_DATA_LOSS, msg);
    goto out;
  }
  int bad = 0;
  for (int i = 0; i < h.ndims; i++) {
    if (dims[i] < 0) bad = 1;
  }
  if (bad) {
    snprintf(msg, sizeof msg, "lms4j swap-in: %s has a bad header", path);
    TF_SetStatus(s, LMS4J_TF_DATA_LOSS, msg);
    goto out;
  }
  out = TF_AllocateOutput(ctx, 0, h.dtype, dims, h.ndims, h.bytes, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) goto out;
  if (TF_TensorByteSize(out) != (size_t)h.bytes) {
    /* the output is sized from dims and dtype: never read more than it holds */
    snprintf(msg, sizeof msg, "lms4j swap-in: %s holds %llu bytes, its shape needs %zu", path,
        (unsigned long long)h.bytes, TF_TensorByteSize(out));
    TF_SetStatus(s, LMS4J_TF_DATA_LOSS, msg);
    goto out;
  }
  if (h.bytes && read_all(fd, TF_TensorData(out), h.bytes) != 0) {
    snprintf(msg, sizeof msg, "lms4j swap-in: %s is truncated", path);
    TF_SetStatus(s, LMS4J_TF_DATA_LOSS, msg);
    goto out;
  }
  __atomic_add_fetch(&stats[STAT_DISK_BYTES_READ], (int64_t)h.bytes, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&stats[STAT_SWAP_INS], 1, __ATOMIC_SEQ_CST);
out:
  if (fd >= 0) close(fd);
  if (out) TF_DeleteTensor(out);
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (in) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

/* ---- statistics -------------------------------------------------------------------------- */

static void* create_plain(TF_OpKernelConstruction* ctx) {
  (void)ctx;
  return calloc(1, sizeof(Kernel));
}

static void stats_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* s = TF_NewStatus();
  int64_t dims[1] = {STAT_COUNT};
  TF_Tensor* out = TF_AllocateOutput(ctx, 0, LMS4J_TF_INT64, dims, 1,
      sizeof(int64_t) * STAT_COUNT, s);
  if (TF_GetCode(s) == LMS4J_TF_OK) {
    int64_t* d = TF_TensorData(out);
    for (int i = 0; i < STAT_COUNT; i++) d[i] = __atomic_load_n(&stats[i], __ATOMIC_SEQ_CST);
    d[STAT_ALLOC_UNWAITED_FAILURES] = &lms4j_alloc_unwaited_failures
        ? __atomic_load_n(&lms4j_alloc_unwaited_failures, __ATOMIC_SEQ_CST) : -1;
    d[STAT_ALLOC_WAITED_SUCCESSES] = &lms4j_alloc_waited_successes
        ? __atomic_load_n(&lms4j_alloc_waited_successes, __ATOMIC_SEQ_CST) : -1;
  } else {
    TF_OpKernelContext_Failure(ctx, s);
  }
  if (out) TF_DeleteTensor(out);
  TF_DeleteStatus(s);
}

static void memcpy_bench_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* in = NULL;
  TF_Tensor* out = NULL;
  TF_GetInput(ctx, 0, &in, s);
  if (TF_GetCode(s) == LMS4J_TF_OK
      && (TF_TensorByteSize(in) < sizeof(int64_t) || *(const int64_t*)TF_TensorData(in) <= 0)) {
    TF_SetStatus(s, LMS4J_TF_INVALID_ARGUMENT, "lms4j memcpy bench: bytes must be a positive "
        "int64 scalar");
  }
  if (TF_GetCode(s) == LMS4J_TF_OK) {
    size_t n = (size_t)*(const int64_t*)TF_TensorData(in);
    char* a = aligned_alloc(ALIGN, (n + ALIGN - 1) & ~(size_t)(ALIGN - 1));
    char* b = aligned_alloc(ALIGN, (n + ALIGN - 1) & ~(size_t)(ALIGN - 1));
    int64_t dims[1] = {2};
    out = TF_AllocateOutput(ctx, 0, LMS4J_TF_INT64, dims, 1, 2 * sizeof(int64_t), s);
    if (a && b && TF_GetCode(s) == LMS4J_TF_OK) {
      memset(a, 1, n);
      memset(b, 2, n);
      int64_t t0 = now_ns();
      memcpy(b, a, n);
      int64_t t1 = now_ns();
      memcpy(a, b, n);
      int64_t t2 = now_ns();
      __asm__ volatile("" : : "r"(a), "r"(b) : "memory");
      int64_t* d = TF_TensorData(out);
      d[0] = t1 - t0;
      d[1] = t2 - t0;
    } else if (TF_GetCode(s) == LMS4J_TF_OK) {
      TF_SetStatus(s, LMS4J_TF_RESOURCE_EXHAUSTED, "lms4j memcpy bench: allocation failed");
    }
    free(a);
    free(b);
  }
  if (TF_GetCode(s) != LMS4J_TF_OK) TF_OpKernelContext_Failure(ctx, s);
  if (out) TF_DeleteTensor(out);
  if (in) TF_DeleteTensor(in);
  TF_DeleteStatus(s);
}

static void pair_shape(TF_ShapeInferenceContext* ctx, TF_Status* s) {
  TF_ShapeHandle* h = TF_ShapeInferenceContextVectorFromSize(ctx, 2);
  TF_ShapeInferenceContextSetOutput(ctx, 0, h, s);
  TF_DeleteShapeHandle(h);
}

/* ---- registration ------------------------------------------------------------------------ */

static void unchanged_shape(TF_ShapeInferenceContext* ctx, TF_Status* s) {
  TF_ShapeHandle* h = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, h, s);
  if (TF_GetCode(s) == LMS4J_TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, h, s);
  TF_DeleteShapeHandle(h);
}

static void scalar_shape(TF_ShapeInferenceContext* ctx, TF_Status* s) {
  TF_ShapeHandle* h = TF_ShapeInferenceContextScalar(ctx);
  TF_ShapeInferenceContextSetOutput(ctx, 0, h, s);
  TF_DeleteShapeHandle(h);
}

static void unknown_shape(TF_ShapeInferenceContext* ctx, TF_Status* s) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, s);
}

static void stats_shape(TF_ShapeInferenceContext* ctx, TF_Status* s) {
  TF_ShapeHandle* h = TF_ShapeInferenceContextVectorFromSize(ctx, STAT_COUNT);
  TF_ShapeInferenceContextSetOutput(ctx, 0, h, s);
  TF_DeleteShapeHandle(h);
}

static int register_op(const char* name, const char* input, const char* output,
    const char* attr2, void (*shape)(TF_ShapeInferenceContext*, TF_Status*)) {
  TF_Status* s = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  if (input) TF_OpDefinitionBuilderAddInput(b, input);
  TF_OpDefinitionBuilderAddOutput(b, output);
  if (input) TF_OpDefinitionBuilderAddAttr(b, "T: " TYPES);
  if (attr2) TF_OpDefinitionBuilderAddAttr(b, attr2);
  TF_OpDefinitionBuilderSetIsStateful(b, 1);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(b, shape);
  TF_RegisterOpDefinition(b, s);
  int ok = TF_GetCode(s) == LMS4J_TF_OK;
  if (!ok) fprintf(stderr, "lms4j: cannot register op %s: %s\n", name, TF_Message(s));
  TF_DeleteStatus(s);
  return ok;
}

static void register_kernel(const char* name, TF_KernelBuilder* b) {
  TF_Status* s = TF_NewStatus();
  TF_RegisterKernelBuilder(name, b, s);
  if (TF_GetCode(s) != LMS4J_TF_OK) {
    fprintf(stderr, "lms4j: cannot register kernel %s: %s\n", name, TF_Message(s));
  }
  TF_DeleteStatus(s);
}

__attribute__((constructor)) static void lms4j_register(void) {
  if (register_op("Lms4jSwapOut", "x: T", "y: T", NULL, unchanged_shape)) {
    register_kernel("Lms4jSwapOut", TF_NewKernelBuilder("Lms4jSwapOut", "CPU", create_typed,
        swap_out_compute, delete_kernel));
  }
  if (register_op("Lms4jSwapIn", "x: T", "y: T", NULL, unchanged_shape)) {
    register_kernel("Lms4jSwapIn", TF_NewKernelBuilder("Lms4jSwapIn", "CPU", create_typed,
        swap_in_compute, delete_kernel));
  }
  if (register_op("Lms4jSwapOutAsync", "x: T", "y: T", NULL, unchanged_shape)) {
    register_kernel("Lms4jSwapOutAsync", TF_NewKernelBuilder("Lms4jSwapOutAsync", "CPU",
        create_typed, swap_out_async_compute, delete_kernel));
  }
  if (register_op("Lms4jSwapOutDisk", "x: T", "handle: int64", "path: string", scalar_shape)) {
    register_kernel("Lms4jSwapOutDisk", TF_NewKernelBuilder("Lms4jSwapOutDisk", "CPU",
        create_disk, swap_out_disk_compute, delete_kernel));
  }
  /* the swap-in's T is the output type; its input is the handle */
  {
    TF_Status* s = TF_NewStatus();
    TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder("Lms4jSwapInDisk");
    TF_OpDefinitionBuilderAddInput(b, "handle: int64");
    TF_OpDefinitionBuilderAddOutput(b, "y: T");
    TF_OpDefinitionBuilderAddAttr(b, "T: " TYPES);
    TF_OpDefinitionBuilderAddAttr(b, "path: string");
    TF_OpDefinitionBuilderSetIsStateful(b, 1);
    TF_OpDefinitionBuilderSetShapeInferenceFunction(b, unknown_shape);
    TF_RegisterOpDefinition(b, s);
    if (TF_GetCode(s) == LMS4J_TF_OK) {
      register_kernel("Lms4jSwapInDisk", TF_NewKernelBuilder("Lms4jSwapInDisk", "CPU",
          create_disk, swap_in_disk_compute, delete_kernel));
    } else {
      fprintf(stderr, "lms4j: cannot register op Lms4jSwapInDisk: %s\n", TF_Message(s));
    }
    TF_DeleteStatus(s);
  }
  {
    TF_Status* s = TF_NewStatus();
    TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder("Lms4jMemcpyBench");
    TF_OpDefinitionBuilderAddInput(b, "bytes: int64");
    TF_OpDefinitionBuilderAddOutput(b, "ns: int64");
    TF_OpDefinitionBuilderSetIsStateful(b, 1);
    TF_OpDefinitionBuilderSetShapeInferenceFunction(b, pair_shape);
    TF_RegisterOpDefinition(b, s);
    if (TF_GetCode(s) == LMS4J_TF_OK) {
      register_kernel("Lms4jMemcpyBench", TF_NewKernelBuilder("Lms4jMemcpyBench", "CPU",
          create_plain, memcpy_bench_compute, delete_kernel));
    }
    TF_DeleteStatus(s);
  }
  if (register_op("Lms4jSwapStats", NULL, "stats: int64", NULL, stats_shape)) {
    register_kernel("Lms4jSwapStats", TF_NewKernelBuilder("Lms4jSwapStats", "CPU", create_plain,
        stats_compute, delete_kernel));
  }
}
