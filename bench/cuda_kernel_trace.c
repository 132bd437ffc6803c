/* cuda_kernel_trace.c — every CUDA kernel a program runs, with its start
 * and end on the GPU's clock, for seeing where a CUDA graph's replay
 * spends its time kernel by kernel (RLX_CUDA_PROFILE times steps op by
 * op, outside the graph, each launch paying its own gap). Preloaded into
 * any program; CUPTI's activity records, written as they arrive:
 *
 *   CUDA_KERNEL_TRACE=trace.txt LD_PRELOAD=build/libcuda_kernel_trace.so \
 *       build/bench_cuda decode q4_0 512 32 4096 32 8 14336 128256
 *   python3 bench/cuda_kernel_trace.py trace.txt
 *
 * A line a kernel: start and end in ns, grid x, the (mangled) name. The
 * records cost the kernels a little each (the 8B decode step: 2.66 ->
 * 3.27 ms on an H100), so compare traces with traces. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

#define BUFFER_BYTES ((size_t)16 << 20)

static FILE *trace_out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *buf = aligned_alloc(8, BUFFER_BYTES);
  *size = *buf ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  while (trace_out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
    fprintf(trace_out, "%llu %llu %d %s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->gridX, k->name);
  }
  if (trace_out) fflush(trace_out);
  free(buf);
}

__attribute__((constructor)) static void trace_start(void) {
  const char *path = getenv("CUDA_KERNEL_TRACE");
  if (!(trace_out = fopen(path ? path : "cuda_kernel_trace.txt", "w"))) {
    perror("cuda_kernel_trace");
    return;
  }
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "cuda_kernel_trace: CUPTI would not trace kernels\n");
    return;
  }
  cuptiActivityFlushPeriod(200); /* ms: the records arrive while the program runs, not only at its exit */
}

__attribute__((destructor)) static void trace_stop(void) {
  cuptiActivityFlushAll(1);
  if (trace_out) fclose(trace_out), trace_out = NULL;
}
