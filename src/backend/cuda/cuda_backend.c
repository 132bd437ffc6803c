/* cuda_backend.c — the CUDA backend: a segment of the graph lowered to a
 * list of kernel launches and cuBLASLt calls over one device arena, and
 * captured once into a CUDA graph executable; a run is one replay.
 *
 * Compile (per specialized graph, i.e. per shape binding):
 *  - the memory planner (plan_arena_offsets) places every intermediate in
 *    one device arena; views name their input's bytes, in-place nodes
 *    share their input's buffer, exactly as on the CPU;
 *  - every leaf gets a device buffer (constants are uploaded now), so each
 *    tensor has a final device address and every launch's argument block
 *    is built once, here; a param's buffer is the session's, in its store
 *    (param_store.h), which every plan of the session shares;
 *  - parameter-only subgraphs (transposes, casts, reshapes of weights)
 *    are marked "folded": they get buffers of their own outside the arena
 *    (in the store too, shared by the session's plans) and run once after
 *    their params are uploaded, not per run;
 *  - a transpose of a weight's two dims that only feeds matmuls is not run
 *    at all: the matmul reads it transposed (cuBLASLt op T);
 *  - the backend's own fusions (cuda_fuse.c; RLX_CUDA_FUSE=0: all off)
 *    make one launch stand for several nodes: a residual add of a product
 *    computed by the product's GEMM (cuBLASLt's C input, beta 1) or GEMV
 *    epilogue; at decode rows silu(x @ wg) * (x @ wu) as one GEMV launch,
 *    an RmsNorm (zero beta) computed by the GEMV launch of the products
 *    that read it (or by their x quantization on the integer path), a
 *    SwiGLU by the x quantization of the integer products that read it, a
 *    Rope by tables applied by its product's GEMV launch, products of one
 *    x as segments of one launch; a float Cast done by the UpdateSlice
 *    copy that reads it (a new K or V row into a 16-bit cache); the Ropes
 *    of q and k, and the K and V row copies, each pair in one launch;
 *  - the remaining launches are captured into a CUDA graph
 *    (RLX_CUDA_GRAPH=0: issued one by one each run; the same launches with
 *    the same arguments, so the results are identical; RLX_CUDA_PROFILE=1:
 *    op by op with an event around each launch, and a table of the time
 *    per op kind printed to stderr after 10 runs).
 * Run: inputs are copied to their device buffers when their version
 * changed (so a repeated run on unchanged inputs copies nothing; small
 * ones go to a pinned block that the replay itself copies over), params
 * when the store's buffer holds another version (and the folded steps
 * rerun when a param is not the version this plan folded them from), then
 * one graph replay, which ends by copying the device error word (an
 * out-of-range index, checked then) and the small outputs to pinned
 * memory, where a read finds them.
 */
#include "cuda_plan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- device presence */

static int device_count;
static pthread_once_t device_once = PTHREAD_ONCE_INIT;
static void probe_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  device_count = n;
  cudaGetLastError(); /* a failed probe (no driver) leaves no sticky error */
}

int rlx_cuda_device_count(void) {
  pthread_once(&device_once, probe_devices);
  return device_count;
}

int rlx_cuda_available(void) { return rlx_cuda_device_count() > 0; }

/* Makes the plan's device the calling thread's current one: a session may
 * be used from any thread, and each thread has its own current device. */
static rlx_status use_device(const cuda_plan *pl) {
  const cudaError_t e = cudaSetDevice(pl->device);
  return e == cudaSuccess ? RLX_OK : cuda_fail(e, "cudaSetDevice");
}

static void cuda_free(void *p) {
  cuda_plan *pl = p;
  if (!pl) return;
  (void)use_device(pl);
  if (pl->stream) cudaStreamSynchronize(pl->stream);
  if (pl->profiled_runs && pl->profiled_runs < CUDA_PROFILE_RUNS) cuda_profile_print(pl);
  if (pl->events)
    for (int i = 0; i <= pl->n_steps; i++) cudaEventDestroy(pl->events[i]);
  free(pl->events);
  free(pl->step_ms);
  if (pl->exec) cudaGraphExecDestroy(pl->exec);
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].kind == ST_GEMM) cuda_gemm_free(pl->steps[i].args);
    else if (pl->steps[i].kind == ST_CONV) cuda_conv_free(pl->steps[i].args);
    else free(pl->steps[i].args);
    if (pl->steps[i].dev_scratch) cudaFree(pl->steps[i].dev_scratch);
  }
  free(pl->steps);
  cuda_cudnn_destroy(pl->cudnn);
  if (pl->conv_ws) cudaFree(pl->conv_ws);
  if (pl->g) {
    for (int i = 0; i < pl->g->n_nodes; i++) {
      if (pl->entry && pl->entry[i]) {
        cuda_store_put(pl->store, pl->entry[i]);
        continue;
      }
      if (pl->leaf_dev && pl->leaf_dev[i] && !(pl->in_off && pl->in_off[i] != SIZE_MAX)) cudaFree(pl->leaf_dev[i]);
      if (pl->folded_dev && pl->folded_dev[i]) cudaFree(pl->folded_dev[i]);
    }
  }
  free(pl->leaf_dev);
  free(pl->leaf_bytes);
  free(pl->leaf_version);
  free(pl->entry);
  free(pl->folded_dev);
  free(pl->folded);
  free(pl->skip);
  free(pl->resid_add);
  free(pl->glu_region);
  free(pl->cast_into);
  free(pl->rope_gemv);
  free(pl->qmv_cache);
  free(pl->add_done);
  free(pl->slot);
  if (pl->arena) cudaFree(pl->arena);
  if (pl->workspace) cudaFree(pl->workspace);
  if (pl->scratch) cudaFree(pl->scratch);
  if (pl->err_dev) cudaFree(pl->err_dev);
  if (pl->err_host) cudaFreeHost(pl->err_host);
  if (pl->in_host) cudaFreeHost(pl->in_host);
  if (pl->out_host) cudaFreeHost(pl->out_host);
  if (pl->in_dev) cudaFree(pl->in_dev);
  free(pl->in_off);
  free(pl->out_copy);
  if (pl->stream) cudaStreamDestroy(pl->stream);
  plan_memory_free(&pl->mem);
  free(pl);
}

/* Parameter-only nodes whose result is worth keeping: all inputs params,
 * constants or such nodes, and an output no larger than twice its inputs
 * plus 1 MiB (a folded Expand must not blow up memory). */
static void mark_folded(cuda_plan *pl) {
  const rlx_graph *g = pl->g;
  /* An assigned param is state the graph updates on every run (and the
   * device may keep, cuda_keep_assigned): nothing derived from it folds. */
  uint8_t *state = calloc((size_t)g->n_nodes + 1, 1);
  if (!state) return; /* nothing folded: correct, only slower */
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == RLX_OP_Assign) state[g->nodes[i].in[0]] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF || n->n_in == 0) continue;
    int ok = 1;
    size_t in_bytes = 0;
    for (int k = 0; ok && k < n->n_in; k++) {
      const ir_node *src = &g->nodes[n->in[k]];
      ok = (src->op == RLX_OP_Param && !state[src->id]) || src->op == RLX_OP_Constant || pl->folded[src->id];
      in_bytes += rlx_dtype_nbytes(src->out[0].dtype, ir_numel(&src->out[0].shape));
    }
    size_t out_bytes = 0;
    for (int o = 0; o < n->n_out; o++) out_bytes += rlx_dtype_nbytes(n->out[o].dtype, ir_numel(&n->out[o].shape));
    pl->folded[i] = ok && out_bytes <= 2 * in_bytes + ((size_t)1 << 20);
  }
  free(state);
}

/* key[i]: how node i is computed — its op, attributes (a param's name, a
 * constant's bytes), types and inputs, hashed recursively — which is the
 * same in every plan of the session: a folded node's buffer in the store
 * goes by it, so the plans share one copy of a weight folded from params
 * (an F16 weight cast to F32). */
static void folded_store_keys(const rlx_graph *g, uint64_t *key) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    uint64_t h = pass_hash_bytes(PASS_HASH_SEED, &n->op, sizeof n->op);
    for (int k = 0; k < n->n_in; k++) h = pass_hash_bytes(h, &key[n->in[k]], sizeof key[0]);
    for (int o = 0; o < n->n_out; o++) h = pass_type_hash(h, &n->out[o]);
    key[i] = pass_attrs_hash(n->op, &n->a, h);
  }
}

/* A Transpose swapping the two dims of a rank-2 tensor, which matmuls can read as op T. */
static int is_weight_transpose(const rlx_graph *g, rlx_node id) {
  const ir_node *t = &g->nodes[id];
  return t->op == RLX_OP_Transpose && t->out[0].shape.rank == 2 && t->a.perm.v[0] == 1 && t->a.perm.v[1] == 0;
}

/* Weight transposes every reader of which is a matmul's b operand: the
 * product reads them as op T, so they never run. */
static void mark_absorbed(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  int *absorbed = calloc((size_t)g->n_nodes + 1, sizeof *absorbed);
  if (!absorbed) return; /* nothing absorbed: correct, only slower */
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op == RLX_OP_MatMul && ir_in(g, n, 0)->shape.rank >= 1 && ir_in(g, n, 1)->shape.rank == 2) ||
        n->op == RLX_OP_FusedMatMulBiasAct)
      if (is_weight_transpose(g, n->in[1]) && n->in[0] != n->in[1]) absorbed[n->in[1]]++;
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (absorbed[i] && absorbed[i] == uses[i]) pl->skip[i] = 1; /* unless it is a view (cuda_compile) */
  free(absorbed);
}

static rlx_status cuda_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store,
                               void **out) {
  (void)b;
  *out = NULL;
  if (!rlx_cuda_available()) return rlx_set_error(RLX_ERR_DEVICE, "CUDA: no CUDA device is present");
  const int device = opt ? opt->device_index : 0;
  if (device < 0 || device >= rlx_cuda_device_count())
    return rlx_set_error(RLX_ERR_DEVICE, "CUDA: device %d is not present (%d devices)", device, rlx_cuda_device_count());
  cuda_plan *pl = calloc(1, sizeof *pl);
  if (!pl) return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
  pl->device = device;
  pl->comm = opt ? opt->comm : NULL;
  rlx_status st = use_device(pl);
  if (st) {
    free(pl);
    return st;
  }
  pl->g = g;
  pl->store = store;
  pl->use_graph = ir_env_flag("RLX_CUDA_GRAPH", 1);
  pl->tf32 = ir_env_flag("RLX_CUDA_TF32", 0);
  pl->attn_exact = ir_env_flag("RLX_CUDA_ATTN_EXACT", 0);
  pl->attn_no_cluster = !ir_env_flag("RLX_CUDA_ATTN_CLUSTER", 1);
  const char *tile = getenv("RLX_CUDA_ATTN_TILE"); /* a number, not a switch */
  pl->attn_tile = tile && (!strcmp(tile, "64") || !strcmp(tile, "128")) ? atoi(tile) : 0;
  pl->no_gemv = !ir_env_flag("RLX_CUDA_GEMV", 1);
  pl->qmm_exact = ir_env_flag("RLX_QMATMUL_REF", 0); /* the CPU backend's switch */
  pl->pdl = ir_env_flag("RLX_CUDA_PDL", 1);
  pl->fuse = ir_env_flag("RLX_CUDA_FUSE", 1);
  pl->profile = ir_env_flag("RLX_CUDA_PROFILE", 0);
  pl->keep_state = ir_env_flag("RLX_CUDA_KEEP_STATE", 1);
  if (pl->profile) pl->use_graph = 0;
  const size_t n_nodes = (size_t)g->n_nodes + 1;
  int *uses = NULL;
  uint8_t *outside = NULL;
  uint64_t *fold_key = NULL;
  pl->leaf_dev = calloc(n_nodes, sizeof *pl->leaf_dev);
  pl->leaf_bytes = calloc(n_nodes, sizeof *pl->leaf_bytes);
  pl->leaf_version = calloc(n_nodes, sizeof *pl->leaf_version);
  pl->entry = calloc(n_nodes, sizeof *pl->entry);
  pl->folded_dev = calloc(n_nodes, sizeof *pl->folded_dev);
  pl->folded = calloc(n_nodes, 1);
  pl->skip = calloc(n_nodes, 1);
  pl->resid_add = malloc(n_nodes * sizeof *pl->resid_add);
  pl->glu_region = malloc(n_nodes * sizeof *pl->glu_region);
  pl->cast_into = malloc(n_nodes * sizeof *pl->cast_into);
  pl->rope_gemv = calloc(n_nodes, 1);
  pl->qmv_cache = calloc(n_nodes, 1);
  pl->add_done = calloc(n_nodes, 1);
  pl->slot = calloc(n_nodes * IR_MAX_OUTPUTS, sizeof *pl->slot);
  uses = ir_use_counts(g);
  outside = calloc(n_nodes, 1);
  fold_key = malloc(n_nodes * sizeof *fold_key);
  if (!pl->leaf_dev || !pl->leaf_bytes || !pl->leaf_version || !pl->entry || !pl->folded_dev || !pl->folded || !pl->skip ||
      !pl->resid_add || !pl->glu_region || !pl->cast_into || !pl->rope_gemv || !pl->qmv_cache || !pl->add_done || !pl->slot || !uses || !outside || !fold_key) {
    st = rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
    goto fail;
  }
  /* Folded results have buffers of their own and absorbed transposes none:
   * the arena leaves both out (it held a weight-sized hole per plan). */
  mark_folded(pl);
  mark_absorbed(pl, uses);
  for (int i = 0; i < g->n_nodes; i++) outside[i] = pl->folded[i] || pl->skip[i];
  if (pl->store) folded_store_keys(g, fold_key);
  if ((st = plan_arena_offsets(g, outside, 0, &pl->mem))) goto fail;
  for (int i = 0; i < g->n_nodes; i++)
    if (pl->mem.view[i]) pl->skip[i] = 0; /* a view names its input's bytes: nothing to absorb */
  cudaError_t e = cudaStreamCreateWithFlags(&pl->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    pl->stream = NULL;
    st = cuda_fail(e, "cudaStreamCreate");
    goto fail;
  }
  if ((st = cuda_alloc_dev((void **)&pl->arena, pl->mem.arena_bytes, "the arena"))) goto fail;
  if ((st = cuda_alloc_dev((void **)&pl->err_dev, sizeof *pl->err_dev, "the error word"))) goto fail;
  if ((e = cudaHostAlloc((void **)&pl->err_host, sizeof *pl->err_host, cudaHostAllocDefault)) != cudaSuccess) {
    pl->err_host = NULL;
    st = cuda_fail(e, "cudaHostAlloc");
    goto fail;
  }
  memset(pl->err_host, 0, sizeof *pl->err_host);
  if ((st = cuda_plan_staged_inputs(pl))) goto fail;
  for (size_t i = 0; i < n_nodes; i++) pl->resid_add[i] = pl->glu_region[i] = pl->cast_into[i] = -1;
  cuda_fuse_match(pl, uses);
  /* device addresses of every output */
  int any_gemm = 0;
  size_t scratch = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const size_t slot0 = (size_t)i * IR_MAX_OUTPUTS;
    if (ir_ops[n->op].category == RLX_CAT_LEAF) {
      size_t bytes = rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape));
      pl->leaf_bytes[i] = bytes;
      if (bytes && n->op == RLX_OP_Param && pl->store) {
        if ((st = cuda_store_get(pl->store, n->a.name, bytes, &pl->entry[i]))) goto fail;
        pl->leaf_dev[i] = pl->entry[i]->dev;
        pl->store_bytes += bytes;
      } else if (pl->in_off[i] != SIZE_MAX) {
        pl->leaf_dev[i] = pl->in_dev + pl->in_off[i];
      } else if (bytes) {
        if ((st = cuda_alloc_dev(&pl->leaf_dev[i], bytes, n->a.name ? n->a.name : "a constant"))) goto fail;
        if (n->op == RLX_OP_Constant &&
            (e = cudaMemcpy(pl->leaf_dev[i], n->a.data.p, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) {
          st = cuda_fail(e, "uploading a constant");
          goto fail;
        }
      }
      pl->slot[slot0] = pl->leaf_dev[i];
      continue;
    }
    if (pl->skip[i]) continue; /* read through by its matmuls: no buffer */
    if (pl->mem.view[i]) { /* the input's bytes at the planner's offset */
      size_t in_slot = plan_input_slot(n, 0);
      pl->slot[slot0] = pl->slot[in_slot] ? pl->slot[in_slot] + (pl->mem.offset[slot0] - pl->mem.offset[in_slot]) : NULL;
      continue;
    }
    if (pl->folded[i]) {
      size_t total = 0, offs[IR_MAX_OUTPUTS];
      for (int o = 0; o < n->n_out; o++) {
        offs[o] = total;
        total += (rlx_dtype_nbytes(n->out[o].dtype, ir_numel(&n->out[o].shape)) + RLX_ARENA_ALIGN - 1) /
                 RLX_ARENA_ALIGN * RLX_ARENA_ALIGN;
      }
      if (pl->store) {
        char name[40];
        snprintf(name, sizeof name, "rlx.folded.%016llx", (unsigned long long)fold_key[i]);
        if ((st = cuda_store_get(pl->store, name, total, &pl->entry[i]))) goto fail;
        pl->folded_dev[i] = pl->entry[i]->dev;
        pl->store_bytes += total;
      } else if ((st = cuda_alloc_dev(&pl->folded_dev[i], total, "a folded parameter"))) {
        goto fail;
      }
      for (int o = 0; o < n->n_out; o++) pl->slot[slot0 + o] = (uint8_t *)pl->folded_dev[i] + offs[o];
    } else { /* in the arena, or in a leaf's bytes (the UpdateSlice of an in-place Assign) */
      for (int o = 0; o < n->n_out; o++) {
        const int32_t leaf = pl->mem.leaf[slot0 + o];
        pl->slot[slot0 + o] =
            (leaf >= 0 ? (uint8_t *)pl->leaf_dev[leaf] : pl->arena) + pl->mem.offset[slot0 + o];
      }
    }
    any_gemm |= n->op == RLX_OP_MatMul || n->op == RLX_OP_FusedMatMulBiasAct || n->op == RLX_OP_DequantMatMul;
    size_t q = cuda_quant_scratch_bytes(pl, n);
    scratch = q > scratch ? q : scratch;
  }
  if ((st = cuda_plan_output_copies(pl))) goto fail;
  if (any_gemm && (st = cuda_alloc_dev(&pl->workspace, CUDA_GEMM_WORKSPACE, "the cuBLASLt workspace"))) goto fail;
  if (scratch && (st = cuda_alloc_dev(&pl->scratch, scratch, "dequantized weights"))) goto fail;
  pl->scratch_bytes = scratch;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF || pl->mem.view[i] || pl->skip[i] || pl->add_done[i]) continue;
    if ((st = cuda_lower_node(pl, n))) goto fail;
  }
  if (ir_env_flag("RLX_TRACE", 0)) cuda_fuse_trace(pl);
  if (pl->profile) {
    pl->events = calloc((size_t)pl->n_steps + 1, sizeof *pl->events);
    pl->step_ms = calloc((size_t)pl->n_steps + 1, sizeof *pl->step_ms);
    if (!pl->events || !pl->step_ms) {
      free(pl->events), pl->events = NULL;
      st = rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
      goto fail;
    }
    for (int i = 0; i <= pl->n_steps; i++) cudaEventCreate(&pl->events[i]);
  }
  for (int i = 0; i < pl->n_steps; i++) pl->launches += !pl->steps[i].folded;
  if (pl->use_graph && (pl->has_err || pl->launches) && (st = cuda_capture(pl))) goto fail;
  free(uses);
  free(outside);
  free(fold_key);
  *out = pl;
  return RLX_OK;
fail:
  free(uses);
  free(outside);
  free(fold_key);
  cuda_free(pl);
  return st;
}

static rlx_status cuda_run(void *p, const rlx_bindings *bind) {
  cuda_plan *pl = p;
  const rlx_graph *g = pl->g;
  cudaError_t e;
  int params_changed = 0;
  const rlx_status on_device = use_device(pl);
  if (on_device) return on_device;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op != RLX_OP_Input && n->op != RLX_OP_Param) || !pl->leaf_dev[i]) continue;
    const uint64_t v = bind->leaf_version ? bind->leaf_version[i] : 0;
    /* the buffer's version: the store's when shared (another plan may have copied v in already) */
    uint64_t *held = pl->entry[i] ? &pl->entry[i]->version : &pl->leaf_version[i];
    params_changed |= n->op == RLX_OP_Param && (v == 0 || v != pl->leaf_version[i]);
    if (v == 0 || v != *held) {
      const void *src = bind->leaf_data[i];
      if (!src) return rlx_set_error(RLX_ERR_INVALID, "CUDA: %s \"%s\" has no data", ir_ops[n->op].name, n->a.name);
      if (pl->in_off[i] != SIZE_MAX) /* the replay copies it over */
        memcpy(pl->in_host + pl->in_off[i], src, pl->leaf_bytes[i]);
      else if ((e = cudaMemcpyAsync(pl->leaf_dev[i], src, pl->leaf_bytes[i], cudaMemcpyHostToDevice, pl->stream)) !=
               cudaSuccess)
        return cuda_fail(e, "uploading a leaf");
      *held = v;
    }
    pl->leaf_version[i] = v;
  }
  if (params_changed || !pl->folded_ready) {
    if (pl->has_err && (e = cudaMemsetAsync(pl->err_dev, 0, sizeof *pl->err_dev, pl->stream)) != cudaSuccess)
      return cuda_fail(e, "cudaMemsetAsync");
    for (int i = 0; i < pl->n_steps; i++) {
      if (!pl->steps[i].folded) continue;
      rlx_status st = cuda_launch(pl, &pl->steps[i]);
      if (st) return st;
    }
    if (pl->has_err) {
      if ((e = cudaMemcpyAsync(pl->err_host, pl->err_dev, sizeof *pl->err_dev, cudaMemcpyDeviceToHost, pl->stream)) !=
              cudaSuccess ||
          (e = cudaStreamSynchronize(pl->stream)) != cudaSuccess)
        return cuda_fail(e, "folding parameters");
      rlx_status st = cuda_check_device_error(pl);
      if (st) return st;
    }
    pl->folded_ready = 1;
  }
  if (pl->exec) {
    if ((e = cudaGraphLaunch(pl->exec, pl->stream)) != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch");
  } else {
    rlx_status st = cuda_issue_run(pl);
    if (st) return st;
  }
  if (pl->collectives) {
    rlx_status st = cuda_nccl_wait(pl->comm, pl->stream);
    if (st) return st;
  } else if ((e = cudaStreamSynchronize(pl->stream)) != cudaSuccess)
    return cuda_fail(e, "running the plan");
  if (pl->events) {
    cuda_profile_collect(pl);
    if (pl->profiled_runs == CUDA_PROFILE_RUNS) cuda_profile_print(pl);
  }
  return cuda_check_device_error(pl);
}

/* A copy on the plan's stream, waited for. */
static rlx_status copy_now(cuda_plan *pl, void *dst, const void *src, size_t nbytes, enum cudaMemcpyKind kind,
                           const char *what) {
  rlx_status st = use_device(pl);
  if (st) return st;
  cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, kind, pl->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(pl->stream);
  return e == cudaSuccess ? RLX_OK : cuda_fail(e, what);
}

static rlx_status cuda_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  cuda_plan *pl = p;
  size_t slot = (size_t)n * IR_MAX_OUTPUTS + (size_t)index;
  if (pl->mem.offset[slot] == SIZE_MAX || pl->mem.nbytes[slot] != nbytes || (nbytes && !pl->slot[slot]))
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA plan: node %d output %d has no buffer of %zu bytes", (int)n, index,
                         nbytes);
  if (!nbytes) return RLX_OK;
  for (int i = 0; i < pl->n_out_copies; i++)
    if (pl->out_copy[i].slot == slot && pl->out_copy[i].bytes == nbytes) { /* copied by the run */
      memcpy(dst, pl->out_host + pl->out_copy[i].off, nbytes);
      return RLX_OK;
    }
  return copy_now(pl, dst, pl->slot[slot], nbytes, cudaMemcpyDeviceToHost, "reading an output");
}

/* keep_assigned: the value of Assign a stays in the param's device buffer
 * (in place already, else copied there), and the plan records `version`
 * as that buffer's, so the next run does not copy the host's older bytes
 * over it. Nothing in the plan was folded from an assigned param
 * (mark_folded), so nothing else needs recomputing. */
static int cuda_keep_assigned(void *p, rlx_node a, uint64_t version) {
  cuda_plan *pl = p;
  const rlx_graph *g = pl->g;
  if (!pl->keep_state || a < 0 || a >= g->n_nodes || g->nodes[a].op != RLX_OP_Assign) return 0;
  const rlx_node param = g->nodes[a].in[0];
  const uint8_t *value = pl->slot[(size_t)a * IR_MAX_OUTPUTS];
  if (g->nodes[param].op != RLX_OP_Param || !pl->leaf_dev[param] || !value) return 0;
  if (value != pl->leaf_dev[param] &&
      copy_now(pl, pl->leaf_dev[param], value, pl->leaf_bytes[param], cudaMemcpyDeviceToDevice, "keeping a param")) {
    (void)cudaGetLastError();
    return 0; /* the session reads it back instead, and reports a failure there */
  }
  pl->leaf_version[param] = version;
  if (pl->entry[param]) pl->entry[param]->version = version;
  return 1;
}

/* share_kept: two plans of one session read a param from the same store
 * buffer, which holds the kept value already; `to` only records that it
 * has seen that version (so it neither copies it in nor refolds). */
static int cuda_share_kept(void *from, rlx_node p_from, void *to, rlx_node p_to) {
  const cuda_plan *a = from;
  cuda_plan *b = to;
  if (p_from < 0 || p_from >= a->g->n_nodes || p_to < 0 || p_to >= b->g->n_nodes) return 0;
  const cuda_store_entry *e = a->entry[p_from];
  if (!e || e != b->entry[p_to]) return 0;
  b->leaf_version[p_to] = e->version;
  return 1;
}

static void *cuda_store_new_any(int device_index) { return cuda_store_new(device_index); }

static void cuda_store_free_any(void *store) { cuda_store_free(store); }

static rlx_status cuda_fetch_param(void *p, rlx_node param, void *dst, size_t nbytes) {
  cuda_plan *pl = p;
  if (param < 0 || param >= pl->g->n_nodes || !pl->leaf_dev[param] || pl->leaf_bytes[param] != nbytes)
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA plan: node %d holds no param of %zu bytes", (int)param, nbytes);
  return copy_now(pl, dst, pl->leaf_dev[param], nbytes, cudaMemcpyDeviceToHost, "reading a kept param");
}

static void cuda_memory_stats(const void *p, rlx_session_stats *st) {
  const cuda_plan *pl = p;
  const plan_memory *m = &pl->mem;
  st->arena_bytes = m->arena_bytes;
  st->naive_bytes = m->naive_bytes;
  st->peak_live_bytes = m->peak_live_bytes;
  st->views = m->n_views;
  st->in_place = m->n_inplace;
  st->device_launches = pl->launches;
  st->param_device_bytes = pl->store_bytes;
}

const rlx_backend rlx_cuda_backend = {"cuda",          cuda_claims,        cuda_compile,
                                      cuda_run,        cuda_read,          cuda_memory_stats,
                                      cuda_free,       cuda_keep_assigned, cuda_fetch_param,
                                      cuda_store_new_any, cuda_store_free_any, cuda_share_kept,
                                      NULL};

