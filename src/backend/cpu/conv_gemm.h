/* conv_gemm.h — the CPU convolution geometry, and the GEMM path of Conv and
 * ConvTranspose (conv_gemm.c) beside the reference loops of k_conv.c.
 */
#ifndef RLX_CONV_GEMM_H
#define RLX_CONV_GEMM_H

#include "cpu.h"
#include "gemm.h"

/* A FusedConv's epilogue for the F32 paths: its residual ([N, OC, output
 * positions], the whole tensor; NULL: none), act, alpha, clamp, lo and
 * hi as gemm_epilogue's row part (row_bias unused: the paths add the
 * conv's bias). NULL everywhere: a plain Conv. */
typedef gemm_epilogue conv_epilogue;

/* Spatial geometry of a node, always as 2-D (index 0: H, 1: W); a 1-D op
 * is a 2-D one whose first spatial dim is 1 (kernel 1, stride 1, no pad),
 * which has the same row-major layout. */
typedef struct {
  int64_t in[2], out[2], k[2], stride[2], dil[2], pad[2]; /* pad: the begin pads */
} conv_geom;

/* kernel: the kernel sizes (w's trailing dims, or Pool's kernel attr). */
void conv_geom_init(const ir_node *n, const cpu_tensor *x, const cpu_tensor *y, const int64_t *kernel,
                    conv_geom *g);

/* col[(r - r0) * ld + j - j0] for the rows r = (c, kh, kw) in [r0, r0 +
 * rows) of the input x [C, H, W] and the output positions j in [j0, j1):
 * the tap that output position j reads, 0 in the padding (im2col). */
void conv_im2col(const conv_geom *g, const float *x, int64_t r0, int64_t rows, int64_t j0, int64_t j1, float *col,
                 int64_t ld);

/* Whether conv_gemm_forward / conv_gemm_transpose compute this node: F32,
 * F16 and BF16 (accumulated in F32); F64 stays on the reference loops. */
int conv_gemm_applies(const cpu_tensor *in, int n_in, const cpu_tensor *out);

/* Conv as im2col + cpu_sgemm, ConvTranspose as cpu_sgemm + col2im, both
 * threaded over the ctx's pool; same results as the reference kernels up
 * to F32 summation order. */
rlx_status conv_gemm_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                             cpu_tensor *out);
rlx_status conv_gemm_transpose(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out);

#endif /* RLX_CONV_GEMM_H */
