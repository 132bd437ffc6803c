/* test_cuda_attention.c — the CUDA backend's attention and rope against the
 * CPU backend on random data: every attention kernel (tensor-core prefill
 * at both tile shapes, F32 prefill, split-key decode with and without a
 * cluster and a query a block over a KV pool's mask, the exact kernel;
 * masks, windows, softcap, GQA, both layouts), and the Ropes of q and k
 * joined into one launch. Skips (exit 77) without a CUDA device. */
#include "cuda_backend_test.h"

typedef struct {
  const char *name;
  int B, S, T, H, Hkv, D;
  rlx_layout layout;
  rlx_mask_kind mask;
  int window;
  double softcap;
  /* the custom mask's form: 0, random [S, T]; 1, a KV pool's (query i
   * sees only cells [i T / S, i T / S + T / (2 S))); 2, an encoder's key
   * padding, [B, 1, 1, T] (each batch's last keys hidden) */
  int mask_form;
} attn_case;

static void test_attention(void) {
  static const attn_case cases[] = {
      {"prefill causal gqa", 2, 77, 77, 4, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"chunk bottom-right", 1, 5, 133, 4, 4, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"decode", 3, 1, 200, 8, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"sliding window", 1, 150, 150, 2, 1, 32, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 37, 0, 0},
      {"custom mask softcap", 2, 40, 70, 2, 2, 96, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 30.0, 0},
      {"no mask d80", 1, 65, 65, 3, 1, 80, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0},
      /* many key tiles through the cp.async pipeline, ragged ends */
      {"long causal d128", 1, 301, 301, 4, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"long chunk bottom-right", 2, 70, 650, 2, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"long sliding window", 1, 420, 420, 2, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 90, 0, 0},
      {"long no mask d16", 1, 130, 257, 2, 1, 16, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0},
      /* the benchmark's shape at a smaller batch: 4 query heads per kv head */
      {"prefill 512 causal gqa d128", 2, 512, 512, 8, 2, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"d40 exact kernel", 1, 33, 45, 2, 1, 40, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"d256 exact kernel", 1, 20, 20, 2, 2, 256, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* the split-key decode kernel: few query rows per kv head */
      {"decode window softcap", 2, 2, 300, 4, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 100, 20.0, 0},
      {"decode custom mask", 1, 1, 1000, 6, 2, 96, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0},
      {"decode d256", 1, 1, 64, 2, 2, 256, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"decode one split", 1, 1, 20, 4, 4, 32, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0},
      {"decode chunk of 4", 1, 4, 517, 8, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"decode 8b-shaped", 1, 1, 512, 32, 8, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* flash_decode_lanes (float K/V rows in registers): a custom mask
       * at D 128, and 8 rows a kv head (two queries) at D 64 */
      {"decode custom mask d128", 2, 1, 700, 8, 2, 128, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0},
      {"decode two queries window softcap", 1, 2, 333, 8, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_SLIDING_WINDOW, 50, 15.0, 0},
      {"decode many splits", 1, 1, 19000, 2, 1, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* flash_decode_lanes under GQA: a block per q head,
       * reading its kv head's rows */
      {"decode gqa q head blocks d128", 2, 1, 100, 8, 2, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"decode gqa q head blocks custom mask", 1, 2, 128, 6, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0},
      {"decode gqa q head blocks window softcap", 1, 1, 90, 4, 1, 32, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 40, 10.0, 0},
      /* past one split: 256 keys a split, the last one key */
      {"decode gqa q head blocks two splits", 1, 1, 257, 8, 2, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* 16-bit rows of 72 bytes: staged by element loads, not cp.async */
      {"decode d36 unaligned rows", 2, 1, 300, 4, 2, 36, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* 512 splits of 16 rows: shared memory past the default 48 KB (F32:
       * past the kernel's limit, another kernel takes it) */
      {"decode long context", 1, 1, 32768, 16, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      /* sequences batched over a KV pool: a block per query, the splits of
       * other sequences' cells skipped (13 splits: a cluster; 24: not) */
      {"decode pool batch", 1, 12, 1600, 8, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 1},
      {"decode pool batch many splits", 1, 6, 3000, 12, 2, 128, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 1},
      /* F32 prefill rows of a head_dim flash_f32 does not take, in blocks
       * of 16 / G queries, the last block short: 3 splits (a cluster) and one */
      {"decode kernel prefill rows d80", 2, 100, 300, 4, 1, 80, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"decode kernel prefill custom mask d48", 1, 90, 90, 6, 6, 48, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0},
      /* F32 prefill (flash_f32): BERT's shape with its key padding, rows
       * and keys ending inside a tile, d96, a causal chunk after a cache */
      {"encoder key padding", 2, 128, 128, 12, 12, 64, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 2},
      {"encoder key padding d32 ragged", 3, 71, 71, 4, 4, 32, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 2},
      {"prefill d96 softcap", 1, 130, 130, 4, 2, 96, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 25.0, 0},
      {"prefill chunk after cache d128", 1, 65, 200, 2, 1, 128, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
  };
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const attn_case *a = &cases[c];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
      rlx_dtype t = types[ti];
      rlx_graph *g = rlx_graph_new("attention");
      int bhsd = a->layout == RLX_LAYOUT_BHSD;
      int64_t qd[4] = {a->B, bhsd ? a->H : a->S, bhsd ? a->S : a->H, a->D};
      int64_t kd[4] = {a->B, bhsd ? a->Hkv : a->T, bhsd ? a->T : a->Hkv, a->D};
      const int key_pad = a->mask_form == 2, mrank = key_pad ? 4 : 2;
      const int64_t md2[2] = {a->S, a->T}, md4[4] = {a->B, 1, 1, a->T}, *md = key_pad ? md4 : md2;
      const int64_t mn = key_pad ? (int64_t)a->B * a->T : (int64_t)a->S * a->T;
      rlx_node q = rlx_input(g, "q", t, 4, qd), k = rlx_input(g, "k", t, 4, kd), v = rlx_input(g, "v", t, 4, kd);
      rlx_node m = a->mask == RLX_MASK_CUSTOM ? rlx_input(g, "m", RLX_F32, mrank, md) : -1;
      rlx_attention_desc d = {a->H, a->Hkv, a->D, a->mask, a->window, 0, a->softcap, a->layout};
      rlx_node y = rlx_attention(g, q, k, v, m, &d);
      rlx_graph_set_outputs(g, 1, &y);
      int64_t nq = (int64_t)a->B * a->S * a->H * a->D, nk = (int64_t)a->B * a->T * a->Hkv * a->D;
      float *mask = malloc(sizeof(float) * (size_t)mn);
      for (int i = 0; i < mn; i++) mask[i] = rng_uniform() < 0.2 ? -INFINITY : (float)rng_normal();
      for (int i = 0; a->mask_form == 1 && i < mn; i++) {
        const int64_t r = i / a->T, j = i % a->T, lo = r * a->T / a->S;
        if (j < lo || j >= lo + a->T / (2 * a->S)) mask[i] = -INFINITY;
      }
      for (int i = 0; key_pad && i < mn; i++) /* batch b's last 9 b keys are padding */
        mask[i] = i % a->T >= a->T - 9 * (i / a->T) ? -INFINITY : 0.f;
      if (a->S > 3 && !key_pad) /* one fully masked row: zeros */
        for (int i = 0; i < a->T; i++) mask[3 * a->T + i] = -INFINITY;
      bound_leaf leaves[4] = {{"q", 0, random_tensor(t, nq, 1.0), (size_t)nq * dtype_size(t)},
                              {"k", 0, random_tensor(t, nk, 1.0), (size_t)nk * dtype_size(t)},
                              {"v", 0, random_tensor(t, nk, 1.0), (size_t)nk * dtype_size(t)},
                              {"m", 0, mask, sizeof(float) * (size_t)mn}};
      /* 16-bit types: the tensor-core kernel as the plan picks it, then
       * forced to each of its shapes (the plan picks 128-row blocks only
       * for large grids) */
      static const char *const tiles[] = {NULL, "128", "64"};
      for (int ti2 = 0; ti2 < (t == RLX_F32 ? 1 : 3); ti2++) {
        if (tiles[ti2]) setenv("RLX_CUDA_ATTN_TILE", tiles[ti2], 1);
        char what[128];
        snprintf(what, sizeof what, "attention %s%s%s", a->name, tiles[ti2] ? " tile " : "", tiles[ti2] ? tiles[ti2] : "");
        compare(what, g, leaves, a->mask == RLX_MASK_CUSTOM ? 4 : 3, t);
        unsetenv("RLX_CUDA_ATTN_TILE");
      }
      /* the exact kernel, which the others leave rows they take */
      if (strstr(a->name, "exact kernel")) {
        setenv("RLX_CUDA_ATTN_EXACT", "1", 1);
        char what[128];
        snprintf(what, sizeof what, "attention %s, RLX_CUDA_ATTN_EXACT", a->name);
        compare(what, g, leaves, a->mask == RLX_MASK_CUSTOM ? 4 : 3, t);
        unsetenv("RLX_CUDA_ATTN_EXACT");
      }
      /* the split-key kernel merges up to 16 splits in a cluster's shared
       * memory: those shapes again with the merge through global memory,
       * which is the same merge in the same order (the same bytes) */
      if (!strncmp(a->name, "decode", 6)) {
        const int nl = a->mask == RLX_MASK_CUSTOM ? 4 : 3;
        size_t b1 = 0, b2 = 0;
        void *cl = run_graph(g, RLX_DEVICE_CUDA, leaves, nl, 0, &b1);
        setenv("RLX_CUDA_ATTN_CLUSTER", "0", 1);
        char what[128];
        snprintf(what, sizeof what, "attention %s, merged in global memory", a->name);
        compare(what, g, leaves, nl, t);
        void *gl = run_graph(g, RLX_DEVICE_CUDA, leaves, nl, 0, &b2);
        unsetenv("RLX_CUDA_ATTN_CLUSTER");
        CHECK(cl && gl && b1 == b2 && !memcmp(cl, gl, b1), "%s: the bytes of the cluster's merge", what);
        free(cl), free(gl);
      }
      for (int i = 0; i < 4; i++) free(leaves[i].data);
      rlx_graph_free(g);
    }
  }
}

/* Rope of q and of k by the same positions (or tables): one launch with
 * the heads of both (the second joins the first's), against the CPU,
 * replay == op by op; in both kernels (NEOX over all dims from positions
 * takes the vector one) and at a decode and a prefill length. A rope of
 * the first rope's output does not join (it reads what that one writes). */
static void test_rope_join(void) {
  for (int form = 0; form < 3; form++) /* positions NEOX, positions normal with a pass-through, tables */
    for (int S = 1; S <= 7; S += 6)
      for (int chain = 0; chain < 2; chain++) {
        const rlx_dtype t = RLX_F32;
        const int D = 64, Hq = 8, Hk = 2;
        rlx_rope_desc d = {D, form == 1 ? 48 : D, form == 0 ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000.0, 1.0};
        rlx_graph *g = rlx_graph_new("rope_join");
        int64_t qd[3] = {1, S, Hq * D}, kd[3] = {1, S, Hk * D}, pd[1] = {S}, td[2] = {S, d.n_rot / 2};
        rlx_node q = rlx_input(g, "q", t, 3, qd), k = chain ? q : rlx_input(g, "k", t, 3, kd), y[2];
        if (form < 2) {
          rlx_node pos = rlx_input(g, "pos", RLX_I32, 1, pd);
          y[0] = rlx_rope(g, q, pos, &d);
          y[1] = rlx_rope(g, chain ? y[0] : k, pos, &d);
        } else {
          rlx_node c = rlx_input(g, "cos", t, 2, td), sn = rlx_input(g, "sin", t, 2, td);
          y[0] = rlx_rope_cos_sin(g, q, c, sn, &d);
          y[1] = rlx_rope_cos_sin(g, chain ? y[0] : k, c, sn, &d);
        }
        rlx_graph_set_outputs(g, 2, y);
        int32_t pos[7];
        for (int i = 0; i < S; i++) pos[i] = 3 * i + 100;
        float *cs = malloc(sizeof(float) * (size_t)(S * d.n_rot)), *sn = cs + S * d.n_rot / 2;
        for (int i = 0; i < S; i++)
          for (int j = 0; j < d.n_rot / 2; j++) {
            const double th = pos[i] * pow(10000.0, -2.0 * j / d.n_rot);
            cs[i * d.n_rot / 2 + j] = (float)cos(th), sn[i * d.n_rot / 2 + j] = (float)sin(th);
          }
        bound_leaf l[4] = {{"q", 0, random_tensor(t, S * Hq * D, 1.0), (size_t)(S * Hq * D) * dtype_size(t)},
                           {"k", 0, random_tensor(t, S * Hk * D, 1.0), (size_t)(S * Hk * D) * dtype_size(t)},
                           {form < 2 ? "pos" : "cos", 0, form < 2 ? (void *)pos : (void *)cs,
                            form < 2 ? sizeof(int32_t) * (size_t)S : sizeof(float) * (size_t)(S * d.n_rot / 2)},
                           {"sin", 0, sn, sizeof(float) * (size_t)(S * d.n_rot / 2)}};
        bound_leaf use[4];
        int nl = 0;
        for (int i = 0; i < 4; i++)
          if (!(chain && i == 1) && !(form < 2 && i == 3)) use[nl++] = l[i];
        char what[96];
        snprintf(what, sizeof what, "rope join form %d S=%d%s", form, S, chain ? " (rope of a rope)" : "");
        for (int o = 0; o < 2; o++) compare_replay(what, g, use, nl, o, t, 0.0);
        const int64_t launches = device_launches(g);
        CHECK(launches == (chain ? 2 : 1), "%s: %lld launches", what, (long long)launches);
        free(l[0].data), free(l[1].data), free(cs);
        rlx_graph_free(g);
      }
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_attention();
  test_rope_join();
  return check_report();
}
