/* test_cuda_parity.c — the op-parity cases on the CUDA backend.
 *
 * usage: test_cuda_parity OP_PARITY PYTHON REF_DIR GROUP WORK_DIR
 *
 * Runs the op-parity runner (tests/op_parity.c) with RLX_DEVICE=cuda, so
 * every case of the group is compiled for CUDA: the nodes the CUDA backend
 * claims run on the device and are checked against the same NumPy
 * references as the CPU (which the CPU backend matches), the rest fall
 * back to the CPU. RLX_TRACE=1 in the environment shows which nodes were
 * declined and why. Skips (exit 77) when no CUDA device is present. */
#include "cuda_util.h"

#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s OP_PARITY PYTHON REF_DIR GROUP WORK_DIR\n", argv[0]);
    return 2;
  }
  if (!cuda_present()) {
    printf("SKIP: no CUDA device\n");
    return CUDA_SKIP;
  }
  setenv("RLX_DEVICE", "cuda", 1);
  fflush(stdout);
  execv(argv[1], argv + 1);
  perror("execv");
  return 1;
}
