/* cuda_backend_test.h — what the CUDA backend's tests (test_cuda_<feature>.c,
 * one file per feature group) share: the start of main (skip without a
 * device), a graph run on CUDA against the CPU, graph replay against the
 * op-by-op launches, the launches a run issues, and what RLX_TRACE prints
 * while a graph compiles for CUDA. */
#ifndef RLX_TEST_CUDA_BACKEND_TEST_H
#define RLX_TEST_CUDA_BACKEND_TEST_H

#include "check.h"
#include "cuda_util.h"

#include <unistd.h>

/* 0 when the test must skip (no CUDA device: exit with CUDA_SKIP). The CPU
 * reference of DequantMatMul is then the exact product, not the 8-bit
 * quantized activations of its fast kernel. */
static inline int cuda_backend_test_begin(void) {
  unsetenv("RLX_DEVICE");
  setenv("RLX_QMATMUL_REF", "1", 1);
  if (cuda_present()) return 1;
  printf("SKIP: no CUDA device\n");
  return 0;
}

/* Runs g on the CPU and on CUDA with the same leaves; checks output 0
 * within tolerance(t) widened by extra_atol. */
static inline void compare_tol(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, rlx_dtype t,
                               double extra_atol) {
  size_t cb = 0, gb = 0;
  void *cpu = run_graph(g, RLX_DEVICE_CPU, leaves, n, 0, &cb);
  void *gpu = run_graph(g, RLX_DEVICE_CUDA, leaves, n, 0, &gb);
  CHECK(cpu && gpu && cb == gb, "%s: both runs give output 0 (%zu and %zu bytes)", what, cb, gb);
  if (cpu && gpu && cb == gb) {
    double atol, rtol;
    tolerance(t, &atol, &rtol);
    atol += extra_atol;
    double r = worst_ratio(t, gpu, cpu, (int64_t)(cb / dtype_size(t)), atol, rtol);
    CHECK(r <= 1.0, "%s (%s): worst error %.3g of tolerance (atol %g rtol %g)", what, rlx_dtype_name(t), r, atol,
          rtol);
  }
  free(cpu);
  free(gpu);
}

static inline void compare(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, rlx_dtype t) {
  compare_tol(what, g, leaves, n, t, 0.0);
}

/* Output o of g on the CUDA graph replay against the CPU (tolerance of t,
 * atol raised by extra_atol), and the same output op by op
 * (RLX_CUDA_GRAPH=0): the replay's bytes. */
static inline void compare_replay(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, int o,
                                  rlx_dtype t, double extra_atol) {
  size_t cb = 0, gb = 0, eb = 0;
  void *cpu = run_graph(g, RLX_DEVICE_CPU, leaves, n, o, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &gb);
  setenv("RLX_CUDA_GRAPH", "0", 1);
  void *eager = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &eb);
  unsetenv("RLX_CUDA_GRAPH");
  double atol, rtol;
  tolerance(t, &atol, &rtol);
  atol += extra_atol;
  const double r = cpu && gpu && cb == gb ? worst_ratio(t, gpu, cpu, (int64_t)(cb / dtype_size(t)), atol, rtol) : INFINITY;
  CHECK(r <= 1.0, "%s output %d: worst error %.3g of tolerance", what, o, r);
  CHECK(eager && gpu && eb == gb && !memcmp(eager, gpu, gb), "%s output %d: replay == op by op", what, o);
  free(cpu), free(gpu), free(eager);
}

/* Launches a run of g issues on the device (rlx_session_stats), -1 on failure. */
static inline int64_t device_launches(const rlx_graph *g) {
  rlx_session *sess = NULL;
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session_stats st = {0};
  const int ok = rlx_compile(g, &o, &sess) == RLX_OK && rlx_session_get_stats(sess, &st) == RLX_OK;
  rlx_session_free(sess);
  return ok ? st.device_launches : -1;
}

/* Output o of g on CUDA with the backend's fusions (RLX_CUDA_FUSE) on and
 * off: within the tolerance of t (the unfused launches may sum in another
 * order: a product launched alone may split K otherwise than in a joined
 * launch). */
static inline void compare_unfused(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, int o,
                                   rlx_dtype t) {
  size_t b1 = 0, b2 = 0;
  void *on = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &b1);
  setenv("RLX_CUDA_FUSE", "0", 1);
  void *off = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &b2);
  unsetenv("RLX_CUDA_FUSE");
  double atol, rtol;
  tolerance(t, &atol, &rtol);
  const double r = on && off && b1 == b2 ? worst_ratio(t, on, off, (int64_t)(b1 / dtype_size(t)), atol, rtol) : INFINITY;
  CHECK(r <= 1.0, "%s output %d: worst difference %.3g of tolerance from the unfused launches", what, o, r);
  free(on), free(off);
}

/* device_launches with the backend's fusions off (RLX_CUDA_FUSE=0). */
static inline int64_t unfused_launches(const rlx_graph *g) {
  setenv("RLX_CUDA_FUSE", "0", 1);
  const int64_t n = device_launches(g);
  unsetenv("RLX_CUDA_FUSE");
  return n;
}

/* What compiling g for CUDA prints on stderr under RLX_TRACE=1 (a static
 * buffer, overwritten by the next call); the compile cache is off for it,
 * so the passes, the partition and the plan run and print again. */
static inline const char *cuda_compile_trace(const rlx_graph *g) {
  static char buf[1 << 16];
  char path[] = "/tmp/rlx_cuda_trace_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  buf[0] = 0;
  if (fd < 0 || saved < 0) return buf;
  fflush(stderr);
  dup2(fd, 2);
  setenv("RLX_TRACE", "1", 1);
  setenv("RLX_COMPILE_CACHE", "0", 1);
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  rlx_compile(g, &o, &s);
  rlx_session_free(s);
  unsetenv("RLX_COMPILE_CACHE");
  unsetenv("RLX_TRACE");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, buf, sizeof buf - 1);
  buf[got > 0 ? got : 0] = 0;
  close(fd);
  unlink(path);
  return buf;
}

#endif /* RLX_TEST_CUDA_BACKEND_TEST_H */
