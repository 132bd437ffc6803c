/* ops_einsum.c — ONNX Einsum of one or two operands, lowered onto rlx's
 * transpose, reshape, reduce and batched matmul: a label repeated within
 * an operand takes the diagonal (a product with an identity mask, then a
 * sum); a label only one operand has and the output lacks is summed away
 * first; the rest is one batched product [batch, M, K] x [batch, K, N]
 * (batch: labels of both operands and the output; K: of both operands
 * only), reshaped and transposed to the output's order.
 */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

#define MAXL RLX_MAX_RANK

typedef struct {
  rlx_node x;
  int n;                 /* labels = rank */
  char lab[MAXL];
  int64_t dim[MAXL];
} term;

static int has(const char *s, int n, char c) { return memchr(s, c, (size_t)n) != NULL; }

/* Parses one term of the equation (spaces already removed) into labels;
 * "..." becomes the ellipsis labels '0'.. (right-aligned to ell_max). */
static int parse_term(const char *s, size_t len, int rank, int ell_max, char *lab) {
  int n = 0, explicit_n = 0, ell = -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (ell >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') return -1;
      ell = explicit_n;
      i += 2;
    } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
      explicit_n++;
    } else {
      return -1;
    }
  }
  int e = ell < 0 ? 0 : rank < 0 ? ell_max : rank - explicit_n;
  if (e < 0 || e > ell_max || explicit_n + e > MAXL) return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      for (int k = 0; k < e; k++) lab[n++] = (char)('0' + ell_max - e + k);
      i += 2;
    } else {
      lab[n++] = s[i];
    }
  }
  return n;
}

static rlx_node permute(rlx_graph *g, term *t, const char *order) {
  int64_t perm[MAXL], dims[MAXL];
  int identity = 1;
  for (int i = 0; i < t->n; i++) {
    perm[i] = (const char *)memchr(t->lab, order[i], (size_t)t->n) - t->lab;
    identity &= perm[i] == i;
    dims[i] = t->dim[perm[i]];
  }
  if (!identity) t->x = rlx_transpose(g, t->x, t->n, perm);
  memcpy(t->lab, order, (size_t)t->n);
  memcpy(t->dim, dims, sizeof dims);
  return t->x;
}

static void sum_axis(rlx_graph *g, term *t, int a) {
  int64_t ax = a;
  t->x = rlx_reduce(g, RLX_REDUCE_SUM, t->x, 1, &ax, 0);
  memmove(t->lab + a, t->lab + a + 1, (size_t)(t->n - a - 1));
  memmove(t->dim + a, t->dim + a + 1, sizeof *t->dim * (size_t)(t->n - a - 1));
  t->n--;
}

/* Repeated labels: the diagonal, as x times an identity mask summed over
 * the second occurrence. */
static rlx_status diagonals(ox_importer *im, const ox_node *n, term *t) {
  for (int p = 0; p < t->n; p++)
    for (int q = p + 1; q < t->n; q++) {
      if (t->lab[p] != t->lab[q]) continue;
      int64_t d = t->dim[p];
      if (d != t->dim[q] || ir_dim_is_sym(d) || d > 1024)
        return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a diagonal of dims %lld and %lld", (long long)d, (long long)t->dim[q]);
      rlx_dtype dt;
      rlx_node_type(im->g, t->x, &dt, NULL);
      size_t es = rlx_dtype_nbytes(dt, 1);
      unsigned char *eye = calloc((size_t)(d * d + 1), es);
      if (!eye) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
      for (int64_t i = 0; i < d; i++) ox_store(dt, eye, i * d + i, 1, 1);
      int64_t md[MAXL];
      for (int i = 0; i < t->n; i++) md[i] = i == p || i == q ? d : 1;
      rlx_node mask = rlx_constant(im->g, dt, t->n, md, eye);
      free(eye);
      t->x = rlx_mul(im->g, t->x, mask);
      sum_axis(im->g, t, q);
      q--;
    }
  return RLX_OK;
}

rlx_status ox_op_einsum(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  const char *eq = ox_attr_str(n, "equation", NULL);
  if (!eq) return ox_node_fail(im, n, RLX_ERR_INVALID, "no equation");
  char s[256];
  size_t len = 0;
  for (const char *p = eq; *p; p++)
    if (*p != ' ') {
      if (len + 1 >= sizeof s) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an equation of more than 255 characters");
      s[len++] = *p;
    }
  s[len] = 0;
  if (n->n_inputs < 1 || n->n_inputs > 2) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%d operands (1 or 2)", n->n_inputs);
  const char *arrow = strstr(s, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - s) : len;
  term t[2];
  int nt = 0, ell_max = 0;
  const char *starts[2];
  size_t lens[2];
  for (size_t i = 0, b = 0; i <= lhs_len; i++)
    if (i == lhs_len || s[i] == ',') {
      if (nt == 2) return ox_node_fail(im, n, RLX_ERR_INVALID, "more terms than operands in \"%s\"", eq);
      starts[nt] = s + b, lens[nt++] = i - b, b = i + 1;
    }
  if (nt != n->n_inputs) return ox_node_fail(im, n, RLX_ERR_INVALID, "%d terms for %d operands in \"%s\"", nt, n->n_inputs, eq);
  for (int k = 0; k < nt; k++) {
    t[k].x = ox_in(im, n, k);
    if (t[k].x < 0) return im->err;
    int r = rlx_node_type(g, t[k].x, NULL, t[k].dim);
    int explicit_n = 0;
    for (size_t i = 0; i < lens[k]; i++) explicit_n += starts[k][i] != '.';
    if (memchr(starts[k], '.', lens[k]) && r - explicit_n > ell_max) ell_max = r - explicit_n;
    t[k].n = r;
  }
  for (int k = 0; k < nt; k++)
    if (parse_term(starts[k], lens[k], t[k].n, ell_max, t[k].lab) != t[k].n)
      return ox_node_fail(im, n, RLX_ERR_INVALID, "term %d of \"%s\" does not fit a rank-%d operand", k, eq, t[k].n);
  char out[MAXL];
  int no = 0;
  if (arrow) {
    no = parse_term(arrow + 2, strlen(arrow + 2), -1, ell_max, out);
    if (no < 0) return ox_node_fail(im, n, RLX_ERR_INVALID, "the output of \"%s\"", eq);
  } else {   /* implicit: the ellipsis, then the labels seen once, in order */
    for (int e = 0; e < ell_max; e++) out[no++] = (char)('0' + e);
    for (char c = 'A'; c <= 'z'; c++) {
      int cnt = 0;
      for (int k = 0; k < nt; k++)
        for (int i = 0; i < t[k].n; i++) cnt += t[k].lab[i] == c;
      if (cnt == 1 && no == MAXL) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an output of rank above %d", MAXL);
      if (cnt == 1) out[no++] = c;
    }
  }
  for (int i = 0; i < no; i++) {
    int found = 0;
    for (int k = 0; k < nt; k++) found |= has(t[k].lab, t[k].n, out[i]);
    if (!found || memchr(out, out[i], (size_t)i)) return ox_node_fail(im, n, RLX_ERR_INVALID, "output label '%c' of \"%s\"", out[i], eq);
  }
  rlx_status st;
  for (int k = 0; k < nt; k++) {
    if ((st = diagonals(im, n, &t[k]))) return st;
    for (int i = t[k].n - 1; i >= 0; i--)   /* labels only this operand has, summed away */
      if (!has(out, no, t[k].lab[i]) && !(nt == 2 && has(t[1 - k].lab, t[1 - k].n, t[k].lab[i]))) sum_axis(g, &t[k], i);
  }
  term *r = &t[0];
  if (nt == 2) {
    term *a = &t[0], *b = &t[1];
    char batch[MAXL], con[MAXL], ak[MAXL], bk[MAXL], ao[MAXL], bo[MAXL];
    int nb = 0, nc = 0, na = 0, nbk = 0;
    for (int i = 0; i < no; i++)
      if (has(a->lab, a->n, out[i]) && has(b->lab, b->n, out[i])) batch[nb++] = out[i];
    for (int i = 0; i < a->n; i++) {
      char c = a->lab[i];
      if (has(batch, nb, c)) continue;
      if (has(b->lab, b->n, c)) con[nc++] = c;
      else ak[na++] = c;
    }
    for (int i = 0; i < b->n; i++)
      if (!has(a->lab, a->n, b->lab[i])) bk[nbk++] = b->lab[i];
    int64_t B = 1, M = 1, K = 1, N = 1, rd[MAXL];
    char rl[MAXL];
    memcpy(ao, batch, (size_t)nb), memcpy(ao + nb, ak, (size_t)na), memcpy(ao + nb + na, con, (size_t)nc);
    memcpy(bo, batch, (size_t)nb), memcpy(bo + nb, con, (size_t)nc), memcpy(bo + nb + nc, bk, (size_t)nbk);
    permute(g, a, ao);
    permute(g, b, bo);
    for (int i = 0; i < nb + nc; i++) {
      int64_t da = a->dim[i < nb ? i : na + i], db = b->dim[i];
      if (da != db || ir_dim_is_sym(da))
        return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "label '%c' of dims %lld and %lld (equal static dims only)",
                            i < nb ? batch[i] : con[i - nb], (long long)da, (long long)db);
    }
    int nr = 0;
    for (int i = 0; i < nb; i++) B *= a->dim[i], rl[nr] = batch[i], rd[nr++] = a->dim[i];
    for (int i = 0; i < na; i++) M *= a->dim[nb + i], rl[nr] = ak[i], rd[nr++] = a->dim[nb + i];
    for (int i = 0; i < nc; i++) K *= a->dim[nb + na + i];
    for (int i = 0; i < nbk; i++) N *= b->dim[nb + nc + i], rl[nr] = bk[i], rd[nr++] = b->dim[nb + nc + i];
    int64_t ad[3] = {B, M, K}, bd[3] = {B, K, N};
    rlx_node y = rlx_matmul(g, rlx_reshape(g, a->x, 3, ad), rlx_reshape(g, b->x, 3, bd));
    r->x = rlx_reshape(g, y, nr, rd);
    r->n = nr;
    memcpy(r->lab, rl, (size_t)nr);
    memcpy(r->dim, rd, sizeof rd);
  }
  if ((st = ox_check(im, n, r->x))) return st;
  return ox_set_out(im, n, 0, permute(g, r, out));
}
