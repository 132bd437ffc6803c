/* ops_shape.c — importers of ONNX's shape and data-movement ops. Shapes,
 * axes, starts and ends must be known at import (constants, or computed
 * from shapes); on known inputs these ops fold (Shape -> Gather -> Concat
 * -> Reshape becomes one Reshape with static or symbolic dims). */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXK 4096

/* Rank, dims and dtype of input i (known or a node); -1 with a message. */
static int in_shape(ox_importer *im, const ox_node *n, int i, int64_t *dims, rlx_dtype *t) {
  ox_value *v = ox_in_value(im, n, i);
  if (!v) return ox_node_fail(im, n, RLX_ERR_INVALID, "input %d is missing", i), -1;
  if (v->known && v->node < 0) {
    if (t) *t = v->dtype;
    if (dims) memcpy(dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
    return v->rank;
  }
  return rlx_node_type(im->g, v->node, t, dims);
}

/* Known int list of input i, or of attribute attr for older opsets. */
static const int64_t *ints_in_or_attr(ox_importer *im, const ox_node *n, int i, const char *attr, int64_t *count) {
  const ox_attr *a = attr ? ox_attr_get(n, attr) : NULL;
  if (a) {
    *count = a->n_ints;
    return a->ints;
  }
  return ox_has_in(n, i) ? ox_in_ints(im, n, i, count) : NULL;
}

/* The known value of input 0 when it is known (a foldable shape value). */
static ox_value *known0(ox_importer *im, const ox_node *n) {
  ox_value *v = ox_in_value(im, n, 0);
  return v && v->known && v->numel <= MAXK ? v : NULL;
}

static rlx_status set_known_like(ox_importer *im, const ox_node *n, const ox_value *v, int rank, const int64_t *dims) {
  return ox_set_out_known(im, n, 0, v->dtype, rank, dims, v->ints, v->reals);
}

rlx_status ox_op_constant(ox_importer *im, const ox_node *n) {
  const ox_attr *a = n->n_attrs ? &n->attrs[0] : NULL;
  if (!a) return ox_node_fail(im, n, RLX_ERR_FORMAT, "a Constant without a value");
  if (a->t) {
    rlx_status st = ox_tensor_resolve(im->arena, NULL, im->model_name, a->t);
    if (st) return ox_node_fail(im, n, st, "%s", rlx_last_error());
    if (a->t->numel <= MAXK) return ox_known_from_tensor(im, n, 0, a->t);
    int dt = ox_rlx_dtype(a->t->data_type);
    return ox_set_out(im, n, 0, rlx_constant(im->g, (rlx_dtype)dt, a->t->rank, a->t->dims, a->t->data));
  }
  int64_t one = 1;
  if (!strcmp(a->name, "value_float")) return ox_set_out_known(im, n, 0, RLX_F32, 0, NULL, NULL, &a->f);
  if (!strcmp(a->name, "value_int")) return ox_set_out_known(im, n, 0, RLX_I64, 0, NULL, &a->i, NULL);
  if (!strcmp(a->name, "value_ints")) {
    int64_t d = a->n_ints;
    return ox_set_out_known(im, n, 0, RLX_I64, 1, &d, a->ints, NULL);
  }
  if (!strcmp(a->name, "value_floats")) {
    double *r = ox_alloc(im->arena, (size_t)(a->n_floats + 1) * sizeof *r);
    if (!r) return RLX_ERR_NOMEM;
    for (int64_t i = 0; i < a->n_floats; i++) r[i] = a->floats[i];
    int64_t d = a->n_floats;
    return ox_set_out_known(im, n, 0, RLX_F32, 1, &d, NULL, r);
  }
  (void)one;
  return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a Constant given by %s", a->name);
}

rlx_status ox_op_shape(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err ? im->err : ox_check(im, n, -1);
  int64_t start = ox_attr_int(n, "start", 0), end = ox_attr_int(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  if (start < 0) start = 0;
  if (end > r) end = r;
  if (end < start) end = start;
  int64_t len = end - start;
  return ox_set_out_known(im, n, 0, RLX_I64, 1, &len, dims + start, NULL);
}

rlx_status ox_op_size(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK], p = 1;
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  for (int i = 0; i < r; i++) {
    if (ir_dim_is_sym(dims[i])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "the size of a symbolic shape (bind its dims)");
    p *= dims[i];
  }
  return ox_set_out_known(im, n, 0, RLX_I64, 0, NULL, &p, NULL);
}

/* ONNX Reshape's target (0 copies the input dim unless allowzero). */
static rlx_status reshape_to(ox_importer *im, const ox_node *n, const int64_t *shape, int64_t k, int allowzero) {
  int64_t dims[RLX_MAX_RANK], out[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  if (k > RLX_MAX_RANK) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a reshape to rank %lld", (long long)k);
  for (int64_t i = 0; i < k; i++) out[i] = shape[i] == 0 && !allowzero && i < r ? dims[i] : shape[i];
  ox_value *v = known0(im, n);
  if (v && v->node < 0) {
    int64_t numel = 1, neg = -1;
    for (int64_t i = 0; i < k; i++) {
      if (out[i] == -1) neg = i;
      else if (out[i] < 0 || __builtin_mul_overflow(numel, out[i], &numel))
        return ox_node_fail(im, n, RLX_ERR_INVALID, "a bad target dim %lld", (long long)out[i]);
    }
    if (neg < 0 && numel != v->numel) return ox_node_fail(im, n, RLX_ERR_SHAPE, "%lld elements reshaped to %lld", (long long)v->numel, (long long)numel);
    if (neg >= 0) out[neg] = numel ? v->numel / numel : 0;
    return set_known_like(im, n, v, (int)k, out);
  }
  rlx_node x = IN(0);
  NEED(x);
  return ox_set_out(im, n, 0, rlx_reshape(im->g, x, (int)k, out));
}

rlx_status ox_op_reshape(ox_importer *im, const ox_node *n) {
  int64_t k;
  const int64_t *shape = ints_in_or_attr(im, n, 1, im->opset < 5 ? "shape" : NULL, &k);
  if (!shape) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape not known at import");
  return reshape_to(im, n, shape, k, (int)ox_attr_int(n, "allowzero", 0));
}

rlx_status ox_op_flatten(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  int64_t axis = ox_attr_int(n, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld of rank %d", (long long)axis, r);
  int64_t a = 1, b = 1;
  int sa = 0, sb = 0;
  for (int i = 0; i < r; i++) {
    int before = i < axis;
    if (ir_dim_is_sym(dims[i])) {
      if (before) sa++;
      else sb++;
    } else if (before) a *= dims[i];
    else b *= dims[i];
  }
  if (sa && sb) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "symbolic dims on both sides of the axis");
  int64_t shape[2] = {sa ? -1 : a, sb ? -1 : b};
  return reshape_to(im, n, shape, 2, 1);
}

rlx_status ox_op_transpose(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(im->g, x, NULL, NULL);
  int64_t perm[RLX_MAX_RANK];
  const ox_attr *a = ox_attr_get(n, "perm");
  if (a && a->n_ints != r) return ox_node_fail(im, n, RLX_ERR_INVALID, "perm of %lld entries for rank %d", (long long)a->n_ints, r);
  for (int i = 0; i < r; i++) perm[i] = a ? a->ints[i] : r - 1 - i;
  return ox_set_out(im, n, 0, rlx_transpose(im->g, x, r, perm));
}

static int norm_axes(int64_t *axes, int64_t k, int r) {
  for (int64_t i = 0; i < k; i++) {
    if (axes[i] < 0) axes[i] += r;
    if (axes[i] < 0 || axes[i] >= r) return -1;
  }
  return 0;
}

rlx_status ox_op_squeeze(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK], out[RLX_MAX_RANK], axes[RLX_MAX_RANK], k = 0;
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  const int64_t *ax = ints_in_or_attr(im, n, 1, "axes", &k);
  if (!ax && ox_has_in(n, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axes not known at import");
  if (k > r) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld axes for rank %d", (long long)k, r);
  if (ax) memcpy(axes, ax, (size_t)k * sizeof *axes);
  if (norm_axes(axes, k, r)) return ox_node_fail(im, n, RLX_ERR_INVALID, "an axis out of range");
  int m = 0;
  for (int i = 0; i < r; i++) {
    int drop = 0;
    if (!ax) drop = dims[i] == 1;
    for (int64_t j = 0; j < k; j++) drop |= axes[j] == i;
    if (!drop) out[m++] = dims[i];
  }
  return reshape_to(im, n, out, m, 1);
}

rlx_status ox_op_unsqueeze(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK], out[RLX_MAX_RANK], axes[RLX_MAX_RANK], k = 0;
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  const int64_t *ax = ints_in_or_attr(im, n, 1, "axes", &k);
  if (!ax) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axes not known at import");
  int ro = r + (int)k;
  if (ro > RLX_MAX_RANK) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rank %d", ro);
  memcpy(axes, ax, (size_t)k * sizeof *axes);
  if (norm_axes(axes, k, ro)) return ox_node_fail(im, n, RLX_ERR_INVALID, "an axis out of range");
  for (int i = 0, j = 0; i < ro; i++) {
    int ins = 0;
    for (int64_t a = 0; a < k; a++) ins |= axes[a] == i;
    out[i] = ins ? 1 : dims[j++];
  }
  return reshape_to(im, n, out, ro, 1);
}

rlx_status ox_op_concat(ox_importer *im, const ox_node *n) {
  int64_t axis = ox_attr_int(n, "axis", 0);
  /* All known 1-D ints (shape pieces): fold. */
  int all_known = n->n_inputs > 0;
  int64_t total = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    ox_value *v = ox_in_value(im, n, i);
    if (!v || !v->known || !v->ints || v->rank != 1 || total + v->numel > MAXK) all_known = 0;
    else total += v->numel;
  }
  if (all_known) {
    int64_t out[MAXK], m = 0;
    rlx_dtype t = ox_in_value(im, n, 0)->dtype;
    for (int i = 0; i < n->n_inputs; i++) {
      ox_value *v = ox_in_value(im, n, i);
      memcpy(out + m, v->ints, (size_t)v->numel * sizeof *out);
      m += v->numel;
    }
    return ox_set_out_known(im, n, 0, t, 1, &m, out, NULL);
  }
  rlx_node xs[64];
  int k = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    if (!ox_has_in(n, i)) continue;
    if (k == 64) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "more than 64 inputs");
    int64_t dims[RLX_MAX_RANK];
    int r = in_shape(im, n, i, dims, NULL);
    if (r < 0) return im->err;
    int a = (int)(axis < 0 ? axis + r : axis);
    if (a >= 0 && a < r && dims[a] == 0) continue;   /* empty pieces add nothing */
    rlx_node x = IN(i);
    NEED(x);
    xs[k++] = x;
  }
  if (k == 1) return ox_set_out(im, n, 0, xs[0]);
  return ox_set_out(im, n, 0, rlx_concat(im->g, k, xs, (int)axis));
}

rlx_status ox_op_slice(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  int64_t ks, ke, ka = 0, kp = 0;
  const int64_t *st, *en, *ax = NULL, *sp = NULL;
  if (im->opset < 10) {
    st = ints_in_or_attr(im, n, -1, "starts", &ks);
    en = ints_in_or_attr(im, n, -1, "ends", &ke);
    ax = ints_in_or_attr(im, n, -1, "axes", &ka);
  } else {
    st = ox_in_ints(im, n, 1, &ks);
    en = ox_in_ints(im, n, 2, &ke);
    if (ox_has_in(n, 3) && !(ax = ox_in_ints(im, n, 3, &ka))) st = NULL;
    if (ox_has_in(n, 4) && !(sp = ox_in_ints(im, n, 4, &kp))) st = NULL;
  }
  if (!st || !en || ks != ke || (ax && ka != ks) || (sp && kp != ks) || ks > r)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "starts/ends/axes/steps not known at import or inconsistent");
  int64_t s0[RLX_MAX_RANK], e0[RLX_MAX_RANK], p0[RLX_MAX_RANK];
  const int64_t *back[RLX_MAX_RANK] = {0};   /* the indices a negative step takes along an axis */
  int64_t n_back[RLX_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) s0[i] = 0, e0[i] = INT64_MAX, p0[i] = 1;
  for (int64_t i = 0; i < ks; i++) {
    int64_t a = ax ? ax[i] : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld out of range", (long long)a);
    int64_t step = sp ? sp[i] : 1, d = dims[a], s = st[i], e = en[i];
    if (step == 0) return ox_node_fail(im, n, RLX_ERR_INVALID, "a step of 0");
    if (step < 0) {   /* backward: a Gather of the indices s, s + step, ... down to past e */
      if (ir_dim_is_sym(d) || ox_ints_sym(im, &s, 1) | ox_ints_sym(im, &e, 1))
        return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a negative step over a symbolic dim");
      if (s < 0) s += d;
      if (e < 0) e = e < -d ? -1 : e + d;
      s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
      e = e > d - 1 ? d - 1 : e;
      int64_t m = s > e ? (s - e - 1) / -step + 1 : 0;
      int64_t *idx = ox_alloc(im->arena, (size_t)(m + 1) * sizeof *idx);
      if (!idx) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
      for (int64_t j = 0; j < m; j++) idx[j] = s + j * step;
      back[a] = idx;
      n_back[a] = m;
      continue;
    }
    if (ir_dim_is_sym(e) && e == d) e = INT64_MAX;   /* to the end of its own symbolic dim */
    if (ox_ints_sym(im, &s, 1) | ox_ints_sym(im, &e, 1))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a start or end " OX_SYM_HINT);
    if (!ir_dim_is_sym(d)) {   /* clamp as ONNX does */
      if (s < 0) s += d;
      if (e < 0) e += d;
      s = s < 0 ? 0 : s > d ? d : s;
      e = e < 0 ? 0 : e > d ? d : e;
      if (e < s) e = s;
    } else if (e > INT64_MAX / 2) e = INT64_MAX;
    s0[a] = s, e0[a] = e, p0[a] = step;
  }
  ox_value *v = known0(im, n);
  if (v && v->node < 0 && r == 1 && !ir_dim_is_sym(dims[0]) && !back[0]) {
    int64_t out[MAXK], m = 0;
    double rout[MAXK];
    for (int64_t i = s0[0]; i < e0[0] && i < v->numel; i += p0[0], m++) {
      if (v->ints) out[m] = v->ints[i];
      else rout[m] = v->reals[i];
    }
    return ox_set_out_known(im, n, 0, v->dtype, 1, &m, v->ints ? out : NULL, v->ints ? NULL : rout);
  }
  rlx_node x = IN(0);
  NEED(x);
  rlx_node y = rlx_slice(im->g, x, r, s0, e0, p0);
  for (int a = 0; a < r; a++)
    if (back[a]) y = rlx_gather(im->g, y, rlx_constant(im->g, RLX_I64, 1, &n_back[a], back[a]), a);
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_op_split(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  int64_t axis = ox_attr_int(n, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || ir_dim_is_sym(dims[axis])) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axis %lld", (long long)axis);
  int64_t k = 0, parts[256];
  const int64_t *sp = ints_in_or_attr(im, n, 1, "split", &k);
  int no = n->n_outputs;
  if (no < 1 || no > 256) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%d outputs", no);
  if (sp) {
    if (k != no) return ox_node_fail(im, n, RLX_ERR_INVALID, "%lld split sizes for %d outputs", (long long)k, no);
    memcpy(parts, sp, (size_t)k * sizeof *parts);
  } else {
    if (ox_has_in(n, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "split sizes not known at import");
    int64_t chunk = (dims[axis] + no - 1) / no;
    for (int i = 0; i < no; i++) {
      int64_t left = dims[axis] - chunk * i;
      parts[i] = left < chunk ? (left < 0 ? 0 : left) : chunk;
    }
  }
  int64_t at = 0;
  ox_value *kp = known0(im, n);
  if (kp && r == 1) {   /* a known 1-D value (a shape) splits into known values, which fold on */
    ox_value kv = *kp;   /* the table may move as outputs are added */
    for (int i = 0; i < no; i++) {
      if (parts[i] < 0 || parts[i] > kv.numel - at)
        return ox_node_fail(im, n, RLX_ERR_INVALID, "split sizes beyond the %lld elements", (long long)kv.numel);
      rlx_status st = ox_set_out_known(im, n, i, kv.dtype, 1, &parts[i], kv.ints ? kv.ints + at : NULL,
                                       kv.reals ? kv.reals + at : NULL);
      if (st) return st;
      at += parts[i];
    }
    return RLX_OK;
  }
  rlx_node x = IN(0);
  NEED(x);
  for (int i = 0; i < no; i++) {
    rlx_status st = ox_set_out(im, n, i, rlx_narrow(im->g, x, (int)axis, at, parts[i]));
    if (st) return st;
    at += parts[i];
  }
  return RLX_OK;
}

rlx_status ox_op_gather(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK];
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  int64_t axis = ox_attr_int(n, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
  ox_value *v = known0(im, n), *iv = ox_in_value(im, n, 1);
  if (v && v->node < 0 && r == 1 && iv && iv->known && iv->ints && iv->rank <= 1 && iv->numel <= MAXK) {
    int64_t out[MAXK];
    double rout[MAXK];
    for (int64_t i = 0; i < iv->numel; i++) {
      int64_t k = iv->ints[i] < 0 ? iv->ints[i] + v->numel : iv->ints[i];
      if (k < 0 || k >= v->numel) return ox_node_fail(im, n, RLX_ERR_INVALID, "index %lld out of range", (long long)iv->ints[i]);
      if (v->ints) out[i] = v->ints[k];
      else rout[i] = v->reals[k];
    }
    return ox_set_out_known(im, n, 0, v->dtype, iv->rank, iv->dims, v->ints ? out : NULL, v->ints ? NULL : rout);
  }
  rlx_node x = IN(0);
  NEED(x);
  rlx_node idx;
  if (iv && iv->known && iv->ints && !ir_dim_is_sym(dims[axis])) {   /* negative indices made positive */
    int64_t *fixed = ox_alloc(im->arena, (size_t)(iv->numel + 1) * 8);
    if (!fixed) return RLX_ERR_NOMEM;
    for (int64_t i = 0; i < iv->numel; i++) fixed[i] = iv->ints[i] < 0 ? iv->ints[i] + dims[axis] : iv->ints[i];
    idx = rlx_constant(im->g, RLX_I64, iv->rank, iv->dims, fixed);
  } else {
    idx = IN(1);
    NEED(idx);
    rlx_dtype it = RLX_I64;
    rlx_node_type(im->g, idx, &it, NULL);
    if (!ir_dim_is_sym(dims[axis]) && (it == RLX_I64 || it == RLX_I32)) {   /* run-time indices may count from the end */
      rlx_node zero = ox_scalar(im, it, 0);
      idx = rlx_where(im->g, rlx_compare(im->g, RLX_CMP_LT, idx, zero), rlx_add(im->g, idx, ox_scalar(im, it, (double)dims[axis])), idx);
    }
  }
  return ox_set_out(im, n, 0, rlx_gather(im->g, x, idx, (int)axis));
}

rlx_status ox_op_expand(ox_importer *im, const ox_node *n) {
  int64_t dims[RLX_MAX_RANK], k;
  int r = in_shape(im, n, 0, dims, NULL);
  if (r < 0) return im->err;
  const int64_t *shape = ox_in_ints(im, n, 1, &k);
  if (!shape) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape not known at import");
  int ro = (int)(k > r ? k : r);
  if (ro > RLX_MAX_RANK) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rank %d", ro);
  int64_t out[RLX_MAX_RANK];
  for (int i = 0; i < ro; i++) {
    int64_t a = i - (ro - r) >= 0 ? dims[i - (ro - r)] : 1, b = i - (ro - (int)k) >= 0 ? shape[i - (ro - (int)k)] : 1;
    out[i] = a == 1 ? b : a;
  }
  rlx_node x = IN(0);
  NEED(x);
  if (ro > r) {   /* leading 1s first: rlx_expand keeps the rank */
    int64_t lifted[RLX_MAX_RANK];
    for (int i = 0; i < ro; i++) lifted[i] = i < ro - r ? 1 : dims[i - (ro - r)];
    x = rlx_reshape(im->g, x, ro, lifted);
  }
  return ox_set_out(im, n, 0, rlx_expand(im->g, x, ro, out));
}

rlx_status ox_op_constant_of_shape(ox_importer *im, const ox_node *n) {
  int64_t k;
  const int64_t *shape = ox_in_ints(im, n, 0, &k);
  if (!shape || k > RLX_MAX_RANK) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape not known at import");
  const ox_attr *a = ox_attr_get(n, "value");
  rlx_dtype t = RLX_F32;
  double val = 0;
  if (a && a->t) {
    rlx_status st = ox_tensor_resolve(im->arena, NULL, im->model_name, a->t);
    if (st) return ox_node_fail(im, n, st, "%s", rlx_last_error());
    int dt = ox_rlx_dtype(a->t->data_type);
    if (dt < 0 || a->t->numel != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "value of type %s", ox_dtype_name(a->t->data_type));
    t = (rlx_dtype)dt;
    const void *vd = ox_aligned_data(im->arena, a->t);
    if (!vd) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    val = rlx_value_as_f64(t, vd, 0);
  }
  if (ox_ints_sym(im, shape, k)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape " OX_SYM_HINT);
  int64_t numel = 1;
  for (int64_t i = 0; i < k; i++) {
    if (shape[i] < 0) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a negative dim");
    numel *= shape[i];
  }
  if (numel <= MAXK) {
    int is_int = ir_is_int(t) || t == RLX_BOOL;
    int64_t *iv = ox_alloc(im->arena, (size_t)(numel + 1) * 8);
    double *rv = ox_alloc(im->arena, (size_t)(numel + 1) * 8);
    if (!iv || !rv) return RLX_ERR_NOMEM;
    for (int64_t i = 0; i < numel; i++) iv[i] = ox_f2i(val), rv[i] = val;
    return ox_set_out_known(im, n, 0, t, (int)k, shape, is_int ? iv : NULL, is_int ? NULL : rv);
  }
  rlx_node one = ox_scalar(im, t, val);
  int64_t ones[RLX_MAX_RANK];
  for (int i = 0; i < k; i++) ones[i] = 1;
  return ox_set_out(im, n, 0, rlx_expand(im->g, rlx_reshape(im->g, one, (int)k, ones), (int)k, shape));
}

rlx_status ox_op_range(ox_importer *im, const ox_node *n) {
  ox_value *v[3];
  for (int i = 0; i < 3; i++)
    if (!(v[i] = ox_in_known(im, n, i)) || v[i]->numel != 1)
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "start/limit/delta not known at import");
  int sym = 0;
  for (int i = 0; i < 3; i++) sym |= ox_ints_sym(im, v[i]->ints, v[i]->numel);
  if (sym) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "start/limit/delta " OX_SYM_HINT);
  double s = v[0]->ints ? (double)v[0]->ints[0] : v[0]->reals[0];
  double l = v[1]->ints ? (double)v[1]->ints[0] : v[1]->reals[0];
  double d = v[2]->ints ? (double)v[2]->ints[0] : v[2]->reals[0];
  if (d == 0) return ox_node_fail(im, n, RLX_ERR_INVALID, "delta 0");
  double cnt = ceil((l - s) / d);
  if (!(cnt <= (double)(1 << 24))) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a range of %g elements", cnt);
  int64_t m = cnt <= 0 ? 0 : (int64_t)cnt;
  if (m > 1 << 24) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a range of %lld", (long long)m);
  int64_t *iv = ox_alloc(im->arena, (size_t)(m + 1) * 8);
  double *rv = ox_alloc(im->arena, (size_t)(m + 1) * 8);
  if (!iv || !rv) return RLX_ERR_NOMEM;
  for (int64_t i = 0; i < m; i++) {
    rv[i] = s + (double)i * d;
    iv[i] = v[0]->ints ? (int64_t)((uint64_t)v[0]->ints[0] + (uint64_t)i * (uint64_t)v[2]->ints[0]) : 0;
  }
  int is_int = v[0]->ints != NULL;
  if (m > MAXK) {
    void *buf = ox_alloc(im->arena, (size_t)m * 8);
    if (!buf) return RLX_ERR_NOMEM;
    for (int64_t i = 0; i < m; i++) ox_store(v[0]->dtype, buf, i, is_int ? (double)iv[i] : rv[i], iv[i]);
    return ox_set_out(im, n, 0, rlx_constant(im->g, v[0]->dtype, 1, &m, buf));
  }
  return ox_set_out_known(im, n, 0, v[0]->dtype, 1, &m, is_int ? iv : NULL, is_int ? NULL : rv);
}

/* Pad of mode edge, reflect or wrap: along each padded axis a Gather of
 * the source index of every output position. */
static rlx_status pad_gathered(ox_importer *im, const ox_node *n, rlx_node x, const int64_t *before, const int64_t *after,
                               int mode) {
  int64_t dims[RLX_MAX_RANK];
  int r = rlx_node_type(im->g, x, NULL, dims);
  for (int a = 0; a < r; a++) {
    if (!before[a] && !after[a]) continue;
    int64_t d = dims[a], m = d + before[a] + after[a];
    if (ir_dim_is_sym(d) || before[a] < 0 || after[a] < 0 || d < 1 || (mode == 'r' && d < 2 && m > d) || m > (1 << 24))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "mode %s on a dim of %lld padded by %lld, %lld",
                          ox_attr_str(n, "mode", ""), (long long)d, (long long)before[a], (long long)after[a]);
    int64_t *idx = ox_alloc(im->arena, (size_t)m * sizeof *idx);
    if (!idx) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < m; j++) {
      int64_t i = j - before[a];
      if (mode == 'e') i = i < 0 ? 0 : i >= d ? d - 1 : i;
      else if (mode == 'w') i = ((i % d) + d) % d;
      else if (d > 1) {   /* reflect: period 2 (d - 1), the edge not repeated */
        int64_t p = 2 * (d - 1);
        i = ((i % p) + p) % p;
        if (i >= d) i = p - i;
      }
      idx[j] = i;
    }
    x = rlx_gather(im->g, x, rlx_constant(im->g, RLX_I64, 1, &m, idx), a);
  }
  return ox_set_out(im, n, 0, x);
}

rlx_status ox_op_pad(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(im->g, x, NULL, NULL);
  const char *mode = ox_attr_str(n, "mode", "constant");
  int gathered = !strcmp(mode, "edge") ? 'e' : !strcmp(mode, "reflect") ? 'r' : !strcmp(mode, "wrap") ? 'w' : 0;
  if (!gathered && strcmp(mode, "constant")) return ox_node_fail(im, n, RLX_ERR_INVALID, "mode %s", mode);
  int64_t k = 0, ka = 0;
  const int64_t *pads = ints_in_or_attr(im, n, 1, im->opset < 11 ? (im->opset < 2 ? "paddings" : "pads") : NULL, &k);
  double value = im->opset < 11 ? ox_attr_float(n, "value", 0) : 0;
  rlx_node run_value = -1;   /* a constant_value computed at run time */
  if (im->opset >= 11 && ox_has_in(n, 2)) {
    ox_value *cv = ox_in_known(im, n, 2);
    if (cv && cv->numel == 1) value = cv->reals ? cv->reals[0] : (double)cv->ints[0];
    else if (cv) return ox_node_fail(im, n, RLX_ERR_INVALID, "a constant_value of %lld elements", (long long)cv->numel);
    else if ((run_value = IN(2)) < 0) return im->err;
  }
  const int64_t *axes = ox_has_in(n, 3) ? ox_in_ints(im, n, 3, &ka) : NULL;
  if (ox_has_in(n, 3) && !axes) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "axes not known at import");
  int na = axes ? (int)ka : r;
  if (!pads || k != 2 * na) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "pads not known at import or of the wrong length");
  if (ox_ints_sym(im, pads, k)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "pads " OX_SYM_HINT);
  int64_t before[RLX_MAX_RANK] = {0}, after[RLX_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int64_t a = axes ? axes[i] : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r) return ox_node_fail(im, n, RLX_ERR_INVALID, "axis out of range");
    before[a] = pads[i];
    after[a] = pads[i + na];
  }
  if (gathered) return pad_gathered(im, n, x, before, after, gathered);
  rlx_node y = rlx_pad(im->g, x, r, before, after, value);
  if (run_value >= 0) {   /* the padding (a padded all-false mask's true cells) takes the run-time value */
    int64_t dims[RLX_MAX_RANK], ones[RLX_MAX_RANK];
    rlx_node_type(im->g, x, NULL, dims);
    for (int i = 0; i < r; i++) ones[i] = 1;
    uint8_t no = 0;
    rlx_node inside = rlx_expand(im->g, rlx_constant(im->g, RLX_BOOL, r, ones, &no), r, dims);
    rlx_node border = rlx_pad(im->g, inside, r, before, after, 1);
    y = rlx_where(im->g, border, rlx_reshape(im->g, run_value, 0, NULL), y);
  }
  return ox_set_out(im, n, 0, y);
}

rlx_status ox_op_tile(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int r = rlx_node_type(im->g, x, NULL, NULL);
  int64_t k;
  const int64_t *rep = ox_in_ints(im, n, 1, &k);
  if (!rep || k != r) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "repeats not known at import");
  if (ox_ints_sym(im, rep, k)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "repeats " OX_SYM_HINT);
  for (int a = 0; a < r; a++) {
    if (rep[a] == 1) continue;
    if (rep[a] < 1 || rep[a] > 64) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a repeat of %lld", (long long)rep[a]);
    rlx_node xs[64];
    for (int i = 0; i < rep[a]; i++) xs[i] = x;
    x = rlx_concat(im->g, (int)rep[a], xs, a);
  }
  return ox_set_out(im, n, 0, x);
}

/* CenterCropPad: each listed axis cropped or zero-padded to its size from
 * the known shape, centered (the odd element goes to the end). */
rlx_status ox_op_center_crop_pad(ox_importer *im, const ox_node *n) {
  rlx_node x = IN(0);
  NEED(x);
  int64_t dims[RLX_MAX_RANK], k;
  int r = rlx_node_type(im->g, x, NULL, dims);
  const int64_t *shape = ox_in_ints(im, n, 1, &k);
  if (!shape) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape not known at import");
  if (ox_ints_sym(im, shape, k)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a shape " OX_SYM_HINT);
  const ox_attr *aa = ox_attr_get(n, "axes");
  int64_t na = aa ? aa->n_ints : r;
  if (k != na) return ox_node_fail(im, n, RLX_ERR_INVALID, "a shape of %lld for %lld axes", (long long)k, (long long)na);
  int64_t st[RLX_MAX_RANK], en[RLX_MAX_RANK], sp[RLX_MAX_RANK], before[RLX_MAX_RANK], after[RLX_MAX_RANK];
  for (int i = 0; i < r; i++) st[i] = 0, en[i] = dims[i], sp[i] = 1, before[i] = after[i] = 0;
  for (int64_t i = 0; i < na; i++) {
    int64_t a = aa ? aa->ints[i] : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r || ir_dim_is_sym(dims[a]) || shape[i] < 0)
      return ox_node_fail(im, n, RLX_ERR_INVALID, "axis %lld of size %lld", (long long)a, (long long)shape[i]);
    int64_t d = dims[a] - shape[i];
    if (d > 0) st[a] = d / 2, en[a] = d / 2 + shape[i];
    else if (d < 0) before[a] = -d / 2, after[a] = -d - -d / 2;
  }
  x = rlx_slice(im->g, x, r, st, en, sp);
  return ox_set_out(im, n, 0, rlx_pad(im->g, x, r, before, after, 0));
}
