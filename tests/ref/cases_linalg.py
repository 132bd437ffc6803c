"""Op-parity cases of the linalg group: MatMul, Attention, Rope, CrossEntropy,
MseLoss. References are written here in NumPy (float64, from the values as
rounded to the input dtype)."""
import numpy as np

from rlxcase import FLOAT_DTYPES, Graph, T, round_to

NEG_INF = -np.inf


def rand(rng, shape, dtype, scale=1.0):
    """(T for the case input, float64 values as stored in dtype)."""
    x = rng.standard_normal(shape) * scale
    return T(x, dtype), round_to(x, dtype).astype(np.float64)


# ---------------------------------------------------------------- references

def ref_attention(q, k, v, H, Hkv, D, layout, mask, window, score_scale, softcap, custom):
    """q/k/v in their layout (rank 3 [B,S,H*D], or rank 4 bshd / bhsd)."""
    def to_bhsd(x, heads):
        if x.ndim == 3:
            return x.reshape(x.shape[0], x.shape[1], heads, D).transpose(0, 2, 1, 3)
        return x.transpose(0, 2, 1, 3) if layout == "bshd" else x

    qh, kh, vh = to_bhsd(q, H), to_bhsd(k, Hkv), to_bhsd(v, Hkv)
    group = H // Hkv
    kh = np.repeat(kh, group, axis=1)  # query head h reads kv head h // group
    vh = np.repeat(vh, group, axis=1)
    S, Tk = qh.shape[2], kh.shape[2]
    scale = score_scale if score_scale > 0 else 1.0 / np.sqrt(D)
    s = np.einsum("bhsd,bhtd->bhst", qh, kh) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    i = np.arange(S)[:, None] + (Tk - S)  # bottom-right aligned: last query sees last key
    j = np.arange(Tk)[None, :]
    if mask == "causal":
        s = np.where(j <= i, s, NEG_INF)
    elif mask == "sliding_window":
        s = np.where((j <= i) & (j > i - window), s, NEG_INF)
    elif mask == "custom":
        s = s + custom
    m = s.max(axis=-1, keepdims=True)
    dead = np.isneginf(m)
    p = np.exp(s - np.where(dead, 0.0, m))
    p = np.where(dead, 0.0, p / np.where(dead, 1.0, p.sum(axis=-1, keepdims=True)))
    o = np.einsum("bhst,bhtd->bhsd", p, vh)
    if q.ndim == 3:
        return o.transpose(0, 2, 1, 3).reshape(q.shape)
    return o.transpose(0, 2, 1, 3) if layout == "bshd" else o


def rope_tables(pos, n_rot, base, scale):
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta = pos.astype(np.float64)[..., None] * base ** (-2.0 * i / n_rot) / scale
    return np.cos(theta), np.sin(theta)


def ref_rope(x, cos, sin, head_dim, n_rot, mode):
    """x [B,S,H*D] or [B,S,H,D]; cos/sin [S, n_rot/2] or [B, S, n_rot/2]."""
    B, S = x.shape[0], x.shape[1]
    xh = x.reshape(B, S, -1, head_dim).copy()
    c = np.broadcast_to(cos, (B, S, n_rot // 2))[:, :, None, :]
    s = np.broadcast_to(sin, (B, S, n_rot // 2))[:, :, None, :]
    if mode == "normal":
        i0, i1 = np.arange(0, n_rot, 2), np.arange(1, n_rot, 2)
    else:
        i0, i1 = np.arange(n_rot // 2), np.arange(n_rot // 2, n_rot)
    x0, x1 = xh[..., i0].copy(), xh[..., i1].copy()
    xh[..., i0] = x0 * c - x1 * s
    xh[..., i1] = x0 * s + x1 * c
    return xh.reshape(x.shape)


def ref_cross_entropy(logits, target, axis, ignore_index, eps):
    z = np.moveaxis(logits, axis, -1)
    C = z.shape[-1]
    m = z.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True)))[..., 0]
    keep = target != ignore_index
    t = np.where(keep, target, 0)
    nll = lse - np.take_along_axis(z, t[..., None].astype(np.int64), axis=-1)[..., 0]
    smooth = C * lse - z.sum(axis=-1)
    loss = (1 - eps) * nll + eps / C * smooth
    n = keep.sum()
    return np.float64(loss[keep].sum() / n) if n else np.float64(0.0)  # all ignored: 0


# ---------------------------------------------------------------- MatMul

def matmul_cases(suite, rng):
    shapes = [
        ("odd", (7, 13), (13, 5)),
        ("bcast", (2, 1, 3, 4), (5, 4, 6)),
        ("bcast_b", (3, 4), (2, 4, 3)),
        ("batch", (3, 2, 5), (3, 5, 4)),
        ("vec_mat", (13,), (13, 5)),
        ("mat_vec", (7, 13), (13,)),
        ("dot", (9,), (9,)),
        ("vec_batch", (4,), (2, 4, 3)),
        ("batch_vec", (2, 3, 4), (4,)),
        ("ones", (1, 1), (1, 1)),
        ("rank5", (2, 1, 3, 3, 2), (3, 2, 4)),
    ]
    for dt in FLOAT_DTYPES:
        for name, sa, sb in shapes:
            g = Graph("matmul_" + name)
            a = g.input("a", dt, sa)
            b = g.input("b", dt, sb)
            g.outputs(g.op("MatMul", [a, b]))
            ta, va = rand(rng, sa, dt)
            tb, vb = rand(rng, sb, dt)
            suite.add("matmul_%s_%s" % (name, dt), g, inputs={"a": ta, "b": tb},
                      expected=[T(np.matmul(va, vb), dt)])
    # K = 0: empty sums give zeros
    g = Graph("matmul_k0")
    a = g.input("a", "f32", [3, 0])
    b = g.input("b", "f32", [0, 2])
    g.outputs(g.op("MatMul", [a, b]))
    suite.add("matmul_k0_f32", g, inputs={"a": np.zeros((3, 0), np.float32),
                                          "b": np.zeros((0, 2), np.float32)},
              expected=[np.zeros((3, 2), np.float32)])
    # symbolic batch and row dims
    g = Graph("matmul_sym")
    a = g.input("a", "f32", ["B", "M", 6])
    b = g.input("b", "f32", [6, 3])
    g.outputs(g.op("MatMul", [a, b]))
    va = rng.standard_normal((2, 5, 6)).astype(np.float32)
    vb = rng.standard_normal((6, 3)).astype(np.float32)
    suite.add("matmul_sym_f32", g, inputs={"a": va, "b": vb},
              expected=[(va.astype(np.float64) @ vb).astype(np.float32)])

    # B the Transpose of a weight (ONNX's Gemm with transB): the CPU reads
    # the weight's bytes as a transposed operand, the Transpose runs no
    # kernel; as a graph output too (then it runs); F64 by the reference
    for dt in FLOAT_DTYPES:
        for fused in (False, True):
            g = Graph("matmul_wt")
            a = g.input("a", dt, [5, 7])
            w = g.param("w", dt, [9, 7])
            wt = g.op("Transpose", [w], perm=[1, 0])
            if fused:
                y = g.op("FusedMatMulBiasAct", [a, wt, g.input("bias", dt, [9])], act="relu")
            else:
                y = g.op("MatMul", [a, wt])
            also_wt = dt == "f32" and fused
            g.outputs(y, *([wt] if also_wt else []))
            (ta, va), (tw, vw), (tbias, vbias) = rand(rng, [5, 7], dt), rand(rng, [9, 7], dt), rand(rng, [9], dt)
            ref = va @ vw.T
            inputs = {"a": ta}
            if fused:
                ref = np.maximum(ref + vbias, 0)
                inputs["bias"] = tbias
            suite.add("matmul_wt_%s%s" % ("fused_" if fused else "", dt), g, inputs=inputs, params={"w": tw},
                      expected=[T(ref, dt)] + ([T(vw.T, dt)] if also_wt else []))

    errors = [
        ("k_mismatch", "f32", (2, 3), "f32", (4, 5), "RLX_ERR_SHAPE"),
        ("k_mismatch_vec", "f32", (3,), "f32", (4,), "RLX_ERR_SHAPE"),
        ("batch_mismatch", "f32", (2, 3, 4), "f32", (3, 4, 5), "RLX_ERR_SHAPE"),
        ("rank0", "f32", (), "f32", (3, 2), "RLX_ERR_SHAPE"),
        ("dtype_mix", "f32", (2, 3), "f16", (3, 2), "RLX_ERR_DTYPE"),
        ("int", "i32", (2, 3), "i32", (3, 2), "RLX_ERR_DTYPE"),
    ]
    for name, da, sa, db, sb, err in errors:
        g = Graph("matmul_err_" + name)
        a = g.input("a", da, sa)
        b = g.input("b", db, sb)
        g.outputs(g.op("MatMul", [a, b]))
        suite.add("matmul_err_" + name, g, expect_error=err)


# ---------------------------------------------------------------- Attention

def qkv_shapes(form, B, S, Tk, H, Hkv, D):
    if form == "rank3":
        return (B, S, H * D), (B, Tk, Hkv * D)
    if form == "bshd":
        return (B, S, H, D), (B, Tk, Hkv, D)
    return (B, H, S, D), (B, Hkv, Tk, D)


def attention_case(suite, rng, name, dt="f32", form="rank3", B=2, S=5, Tk=7, H=8, Hkv=2, D=16,
                   mask="none", window=0, score_scale=0.0, softcap=0.0, custom=None,
                   attrs_override=None, atol=None, rtol=None):
    sq, sk = qkv_shapes(form, B, S, Tk, H, Hkv, D)
    layout = "bhsd" if form == "bhsd" else "bshd"
    g = Graph("attn_" + name)
    q = g.input("q", dt, sq)
    k = g.input("k", dt, sk)
    v = g.input("v", dt, sk)
    ins = [q, k, v]
    inputs = {}
    if mask == "custom":
        ins.append(g.input("mask", "f32", custom.shape))
        inputs["mask"] = custom.astype(np.float32)
    attrs = dict(num_heads=H, num_kv_heads=Hkv, head_dim=D, mask=mask, window=window,
                 score_scale=score_scale, softcap=softcap, layout=layout)
    attrs.update(attrs_override or {})
    g.outputs(g.op("Attention", ins, **attrs))
    (tq, vq), (tk, vk), (tv, vv) = rand(rng, sq, dt), rand(rng, sk, dt), rand(rng, sk, dt)
    inputs.update(q=tq, k=tk, v=tv)
    cm = None if custom is None else custom.astype(np.float32).astype(np.float64)
    ref = ref_attention(vq, vk, vv, H, Hkv, D, layout, mask, window, score_scale, softcap, cm)
    suite.add("attn_" + name, g, inputs=inputs, expected=[T(ref, dt)], atol=atol, rtol=rtol)


def custom_mask(rng, shape, dead_rows=()):
    """Additive mask: random values, some -inf, and rows (index into dim -2)
    that are all -inf."""
    m = rng.standard_normal(shape)
    m[rng.random(shape) < 0.3] = NEG_INF
    for r in dead_rows:
        m[..., r, :] = NEG_INF
    return m


def attention_cases(suite, rng):
    masks = ["none", "causal", "sliding_window", "custom"]
    for form in ("rank3", "bshd", "bhsd"):
        for mask in masks:
            custom = custom_mask(rng, (2, 8, 5, 7), dead_rows=(1,)) if mask == "custom" else None
            attention_case(suite, rng, "%s_%s_gqa" % (form, mask), form=form, mask=mask,
                           window=3, custom=custom)
    for dt in ("f16", "bf16", "f64"):
        for form in ("rank3", "bhsd"):
            attention_case(suite, rng, "%s_causal_%s" % (form, dt), dt=dt, form=form,
                           mask="causal")
        attention_case(suite, rng, "bshd_custom_%s" % dt, dt=dt, form="bshd", mask="custom",
                       custom=custom_mask(rng, (5, 7), dead_rows=(0,)))
    # decode (S = 1) and chunked prefill (S < T)
    for form in ("rank3", "bshd", "bhsd"):
        attention_case(suite, rng, "decode_%s" % form, form=form, S=1, Tk=9, mask="causal")
        attention_case(suite, rng, "prefill_chunk_%s" % form, form=form, S=3, Tk=8,
                       mask="causal")
    attention_case(suite, rng, "decode_window", S=1, Tk=9, mask="sliding_window", window=4)
    attention_case(suite, rng, "prefill_chunk_window", S=4, Tk=10, mask="sliding_window",
                   window=3)
    attention_case(suite, rng, "window_1", form="bhsd", S=6, Tk=6, mask="sliding_window",
                   window=1)
    # S > T: the first S - T queries see no key under a causal mask -> zeros
    attention_case(suite, rng, "causal_s_gt_t", form="bshd", S=6, Tk=4, mask="causal")
    # head counts: MHA, MQA
    attention_case(suite, rng, "mha", H=4, Hkv=4, mask="causal")
    attention_case(suite, rng, "mqa", form="bhsd", H=4, Hkv=1, mask="none")
    # scale and softcap
    attention_case(suite, rng, "softcap", mask="causal", softcap=5.0)
    attention_case(suite, rng, "softcap_scale", form="bhsd", mask="none", score_scale=0.5,
                   softcap=2.0)
    attention_case(suite, rng, "score_scale", form="bshd", mask="sliding_window", window=2,
                   score_scale=0.05)
    # head_dim 64, odd 5, and 256
    attention_case(suite, rng, "d64", B=1, S=4, Tk=4, H=2, Hkv=1, D=64, mask="causal")
    attention_case(suite, rng, "d64_bshd_f16", dt="f16", form="bshd", B=1, S=3, Tk=6, H=4,
                   Hkv=2, D=64, mask="causal")
    attention_case(suite, rng, "d5", H=3, Hkv=1, D=5, mask="causal")
    attention_case(suite, rng, "d5_bhsd", form="bhsd", H=6, Hkv=3, D=5, mask="none")
    attention_case(suite, rng, "d256", B=1, S=2, Tk=3, H=1, Hkv=1, D=256, mask="causal")
    # size-1 dims
    attention_case(suite, rng, "all_ones", B=1, S=1, Tk=1, H=1, Hkv=1, D=1, mask="causal")
    # custom masks broadcast from smaller shapes, with fully masked rows
    for mshape, dead in (((7,), ()), ((5, 7), (2, 4)), ((1, 1, 5, 7), (0,)), ((2, 1, 5, 7), (3,)),
                         ((1, 8, 1, 7), ())):
        attention_case(suite, rng, "custom_%s" % "x".join(map(str, mshape)), mask="custom",
                       custom=custom_mask(rng, mshape, dead_rows=dead if len(mshape) > 1 else ()))
    fully = np.full((5, 7), NEG_INF)
    attention_case(suite, rng, "custom_all_masked", form="bhsd", mask="custom", custom=fully)
    # attribute normalization: num_kv_heads 0 means num_heads, head_dim 0 comes from q
    attention_case(suite, rng, "kv_heads_0", H=4, Hkv=4, mask="causal",
                   attrs_override={"num_kv_heads": 0})
    attention_case(suite, rng, "head_dim_0_rank3", H=4, Hkv=2, D=8, mask="causal",
                   attrs_override={"head_dim": 0})
    attention_case(suite, rng, "head_dim_0_bhsd", form="bhsd", H=4, Hkv=2, D=8, mask="none",
                   attrs_override={"head_dim": 0})
    # symbolic sequence lengths (decode-style: S and T bound at run time)
    g = Graph("attn_sym")
    q = g.input("q", "f32", [1, "S", 2, 4])
    k = g.input("k", "f32", [1, "T", 1, 4])
    v = g.input("v", "f32", [1, "T", 1, 4])
    g.outputs(g.op("Attention", [q, k, v], num_heads=2, num_kv_heads=1, head_dim=4,
                   mask="causal", layout="bshd"))
    vq = rng.standard_normal((1, 3, 2, 4)).astype(np.float32)
    vk = rng.standard_normal((1, 5, 1, 4)).astype(np.float32)
    vv = rng.standard_normal((1, 5, 1, 4)).astype(np.float32)
    ref = ref_attention(vq.astype(np.float64), vk.astype(np.float64), vv.astype(np.float64),
                        2, 1, 4, "bshd", "causal", 0, 0.0, 0.0, None)
    suite.add("attn_sym_f32", g, inputs={"q": vq, "k": vk, "v": vv},
              expected=[ref.astype(np.float32)])

    long_attention_cases(suite, rng)
    attention_errors(suite)


def long_attention_cases(suite, rng):
    """Sequences longer than one key block of the tiled CPU kernel (64 keys)
    and query blocks that split GQA groups: S = T = 300, head_dim 64, every
    mask kind, both rank-4 layouts and rank 3."""
    L = 300
    for form, mask in (("rank3", "none"), ("bshd", "causal"), ("bhsd", "sliding_window"),
                       ("rank3", "custom"), ("bhsd", "causal")):
        custom = custom_mask(rng, (1, 4, L, L), dead_rows=(0, 137)) if mask == "custom" else None
        attention_case(suite, rng, "long_%s_%s" % (form, mask), form=form, B=1, S=L, Tk=L, H=4,
                       Hkv=2, D=64, mask=mask, window=100, custom=custom)
    # odd lengths around the block edges, chunked prefill over a long cache
    attention_case(suite, rng, "long_prefill_chunk", form="bshd", B=2, S=65, Tk=257, H=6, Hkv=2,
                   D=64, mask="causal")
    attention_case(suite, rng, "long_decode_window", form="bhsd", B=1, S=1, Tk=300, H=8, Hkv=1,
                   D=64, mask="sliding_window", window=130)
    attention_case(suite, rng, "long_softcap_mha", form="bshd", B=1, S=129, Tk=129, H=2, Hkv=2,
                   D=64, mask="causal", softcap=3.0)
    attention_case(suite, rng, "long_d80_gqa8", form="rank3", B=1, S=70, Tk=200, H=16, Hkv=2,
                   D=80, mask="none")
    attention_case(suite, rng, "long_d72_masked_head", form="bhsd", B=1, S=40, Tk=150, H=2, Hkv=1,
                   D=72, mask="custom", custom=custom_mask(rng, (1, 2, 40, 150), dead_rows=(7,)))
    for dt in ("f16", "bf16"):
        attention_case(suite, rng, "long_causal_%s" % dt, dt=dt, form="bshd", B=1, S=L, Tk=L,
                       H=4, Hkv=2, D=64, mask="causal")
    # decode over a long cache with few kv heads: the keys split over the
    # threads and merged (a range without visible keys, a fully masked row)
    attention_case(suite, rng, "long_decode_split_causal", form="bshd", B=1, S=1, Tk=1000, H=8,
                   Hkv=2, D=64, mask="causal")
    attention_case(suite, rng, "long_decode_split_window_mqa", form="rank3", B=1, S=1, Tk=1500, H=4,
                   Hkv=1, D=64, mask="sliding_window", window=700)
    attention_case(suite, rng, "long_decode_split_custom", form="bhsd", B=1, S=2, Tk=1100, H=2,
                   Hkv=1, D=64, mask="custom", custom=custom_mask(rng, (1, 2, 2, 1100), dead_rows=(1,)))
    attention_case(suite, rng, "long_decode_split_f16", dt="f16", form="bshd", B=1, S=1, Tk=777,
                   H=6, Hkv=3, D=64, mask="causal")
    # several sequences over one KV pool (rlx_llm_decode): each query sees
    # its own sequence's cells only -- prompts in runs of cells, decoded
    # tokens interleaved -- so whole key blocks are -inf for most rows; a
    # query with no cell at all; block-sparse masks with random holes
    for name, S, Tk, form in (("pool_decode", 8, 600, "bshd"), ("pool_decode_split", 2, 1100, "bshd"),
                              ("pool_prefill", 24, 400, "rank3")):
        attention_case(suite, rng, "long_" + name, form=form, B=1, S=S, Tk=Tk, H=9, Hkv=3, D=64,
                       mask="custom", custom=pool_mask(rng, S, Tk))
    blocks = rng.random((4, 40, 300 // 64 + 1)) < 0.5  # per head, query and key block
    sparse = np.where(np.repeat(blocks, 64, axis=2)[:, :, :300] & (rng.random((4, 40, 300)) < 0.8),
                      rng.standard_normal((4, 40, 300)), NEG_INF)
    sparse[1, 5] = NEG_INF
    attention_case(suite, rng, "long_block_sparse", form="bhsd", B=1, S=40, Tk=300, H=4, Hkv=2, D=64,
                   mask="custom", custom=sparse[None])
    # a prompt after 30 cells of another sequence: its keys run across the
    # 64-key block boundary, the first block is -inf for none of its rows
    after = np.full((37, 128), NEG_INF)
    for i in range(37):
        after[i, 30:31 + i] = 0.0
    for dt in ("f32", "f16"):
        attention_case(suite, rng, "long_prompt_after_cells_" + dt, dt=dt, B=1, S=37, Tk=128, H=9, Hkv=3,
                       D=64, mask="custom", custom=after)


def pool_mask(rng, S, T):
    """Query i is sequence i % n of n = S // 3 + 2 sequences: a prompt of
    T // (2 n) cells each, then cells taken in turn; the last query's
    sequence owns no cell."""
    n = S // 3 + 2
    prompt = T // (2 * n)
    j = np.arange(T)
    owner = np.where(j < prompt * n, j // prompt, (j - prompt * n) % n)
    seq = np.arange(S) % n
    seq[-1] = n
    live = owner[None, :] == seq[:, None]
    return np.where(live, 0.1 * rng.standard_normal((S, T)), NEG_INF)


def attention_errors(suite):
    def err(name, shapes, attrs, status, dtypes=("f32", "f32", "f32"), mask_in=None):
        g = Graph("attn_err_" + name)
        ins = [g.input(nm, dt, sh) for nm, dt, sh in zip("qkv", dtypes, shapes)]
        if mask_in is not None:
            ins.append(g.input("mask", mask_in[0], mask_in[1]))
        a = dict(num_heads=4, num_kv_heads=2, head_dim=8, mask="none")
        a.update(attrs)
        g.outputs(g.op("Attention", ins, **a))
        suite.add("attn_err_" + name, g, expect_error=status)

    r3 = ((2, 5, 32), (2, 7, 16), (2, 7, 16))
    err("heads_not_multiple", ((2, 5, 24), (2, 7, 16), (2, 7, 16)),
        dict(num_heads=3, num_kv_heads=2), "RLX_ERR_INVALID")
    err("heads_zero", r3, dict(num_heads=0), "RLX_ERR_INVALID")
    err("q_dim_mismatch", ((2, 5, 40),) + r3[1:], {}, "RLX_ERR_SHAPE")
    err("kv_dim_mismatch", (r3[0], (2, 7, 32), (2, 7, 32)), {}, "RLX_ERR_SHAPE")
    err("kv_len_mismatch", (r3[0], (2, 7, 16), (2, 6, 16)), {}, "RLX_ERR_SHAPE")
    err("batch_mismatch", (r3[0], (3, 7, 16), (3, 7, 16)), {}, "RLX_ERR_SHAPE")
    err("bshd_heads_mismatch", ((2, 5, 4, 8), (2, 7, 4, 8), (2, 7, 4, 8)), {}, "RLX_ERR_SHAPE")
    err("bhsd_as_bshd", ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 8)), dict(layout="bshd"),
        "RLX_ERR_SHAPE")
    err("rank_mix", ((2, 5, 4, 8),) + r3[1:], {}, "RLX_ERR_SHAPE")
    err("rank2", ((5, 32), (7, 16), (7, 16)), {}, "RLX_ERR_SHAPE")
    err("window_0", r3, dict(mask="sliding_window", window=0), "RLX_ERR_INVALID")
    err("custom_no_mask", r3, dict(mask="custom"), "RLX_ERR_INVALID")
    err("mask_not_custom", r3, dict(mask="causal"), "RLX_ERR_INVALID",
        mask_in=("f32", (5, 7)))
    err("mask_bad_shape", r3, dict(mask="custom"), "RLX_ERR_SHAPE", mask_in=("f32", (5, 6)))
    err("mask_rank5", r3, dict(mask="custom"), "RLX_ERR_SHAPE", mask_in=("f32", (1, 2, 4, 5, 7)))
    err("mask_f16", r3, dict(mask="custom"), "RLX_ERR_DTYPE", mask_in=("f16", (5, 7)))
    err("dtype_mix", r3, {}, "RLX_ERR_DTYPE", dtypes=("f32", "f16", "f32"))
    err("int", r3, {}, "RLX_ERR_DTYPE", dtypes=("i32", "i32", "i32"))


# ---------------------------------------------------------------- Rope

def rope_case(suite, rng, name, dt="f32", xshape=(2, 5, 24), head_dim=8, n_rot=8, mode="normal",
              base=10000.0, scale=1.0, pos_shape=None, pos_dtype="i32", tables=None,
              table_dtype=None, attrs_override=None):
    """tables: None (a pos input), or cos/sin inputs: "shared" [S, n_rot/2] (pos_shape
    None) or "batched" [B, S, n_rot/2] (pos_shape (B, S))."""
    B, S = xshape[0], xshape[1]
    g = Graph("rope_" + name)
    x = g.input("x", dt, xshape)
    tx, vx = rand(rng, xshape, dt)
    inputs = {"x": tx}
    pshape = pos_shape or (S,)
    pos = rng.integers(0, 4096, size=pshape)
    cos, sin = rope_tables(pos, n_rot, base, scale)
    if tables is None:
        p = g.input("pos", pos_dtype, pshape)
        inputs["pos"] = pos.astype(np.int32 if pos_dtype == "i32" else np.int64)
        ins = [x, p]
    else:
        tdt = table_dtype or dt
        ins = [x, g.input("cos", tdt, cos.shape), g.input("sin", tdt, sin.shape)]
        inputs["cos"], inputs["sin"] = T(cos, tdt), T(sin, tdt)
        cos, sin = round_to(cos, tdt).astype(np.float64), round_to(sin, tdt).astype(np.float64)
    attrs = dict(head_dim=head_dim, n_rot=n_rot, mode=mode, base=base, scale=scale)
    attrs.update(attrs_override or {})
    g.outputs(g.op("Rope", ins, **attrs))
    ref = ref_rope(vx, cos, sin, head_dim, n_rot, mode)
    suite.add("rope_" + name, g, inputs=inputs, expected=[T(ref, dt)])


def rope_cases(suite, rng):
    for dt in FLOAT_DTYPES:
        for mode in ("normal", "neox"):
            rope_case(suite, rng, "%s_%s" % (mode, dt), dt=dt, mode=mode)
            rope_case(suite, rng, "%s_tables_%s" % (mode, dt), dt=dt, mode=mode, tables="shared")
    for mode in ("normal", "neox"):
        rope_case(suite, rng, "partial_%s" % mode, mode=mode, head_dim=8, n_rot=4)
        rope_case(suite, rng, "partial_odd_dim_%s" % mode, mode=mode, xshape=(1, 3, 2, 7),
                  head_dim=7, n_rot=2)
        rope_case(suite, rng, "rank4_%s" % mode, mode=mode, xshape=(2, 3, 4, 6), head_dim=6,
                  n_rot=6)
        rope_case(suite, rng, "pos_bs_%s" % mode, mode=mode, pos_shape=(2, 5), pos_dtype="i64")
        rope_case(suite, rng, "pos_bs_i32_%s" % mode, mode=mode, xshape=(3, 4, 2, 8),
                  pos_shape=(3, 4))
        rope_case(suite, rng, "tables_batched_%s" % mode, mode=mode, pos_shape=(2, 5),
                  tables="batched")
        rope_case(suite, rng, "tables_f32_for_f16_%s" % mode, dt="f16", mode=mode,
                  tables="batched", pos_shape=(2, 5), table_dtype="f32", n_rot=6)
        rope_case(suite, rng, "tables_f32_for_bf16_%s" % mode, dt="bf16", mode=mode,
                  tables="shared", table_dtype="f32", n_rot=4)
        rope_case(suite, rng, "base_scale_%s" % mode, mode=mode, base=500000.0, scale=8.0)
    rope_case(suite, rng, "i64_pos", pos_dtype="i64", mode="neox")
    rope_case(suite, rng, "ones", xshape=(1, 1, 2), head_dim=2, n_rot=2)
    rope_case(suite, rng, "head_dim_64_f16", dt="f16", xshape=(1, 3, 128), head_dim=64, n_rot=64,
              mode="neox")
    # n_rot 0 means head_dim; head_dim 0 comes from a rank-4 x
    rope_case(suite, rng, "n_rot_0", attrs_override={"n_rot": 0})
    rope_case(suite, rng, "head_dim_0", xshape=(2, 3, 4, 6), head_dim=6, n_rot=4,
              attrs_override={"head_dim": 0})

    def err(name, xshape, attrs, status, second=("pos", "i32", (5,)), tables=None, xdt="f32"):
        g = Graph("rope_err_" + name)
        x = g.input("x", xdt, xshape)
        ins = [x, g.input(second[0], second[1], second[2])]
        if tables is not None:
            ins.append(g.input("sin", tables[0], tables[1]))
        a = dict(head_dim=8, n_rot=8, mode="normal")
        a.update(attrs)
        g.outputs(g.op("Rope", ins, **a))
        suite.add("rope_err_" + name, g, expect_error=status)

    err("n_rot_odd", (2, 5, 16), dict(n_rot=3), "RLX_ERR_INVALID")
    err("n_rot_gt_head_dim", (2, 5, 16), dict(n_rot=10), "RLX_ERR_INVALID")
    err("head_dim_not_dividing", (2, 5, 12), {}, "RLX_ERR_SHAPE")
    err("rank4_head_dim", (2, 5, 2, 6), {}, "RLX_ERR_SHAPE")
    err("rank2", (5, 16), {}, "RLX_ERR_SHAPE")
    err("pos_float", (2, 5, 16), {}, "RLX_ERR_DTYPE", second=("pos", "f32", (5,)))
    err("pos_len", (2, 5, 16), {}, "RLX_ERR_SHAPE", second=("pos", "i32", (4,)))
    err("pos_batch", (2, 5, 16), {}, "RLX_ERR_SHAPE", second=("pos", "i32", (3, 5)))
    err("base_0", (2, 5, 16), dict(base=0.0), "RLX_ERR_INVALID")
    err("int_x", (2, 5, 16), {}, "RLX_ERR_DTYPE", xdt="i32")
    err("cos_shape", (2, 5, 16), {}, "RLX_ERR_SHAPE", second=("cos", "f32", (5, 3)),
        tables=("f32", (5, 3)))
    err("cos_sin_differ", (2, 5, 16), {}, "RLX_ERR_SHAPE", second=("cos", "f32", (5, 4)),
        tables=("f32", (2, 5, 4)))
    err("cos_dtype", (2, 5, 16), {}, "RLX_ERR_DTYPE", second=("cos", "f16", (5, 4)),
        tables=("f16", (5, 4)))


# ---------------------------------------------------------------- losses

def ce_case(suite, rng, name, dt="f32", shape=(6, 5), axis=-1, ignore_index=-100, eps=0.0,
            tdt="i64", ignore_frac=0.0, targets=None):
    g = Graph("ce_" + name)
    lg = g.input("logits", dt, shape)
    ax = axis % len(shape)
    tshape = tuple(d for i, d in enumerate(shape) if i != ax)
    tg = g.input("target", tdt, tshape)
    g.outputs(g.op("CrossEntropy", [lg, tg], axis=axis, ignore_index=ignore_index,
                   label_smoothing=eps))
    tl, vl = rand(rng, shape, dt, scale=2.0)
    t = rng.integers(0, shape[ax], size=tshape) if targets is None else np.asarray(targets)
    t = np.where(rng.random(tshape) < ignore_frac, ignore_index, t)
    tt = t.astype(np.int32 if tdt == "i32" else np.int64)
    ref = ref_cross_entropy(vl, tt, ax, ignore_index, eps)
    suite.add("ce_" + name, g, inputs={"logits": tl, "target": tt}, expected=[T(ref, dt)])


def loss_cases(suite, rng):
    for dt in FLOAT_DTYPES:
        ce_case(suite, rng, "basic_%s" % dt, dt=dt)
        ce_case(suite, rng, "smooth_ignore_%s" % dt, dt=dt, eps=0.1, ignore_frac=0.3)
    ce_case(suite, rng, "i32", tdt="i32", shape=(4, 7), axis=1)
    ce_case(suite, rng, "class_axis1_nd", shape=(2, 5, 3, 4), axis=1, eps=0.2, ignore_frac=0.2)
    ce_case(suite, rng, "class_axis0", shape=(5, 6), axis=0)
    ce_case(suite, rng, "unbatched", shape=(7,), axis=0)
    ce_case(suite, rng, "unbatched_smooth", shape=(7,), axis=-1, eps=0.3, tdt="i32")
    ce_case(suite, rng, "one_class", shape=(3, 1), eps=0.5)
    ce_case(suite, rng, "ignore_in_range", shape=(8, 3), ignore_index=0, eps=0.1,
            targets=[0, 1, 2, 0, 1, 2, 0, 1])
    ce_case(suite, rng, "smooth_full", shape=(4, 6), eps=1.0)
    # every target ignored: 0 (PyTorch would give NaN)
    ce_case(suite, rng, "all_ignored", shape=(3, 4), ignore_frac=1.0, eps=0.1)
    ce_case(suite, rng, "all_ignored_custom", shape=(3, 4), ignore_index=7, ignore_frac=1.0)

    for dt in FLOAT_DTYPES:
        for name, sa, sb in (("same", (4, 5), (4, 5)), ("bcast", (3, 1, 5), (4, 5)),
                             ("scalar", (), ()), ("scalar_b", (2, 3), ())):
            g = Graph("mse_" + name)
            a = g.input("a", dt, sa)
            b = g.input("b", dt, sb)
            g.outputs(g.op("MseLoss", [a, b]))
            (ta, va), (tb, vb) = rand(rng, sa, dt), rand(rng, sb, dt)
            ref = np.float64(np.mean((va - vb) ** 2))
            suite.add("mse_%s_%s" % (name, dt), g, inputs={"a": ta, "b": tb},
                      expected=[T(ref, dt)])

    # run-time errors: a target outside [0, C) that is not ignore_index
    for name, bad in (("target_high", 5), ("target_negative", -1)):
        g = Graph("ce_err_" + name)
        lg = g.input("logits", "f32", (3, 5))
        tg = g.input("target", "i64", (3,))
        g.outputs(g.op("CrossEntropy", [lg, tg], axis=1))
        suite.add("ce_err_" + name, g,
                  inputs={"logits": rng.standard_normal((3, 5)).astype(np.float32),
                          "target": np.array([1, bad, 2], np.int64)},
                  expect_error="RLX_ERR_INVALID")

    def err(op, name, ins, attrs, status):
        g = Graph("%s_err_%s" % (op, name))
        nodes = [g.input(nm, dt, sh) for nm, dt, sh in ins]
        g.outputs(g.op(op, nodes, **attrs))
        suite.add("%s_err_%s" % ("ce" if op == "CrossEntropy" else "mse", name), g,
                  expect_error=status)

    err("CrossEntropy", "target_shape", [("l", "f32", (3, 5)), ("t", "i64", (5,))], dict(axis=1),
        "RLX_ERR_SHAPE")
    err("CrossEntropy", "target_rank", [("l", "f32", (3, 5)), ("t", "i64", (3, 1))], dict(axis=1),
        "RLX_ERR_SHAPE")
    err("CrossEntropy", "target_float", [("l", "f32", (3, 5)), ("t", "f32", (3,))], dict(axis=1),
        "RLX_ERR_DTYPE")
    err("CrossEntropy", "int_logits", [("l", "i32", (3, 5)), ("t", "i64", (3,))], dict(axis=1),
        "RLX_ERR_DTYPE")
    err("CrossEntropy", "axis", [("l", "f32", (3, 5)), ("t", "i64", (3,))], dict(axis=2),
        "RLX_ERR_SHAPE")
    err("CrossEntropy", "rank0", [("l", "f32", ()), ("t", "i64", ())], {}, "RLX_ERR_SHAPE")
    err("CrossEntropy", "smoothing", [("l", "f32", (3, 5)), ("t", "i64", (3,))],
        dict(axis=1, label_smoothing=1.5), "RLX_ERR_INVALID")
    err("MseLoss", "shape", [("a", "f32", (3, 4)), ("b", "f32", (3, 5))], {}, "RLX_ERR_SHAPE")
    err("MseLoss", "dtype", [("a", "f32", (3, 4)), ("b", "f64", (3, 4))], {}, "RLX_ERR_DTYPE")
    err("MseLoss", "int", [("a", "i32", (3, 4)), ("b", "i32", (3, 4))], {}, "RLX_ERR_DTYPE")


def cases(suite, rng):
    matmul_cases(suite, rng)
    attention_cases(suite, rng)
    rope_cases(suite, rng)
    loss_cases(suite, rng)
