/* ops_tfidf.c — TfIdfVectorizer on integer token ids. Each n-gram of the
 * pool (n from min_gram_length to max_gram_length) is counted at every skip
 * from 0 to max_skip_count (unigrams once): the n tokens' Equal compares on
 * shifted slices of the row, combined, summed along it, added into the
 * output column its ngram_indexes entry names. A column's count becomes TF,
 * IDF (the column's weight where counted) or TFIDF (count times weight),
 * as ONNX's reference (which, for an n-gram listed twice in the pool, counts
 * only its last column). The pool is unrolled, so it is bounded. */
#include "onnx.h"

#include <string.h>

#define OX_TFIDF_MAX_TERMS 65536   /* pool n-grams times skips, unrolled */

rlx_status ox_op_tfidf(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  if ((r != 1 && r != 2) || !ir_is_int(t) || ir_dim_is_sym(xd[r - 1]) || (r == 2 && ir_dim_is_sym(xd[0])))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "input of rank %d, dtype %s (static [L] or [B, L] integers)", r, rlx_dtype_name(t));
  const ox_attr *pool = ox_attr_get(n, "pool_int64s"), *counts = ox_attr_get(n, "ngram_counts"), *oi = ox_attr_get(n, "ngram_indexes");
  const ox_attr *wa = ox_attr_get(n, "weights");
  if (!pool || !counts || !oi) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "no pool_int64s (string pools are not supported)");
  int64_t lo = ox_attr_int(n, "min_gram_length", 1), hi = ox_attr_int(n, "max_gram_length", 1);
  int64_t skips = ox_attr_int(n, "max_skip_count", 0), L = xd[r - 1], B = r == 2 ? xd[0] : 1;
  const char *mode = ox_attr_str(n, "mode", "TF");
  int m = !strcmp(mode, "TF") ? 'T' : !strcmp(mode, "IDF") ? 'I' : !strcmp(mode, "TFIDF") ? 'F' : 0;
  if (!m || lo < 1 || hi < lo || hi > counts->n_ints || skips < 0 || skips > L)
    return ox_node_fail(im, n, RLX_ERR_INVALID, "mode %s, gram lengths %lld..%lld, %lld ngram_counts, max_skip_count %lld", mode,
                        (long long)lo, (long long)hi, (long long)counts->n_ints, (long long)skips);
  int64_t width = 0;
  for (int64_t j = 0; j < oi->n_ints; j++) {
    if (oi->ints[j] < 0 || oi->ints[j] >= OX_TFIDF_MAX_TERMS) return ox_node_fail(im, n, RLX_ERR_INVALID, "ngram_index %lld", (long long)oi->ints[j]);
    if (oi->ints[j] + 1 > width) width = oi->ints[j] + 1;
  }
  if (wa && wa->n_floats < width)   /* a weight per output column */
    return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld weights for %lld output columns", (long long)wa->n_floats, (long long)width);
  rlx_node xr = rlx_reshape(g, x, 2, (int64_t[]){B, L});
  rlx_node *cols = ox_alloc(im->arena, (size_t)(width ? width : 1) * sizeof *cols);
  if (!cols) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t o = 0; o < width; o++) cols[o] = -1;
  int64_t terms = 0, index = 0;   /* index: the n-gram's place in the pool, which ngram_indexes maps */
  for (int64_t len = 1; len <= counts->n_ints; len++) {
    int64_t start = counts->ints[len - 1], end = len < counts->n_ints ? counts->ints[len] : pool->n_ints;
    if (start < 0 || end < start || end > pool->n_ints || (end - start) % len)
      return ox_node_fail(im, n, RLX_ERR_INVALID, "ngram_counts %lld..%lld of a pool of %lld", (long long)start, (long long)end,
                          (long long)pool->n_ints);
    for (int64_t at = start; at < end; at += len, index++) {
      if (index >= oi->n_ints) return ox_node_fail(im, n, RLX_ERR_INVALID, "more pool n-grams than ngram_indexes");
      if (len < lo || len > hi) continue;
      rlx_node count = -1;
      for (int64_t s = 0; s <= (len == 1 ? 0 : skips); s++) {
        int64_t span = (len - 1) * (s + 1), positions = L - span;
        if (positions < 1) continue;
        if (++terms > OX_TFIDF_MAX_TERMS) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a pool of more than %d n-grams and skips", OX_TFIDF_MAX_TERMS);
        rlx_node match = -1;
        for (int64_t k = 0; k < len; k++) {
          rlx_node eq = rlx_compare(g, RLX_CMP_EQ, rlx_narrow(g, xr, 1, k * (s + 1), positions), ox_scalar(im, t, (double)pool->ints[at + k]));
          match = match < 0 ? eq : rlx_where(g, match, eq, match);
        }
        rlx_node c = rlx_reduce(g, RLX_REDUCE_SUM, rlx_cast(g, match, RLX_F32), 1, (int64_t[]){1}, 0);
        count = count < 0 ? c : rlx_add(g, count, c);
      }
      if (count < 0) continue;
      int64_t o = oi->ints[index];
      cols[o] = cols[o] < 0 ? count : rlx_add(g, cols[o], count);
    }
  }
  rlx_node zero = ox_scalar(im, RLX_F32, 0);
  for (int64_t o = 0; o < width; o++) {   /* a column's count as TF, IDF or TFIDF, by the column's weight */
    rlx_node c = cols[o] < 0 ? rlx_expand(g, zero, 1, &B) : cols[o], w = ox_scalar(im, RLX_F32, wa ? wa->floats[o] : 1);
    if (m == 'F' && wa) c = rlx_mul(g, c, w);
    else if (m == 'I') c = rlx_where(g, rlx_compare(g, RLX_CMP_GT, c, zero), w, zero);
    cols[o] = rlx_reshape(g, c, 2, (int64_t[]){B, 1});
  }
  rlx_node y = width ? rlx_concat(g, (int)width, cols, 1) : rlx_expand(g, ox_scalar(im, RLX_F32, 0), 2, (int64_t[]){B, 0});
  return ox_set_out(im, n, 0, r == 1 ? rlx_reshape(g, y, 1, &width) : y);
}
