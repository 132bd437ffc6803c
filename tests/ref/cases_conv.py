"""Op-parity cases of the conv group: Conv, ConvTranspose, Pool,
ResizeNearest2x, Resize, Fft, LogMel. References are written here in NumPy
(float64, from the values as rounded to the input dtype); Fft uses numpy.fft,
LogMel writes out the STFT and librosa's Slaney mel filterbank."""
import numpy as np

from rlxcase import FLOAT_DTYPES, RLX_TO_NP, Graph, T, round_to

PLAIN_DTYPES = ["f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool"]


def rand(rng, shape, dtype, scale=1.0):
    """(T for the case input, float64 values as stored in dtype)."""
    x = rng.standard_normal(shape) * scale
    return T(x, dtype), round_to(x, dtype).astype(np.float64)


# ---------------------------------------------------------------- references

def as_2d(x, stride, pad, dil):
    """A 1-D problem as 2-D: a leading spatial dim of 1 (kernel 1, stride 1, no pad)."""
    return x[:, :, None], [1] + list(stride), [0, pad[0], 0, pad[1]], [1] + list(dil)


def ref_conv(x, w, b, stride, pad, dil, groups):
    """torch conv1d/conv2d with pad = [begins..., ends...]."""
    if x.ndim == 3:
        x2, s, p, d = as_2d(x, stride, pad, dil)
        return ref_conv(x2, w[:, :, None], b, s, p, d, groups)[:, :, 0]
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    G, Og = groups, O // groups
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    OH = (H + pad[0] + pad[2] - dil[0] * (KH - 1) - 1) // stride[0] + 1
    OW = (W + pad[1] + pad[3] - dil[1] * (KW - 1) - 1) // stride[1] + 1
    y = np.zeros((N, G, Og, OH, OW))
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dil[0], kw * dil[1]
            patch = xp[:, :, h0:h0 + stride[0] * (OH - 1) + 1:stride[0],
                       w0:w0 + stride[1] * (OW - 1) + 1:stride[1]]
            y += np.einsum("ngchw,goc->ngohw", patch.reshape(N, G, Cg, OH, OW),
                           w[:, :, kh, kw].reshape(G, Og, Cg))
    y = y.reshape(N, O, OH, OW)
    return y if b is None else y + b[None, :, None, None]


def ref_conv_transpose(x, w, b, stride, pad, output_pad, dil, groups):
    """torch conv_transpose1d/2d: scatter into the full output, crop pad [begins..., ends...]."""
    if x.ndim == 3:
        x2, s, p, d = as_2d(x, stride, pad, dil)
        return ref_conv_transpose(x2, w[:, :, None], b, s, p, [0] + list(output_pad), d,
                                  groups)[:, :, 0]
    N, C, H, W = x.shape
    _, Og, KH, KW = w.shape
    G, Cg = groups, C // groups
    O = Og * G
    OH = (H - 1) * stride[0] - pad[0] - pad[2] + dil[0] * (KH - 1) + output_pad[0] + 1
    OW = (W - 1) * stride[1] - pad[1] - pad[3] + dil[1] * (KW - 1) + output_pad[1] + 1
    full = np.zeros((N, G, Og, max((H - 1) * stride[0] + dil[0] * (KH - 1) + 1, pad[0] + OH),
                     max((W - 1) * stride[1] + dil[1] * (KW - 1) + 1, pad[1] + OW)))
    xg = x.reshape(N, G, Cg, H, W)
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dil[0], kw * dil[1]
            full[:, :, :, h0:h0 + stride[0] * (H - 1) + 1:stride[0],
                 w0:w0 + stride[1] * (W - 1) + 1:stride[1]] += np.einsum(
                     "ngchw,gco->ngohw", xg, w[:, :, kh, kw].reshape(G, Cg, Og))
    y = full[:, :, :, pad[0]:pad[0] + OH, pad[1]:pad[1] + OW].reshape(N, O, OH, OW)
    return y if b is None else y + b[None, :, None, None]


def ref_pool(x, kind, kernel, stride, pad, count_include_pad):
    if x.ndim == 3:
        x2, s, p, _ = as_2d(x, stride, pad, [1])
        return ref_pool(x2, kind, [1] + list(kernel), s, p, count_include_pad)[:, :, 0]
    N, C, H, W = x.shape
    KH, KW = kernel
    widths = ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3]))
    xp = np.pad(x, widths, constant_values=-np.inf if kind == "max" else 0.0)
    real = np.pad(np.ones_like(x), widths)
    OH = (H + pad[0] + pad[2] - KH) // stride[0] + 1
    OW = (W + pad[1] + pad[3] - KW) // stride[1] + 1
    acc = np.full((N, C, OH, OW), -np.inf if kind == "max" else 0.0)
    count = np.zeros_like(acc)
    for kh in range(KH):
        for kw in range(KW):
            win = (slice(None), slice(None), slice(kh, kh + stride[0] * (OH - 1) + 1, stride[0]),
                   slice(kw, kw + stride[1] * (OW - 1) + 1, stride[1]))
            acc = np.maximum(acc, xp[win]) if kind == "max" else acc + xp[win]
            count += real[win]
    if kind == "max":
        return acc
    return acc / (KH * KW) if count_include_pad else acc / count


def ref_resize(x, mode, oh, ow, align_corners):
    """torch.nn.functional.interpolate (nearest: floor(dst * in / out), exact)."""
    H, W = x.shape[2:]
    if mode == "nearest":
        return x[:, :, (np.arange(oh) * H) // oh][:, :, :, (np.arange(ow) * W) // ow]

    def coords(out, size):
        dst = np.arange(out, dtype=np.float64)
        if align_corners:
            src = dst * (size - 1) / (out - 1) if out > 1 else np.zeros(out)
        else:
            src = np.maximum((dst + 0.5) * size / out - 0.5, 0.0)
        i0 = np.floor(src).astype(np.int64)
        return i0, np.minimum(i0 + 1, size - 1), src - i0

    h0, h1, lh = coords(oh, H)
    w0, w1, lw = coords(ow, W)
    lh, lw = lh[:, None], lw[None, :]
    top = (1 - lw) * x[:, :, h0][:, :, :, w0] + lw * x[:, :, h0][:, :, :, w1]
    bottom = (1 - lw) * x[:, :, h1][:, :, :, w0] + lw * x[:, :, h1][:, :, :, w1]
    return (1 - lh) * top + lh * bottom


def ref_fft(x, inverse, real, n, axis):
    """numpy.fft on rlx's layout: complex tensors end in a dim of 2 (re, im),
    and the axis is an axis of the complex shape."""
    n = n or None
    if real and not inverse:
        y = np.fft.rfft(x, n=n, axis=axis)
    else:
        xc = x[..., 0] + 1j * x[..., 1]
        if real:
            return np.fft.irfft(xc, n=n, axis=axis)
        y = (np.fft.ifft if inverse else np.fft.fft)(xc, n=n, axis=axis)
    return np.stack([y.real, y.imag], axis=-1)


def hz_to_mel(f):
    """Slaney's mel scale (librosa, htk=False): linear below 1 kHz, log above."""
    f = np.asarray(f, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_hz / f_sp + np.log(np.maximum(f, 1e-300) / min_log_hz)
                    / logstep, f / f_sp)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filterbank(sr, n_fft, n_mels, f_min, f_max):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax, htk=False, norm="slaney")."""
    freqs = np.arange(n_fft // 2 + 1) * sr / n_fft
    hz = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    fdiff = np.diff(hz)
    ramps = hz[:, None] - freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    return weights * (2.0 / (hz[2:] - hz[:-2]))[:, None]


def ref_log_mel(audio, n_fft, hop, n_mels, sr, f_min, f_max):
    """torch.stft(center=True, reflect, periodic Hann) power -> mel -> log10."""
    half = n_fft // 2
    padded = np.pad(audio, ((0, 0), (half, half)), mode="reflect")
    frames = 1 + audio.shape[1] // hop
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    spec = np.fft.rfft(padded[:, idx] * window, axis=-1)           # [B, frames, bins]
    power = spec.real ** 2 + spec.imag ** 2
    mel = np.einsum("mk,bfk->bmf", mel_filterbank(sr, n_fft, n_mels, f_min, f_max), power)
    return np.log10(np.maximum(mel, 1e-10))


# ---------------------------------------------------------------- case builders

def conv_case(suite, rng, name, dt, xs, ws, bias, stride, pad, dil, groups, transposed=False,
              output_pad=None, w_param=False):
    nd = len(xs) - 2
    g = Graph(name)
    x = g.input("x", dt, xs)
    w = (g.param if w_param else g.input)("w", dt, ws)
    o_ch = ws[1] * groups if transposed else ws[0]
    ins = [x, w] + ([g.input("b", dt, [o_ch])] if bias else [])
    attrs = dict(ndim=nd, stride=stride, pad=pad, dilation=dil, groups=groups)
    if transposed:
        attrs["output_pad"] = output_pad
    g.outputs(g.op("ConvTranspose" if transposed else "Conv", ins, **attrs))
    xt, xv = rand(rng, xs, dt)
    wt, wv = rand(rng, ws, dt, 0.5)
    inputs, params = {"x": xt}, {}
    (params if w_param else inputs)["w"] = wt
    bv = None
    if bias:
        bt, bv = rand(rng, [o_ch], dt)
        inputs["b"] = bt
    if transposed:
        ref = ref_conv_transpose(xv, wv, bv, stride, pad, output_pad, dil, groups)
    else:
        ref = ref_conv(xv, wv, bv, stride, pad, dil, groups)
    suite.add(name, g, inputs=inputs, params=params, expected=[T(ref, dt)])


def pool_case(suite, rng, name, dt, xs, kind, kernel, stride, pad, cip=False, nan=False, nan_at=3):
    g = Graph(name)
    x = g.input("x", dt, xs)
    g.outputs(g.op("Pool", [x], kind=kind, ndim=len(xs) - 2, kernel=kernel, stride=stride,
                   pad=pad, count_include_pad=cip))
    xt, xv = rand(rng, xs, dt)
    if nan:
        xv.flat[nan_at] = np.nan
        xt = T(xv, dt)
    suite.add(name, g, inputs={"x": xt},
              expected=[T(ref_pool(xv, kind, kernel, stride, pad, cip), dt)])


def error_case(suite, name, status, inputs, op, **attrs):
    """inputs: (dtype, shape) per input; the graph must fail with status."""
    g = Graph(name)
    ins = [g.input("x%d" % i, dt, shape) for i, (dt, shape) in enumerate(inputs)]
    g.outputs(g.op(op, ins, **attrs))
    suite.add(name, g, expect_error=status)


# ---------------------------------------------------------------- cases

def conv_cases(suite, rng):
    # name, x shape, w shape, bias, stride, pad, dilation, groups
    configs = [
        ("c2d_3x3_pad1", [2, 3, 7, 7], [4, 3, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ("c2d_stride2_asym_dil", [1, 3, 9, 8], [5, 3, 3, 2], False, [2, 3], [0, 1, 2, 1],
         [2, 1], 1),
        ("c2d_groups2", [2, 4, 6, 5], [6, 2, 3, 3], True, [1, 2], [1, 0, 1, 2], [1, 1], 2),
        ("c2d_depthwise", [1, 5, 6, 7], [10, 1, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 5),
        ("c2d_1x1", [3, 4, 2, 3], [2, 4, 1, 1], True, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("c2d_size1_dims", [1, 1, 1, 5], [1, 1, 1, 3], False, [1, 1], [0, 1, 0, 1], [1, 1], 1),
        ("c2d_pad_only_window", [1, 2, 2, 2], [3, 2, 4, 4], True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ("c2d_stride_gt_kernel", [1, 2, 11, 10], [2, 1, 2, 2], False, [4, 3], [1, 0, 0, 2],
         [1, 3], 2),
        ("c1d_basic", [2, 3, 11], [4, 3, 3], True, [1], [1, 1], [1], 1),
        ("c1d_stride2_asym_dil2", [1, 2, 13], [3, 2, 3], True, [2], [2, 1], [2], 1),
        ("c1d_groups3", [2, 6, 9], [9, 2, 4], False, [3], [0, 3], [1], 3),
        ("c1d_depthwise", [1, 4, 10], [4, 1, 5], True, [1], [2, 2], [1], 4),
        ("c1d_whisper_stem", [1, 8, 20], [6, 8, 3], True, [2], [1, 1], [1], 1),
        # one channel per group (MobileNet's depthwise layers): strides,
        # dilation, uneven pads, kernels of 3 taps a row and of others
        ("c2d_dw_stride2", [2, 6, 9, 8], [6, 1, 3, 3], True, [2, 2], [1, 1, 1, 1], [1, 1], 6),
        ("c2d_dw_asym_dil", [1, 3, 10, 11], [3, 1, 3, 5], False, [2, 3], [0, 2, 1, 0], [2, 1], 3),
        ("c2d_dw_5x5_s1", [1, 4, 7, 12], [4, 1, 5, 5], True, [1, 1], [2, 2, 2, 2], [1, 1], 4),
        # weights larger than a GEMM block (K over 1024, rows over a panel run)
        ("c2d_wide", [1, 116, 4, 5], [300, 116, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ("c2d_1x1_many_rows", [1, 96, 7, 9], [700, 96, 1, 1], True, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        # products of a packed weight worth two threads over a plane of
        # 195-196 positions: tiles of columns cut at whole panels, the
        # last one short
        ("c2d_1x1_even_cols", [1, 288, 14, 14], [40, 288, 1, 1], True, [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ("c2d_even_cols_im2col", [1, 37, 13, 15], [48, 37, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        # columns over the im2col scratch (K x P > 2^22): blocks of positions
        ("c2d_col_blocks", [1, 32, 128, 130], [4, 32, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 1),
        # the AVX-512 3 x 3 kernels: a plane as one run (stride 1, rows as
        # wide as the input's; uneven pads), rows of several vectors with
        # and without the padding in them (stride 1 without pads, stride 2)
        ("c2d_dw_flat_uneven", [2, 3, 9, 37], [3, 1, 3, 3], True, [1, 1], [2, 0, 0, 2], [1, 1], 3),
        ("c2d_dw_flat_wide", [1, 2, 5, 70], [2, 1, 3, 3], True, [1, 1], [1, 1, 1, 1], [1, 1], 2),
        ("c2d_dw_rows_nopad", [1, 3, 6, 41], [3, 1, 3, 3], False, [1, 1], [0, 0, 0, 0], [1, 1], 3),
        ("c2d_dw_rows_s2_wide", [1, 2, 7, 75], [2, 1, 3, 3], True, [2, 2], [1, 0, 0, 1], [1, 1], 2),
    ]
    for name, xs, ws, bias, stride, pad, dil, groups in configs:
        conv_case(suite, rng, name + "_f32", "f32", xs, ws, bias, stride, pad, dil, groups,
                  w_param=name.endswith("pad1"))
        # the weight a param: the CPU packs it once (conv_weights.c)
        if groups == 1 and not name.endswith("pad1"):
            conv_case(suite, rng, name + "_wparam_f32", "f32", xs, ws, bias, stride, pad, dil, groups,
                      w_param=True)
    for dt in FLOAT_DTYPES:
        for name, xs, ws, bias, stride, pad, dil, groups in (configs[1], configs[3], configs[9]):
            if dt != "f32":
                conv_case(suite, rng, name + "_" + dt, dt, xs, ws, bias, stride, pad, dil, groups)

    # Omitted attrs: stride / dilation 1, no pad, groups 1 (filled by inference).
    g = Graph("c2d_defaults")
    x, w = g.input("x", "f64", [1, 2, 4, 5]), g.input("w", "f64", [3, 2, 2, 3])
    g.outputs(g.op("Conv", [x, w], ndim=2))
    xt, xv = rand(rng, [1, 2, 4, 5], "f64")
    wt, wv = rand(rng, [3, 2, 2, 3], "f64")
    suite.add("c2d_defaults", g, inputs={"x": xt, "w": wt},
              expected=[ref_conv(xv, wv, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)])

    # Symbolic batch, and a symbolic length (stride 1: same symbol; stride 2: derived).
    for name, xs, real, ws, stride, pad in (
            ("c2d_sym_batch", ["B", 3, 6, 6], [2, 3, 6, 6], [2, 3, 3, 3], [1, 1], [1, 1, 1, 1]),
            ("c1d_sym_len_same", [1, 2, "L"], [1, 2, 9], [4, 2, 3], [1], [1, 1]),
            ("c1d_sym_len_stride2", [1, 2, "L"], [1, 2, 12], [4, 2, 3], [2], [1, 1])):
        g = Graph(name)
        x, w = g.input("x", "f32", xs), g.input("w", "f32", ws)
        nd = len(ws) - 2
        g.outputs(g.op("Conv", [x, w], ndim=nd, stride=stride, pad=pad, dilation=[1] * nd,
                       groups=1))
        xt, xv = rand(rng, real, "f32")
        wt, wv = rand(rng, ws, "f32")
        suite.add(name, g, inputs={"x": xt, "w": wt},
                  expected=[T(ref_conv(xv, wv, None, stride, pad, [1] * nd, 1), "f32")])

    f32 = "f32"
    error_case(suite, "c_err_channel_mismatch", "RLX_ERR_SHAPE",
               [(f32, [1, 3, 5, 5]), (f32, [4, 2, 3, 3])], "Conv", ndim=2, groups=1)
    error_case(suite, "c_err_groups_not_dividing_c", "RLX_ERR_INVALID",
               [(f32, [1, 3, 5, 5]), (f32, [4, 1, 3, 3])], "Conv", ndim=2, groups=2)
    error_case(suite, "c_err_groups_not_dividing_o", "RLX_ERR_INVALID",
               [(f32, [1, 4, 5, 5]), (f32, [3, 2, 3, 3])], "Conv", ndim=2, groups=2)
    error_case(suite, "c_err_groups_zero", "RLX_ERR_INVALID",
               [(f32, [1, 4, 5, 5]), (f32, [4, 4, 3, 3])], "Conv", ndim=2, groups=0)
    error_case(suite, "c_err_kernel_larger", "RLX_ERR_SHAPE",
               [(f32, [1, 1, 3, 3]), (f32, [1, 1, 5, 5])], "Conv", ndim=2, pad=[0, 1, 0, 1])
    error_case(suite, "c_err_kernel_larger_dilated", "RLX_ERR_SHAPE",
               [(f32, [1, 1, 6]), (f32, [1, 1, 3])], "Conv", ndim=1, dilation=[3])
    error_case(suite, "c_err_stride_zero", "RLX_ERR_INVALID",
               [(f32, [1, 1, 5, 5]), (f32, [1, 1, 3, 3])], "Conv", ndim=2, stride=[0, 1])
    error_case(suite, "c_err_stride_len", "RLX_ERR_INVALID",
               [(f32, [1, 1, 5, 5]), (f32, [1, 1, 3, 3])], "Conv", ndim=2, stride=[1])
    error_case(suite, "c_err_pad_negative", "RLX_ERR_INVALID",
               [(f32, [1, 1, 5]), (f32, [1, 1, 3])], "Conv", ndim=1, pad=[-1, 0])
    error_case(suite, "c_err_dilation_zero", "RLX_ERR_INVALID",
               [(f32, [1, 1, 5]), (f32, [1, 1, 3])], "Conv", ndim=1, dilation=[0])
    error_case(suite, "c_err_ndim3", "RLX_ERR_INVALID",
               [(f32, [1, 1, 5, 5, 5]), (f32, [1, 1, 3, 3, 3])], "Conv", ndim=3)
    error_case(suite, "c_err_rank", "RLX_ERR_SHAPE",
               [(f32, [1, 1, 5]), (f32, [1, 1, 3])], "Conv", ndim=2)
    error_case(suite, "c_err_dtype_mix", "RLX_ERR_DTYPE",
               [(f32, [1, 1, 5]), ("f16", [1, 1, 3])], "Conv", ndim=1)
    error_case(suite, "c_err_int", "RLX_ERR_DTYPE",
               [("i32", [1, 1, 5]), ("i32", [1, 1, 3])], "Conv", ndim=1)
    error_case(suite, "c_err_bias_len", "RLX_ERR_SHAPE",
               [(f32, [1, 2, 5]), (f32, [3, 2, 3]), (f32, [2])], "Conv", ndim=1)


def conv_transpose_cases(suite, rng):
    # name, x shape, w shape [C, O/groups, k...], bias, stride, pad, output_pad, dilation, groups
    configs = [
        ("ct2d_up2", [2, 3, 4, 5], [3, 4, 3, 3], True, [2, 2], [1, 1, 1, 1], [1, 1], [1, 1], 1),
        ("ct2d_asym_groups", [1, 4, 3, 4], [4, 2, 3, 2], False, [2, 3], [0, 1, 2, 0], [1, 0],
         [1, 2], 2),
        ("ct2d_no_pad", [1, 2, 3, 3], [2, 3, 2, 2], True, [1, 1], [0, 0, 0, 0], [0, 0], [1, 1], 1),
        ("ct2d_outpad_lt_dilation", [1, 2, 4, 3], [2, 2, 3, 3], True, [1, 1], [0, 1, 1, 0],
         [1, 0], [2, 1], 1),
        ("ct1d_stride3", [2, 3, 5], [3, 2, 4], True, [3], [1, 2], [2], [1], 1),
        ("ct1d_depthwise", [1, 4, 7], [4, 1, 3], False, [2], [1, 1], [1], [1], 4),
        ("ct1d_dil2", [1, 2, 6], [2, 3, 3], True, [2], [0, 3], [0], [2], 1),
    ]
    for name, xs, ws, bias, stride, pad, op, dil, groups in configs:
        conv_case(suite, rng, name + "_f32", "f32", xs, ws, bias, stride, pad, dil, groups,
                  transposed=True, output_pad=op)
    for dt in FLOAT_DTYPES:
        if dt == "f32":
            continue
        for name, xs, ws, bias, stride, pad, op, dil, groups in (configs[0], configs[4]):
            conv_case(suite, rng, name + "_" + dt, dt, xs, ws, bias, stride, pad, dil, groups,
                      transposed=True, output_pad=op)

    f32 = "f32"
    error_case(suite, "ct_err_output_pad", "RLX_ERR_INVALID",
               [(f32, [1, 2, 4]), (f32, [2, 3, 3])], "ConvTranspose", ndim=1, stride=[2],
               output_pad=[2])
    error_case(suite, "ct_err_channel_mismatch", "RLX_ERR_SHAPE",
               [(f32, [1, 2, 4]), (f32, [3, 3, 3])], "ConvTranspose", ndim=1)
    error_case(suite, "ct_err_groups", "RLX_ERR_INVALID",
               [(f32, [1, 3, 4]), (f32, [3, 3, 3])], "ConvTranspose", ndim=1, groups=2)
    error_case(suite, "ct_err_cropped_away", "RLX_ERR_SHAPE",
               [(f32, [1, 1, 2]), (f32, [1, 1, 2])], "ConvTranspose", ndim=1, pad=[2, 1])


def pool_cases(suite, rng):
    pool_case(suite, rng, "p2d_max_k3s2p1", "f32", [2, 3, 7, 8], "max", [3, 3], [2, 2],
              [1, 1, 1, 1])
    pool_case(suite, rng, "p2d_avg_k3s2p1_incl", "f32", [2, 3, 7, 8], "avg", [3, 3], [2, 2],
              [1, 1, 1, 1], cip=True)
    pool_case(suite, rng, "p2d_avg_k3s2p1_excl", "f32", [2, 3, 7, 8], "avg", [3, 3], [2, 2],
              [1, 1, 1, 1], cip=False)
    pool_case(suite, rng, "p2d_max_asym", "f32", [1, 2, 5, 6], "max", [2, 3], [1, 2], [0, 1, 1, 0])
    pool_case(suite, rng, "p2d_avg_asym_excl", "f32", [1, 2, 5, 6], "avg", [2, 3], [1, 2],
              [1, 2, 1, 0])
    pool_case(suite, rng, "p2d_avg_asym_incl", "f32", [1, 2, 5, 6], "avg", [2, 3], [1, 2],
              [1, 2, 1, 0], cip=True)
    pool_case(suite, rng, "p2d_max_global", "f32", [3, 1, 4, 5], "max", [4, 5], [1, 1],
              [0, 0, 0, 0])
    pool_case(suite, rng, "p2d_max_nan", "f32", [1, 1, 4, 4], "max", [2, 2], [2, 2], [0, 0, 0, 0],
              nan=True)
    pool_case(suite, rng, "p1d_max", "f32", [2, 3, 11], "max", [3], [2], [1, 0])
    # planes wide enough for whole 16-column vectors inside the row, odd
    # widths, stride 1 and 2, pads 0 to 2, a NaN among them
    pool_case(suite, rng, "p2d_max_k3s2p1_wide", "f32", [2, 3, 9, 75], "max", [3, 3], [2, 2],
              [1, 1, 1, 1])
    pool_case(suite, rng, "p2d_max_k3s2_asym_wide", "f32", [1, 2, 6, 70], "max", [2, 3], [3, 2],
              [0, 2, 1, 0])
    pool_case(suite, rng, "p2d_max_k3s1_wide", "f32", [1, 2, 5, 41], "max", [4, 3], [1, 1],
              [2, 1, 1, 1])
    pool_case(suite, rng, "p2d_max_k3s2_nan", "f32", [1, 2, 5, 40], "max", [3, 3], [2, 2],
              [1, 1, 1, 1], nan=True)
    # a NaN in the second plane's last row (the AVX-512 kernel checks each
    # input row before its first window) and one in its last vector's lanes
    pool_case(suite, rng, "p2d_max_k3s2_nan_late", "f32", [1, 2, 9, 40], "max", [3, 3], [2, 2],
              [1, 1, 1, 1], nan=True, nan_at=9 * 40 + 8 * 40 + 37)
    pool_case(suite, rng, "p2d_max_k3s1_nan_late", "f32", [1, 2, 6, 21], "max", [3, 3], [1, 1],
              [1, 1, 1, 1], nan=True, nan_at=6 * 21 + 4 * 21 + 19)
    pool_case(suite, rng, "p1d_max_k3s1", "f32", [1, 2, 37], "max", [3], [1], [1, 1])
    pool_case(suite, rng, "p1d_avg_excl", "f32", [2, 3, 11], "avg", [4], [3], [2, 3])
    pool_case(suite, rng, "p1d_avg_incl", "f32", [1, 1, 1], "avg", [2], [1], [1, 0], cip=True)
    for dt in FLOAT_DTYPES:
        if dt == "f32":
            continue
        pool_case(suite, rng, "p2d_max_" + dt, dt, [1, 3, 6, 5], "max", [3, 2], [2, 1],
                  [1, 0, 1, 1])
        pool_case(suite, rng, "p2d_avg_excl_" + dt, dt, [1, 3, 6, 5], "avg", [3, 2], [2, 1],
                  [1, 0, 1, 1])
        pool_case(suite, rng, "p1d_avg_incl_" + dt, dt, [2, 2, 9], "avg", [3], [2], [1, 1],
                  cip=True)

    # Omitted stride: 1.
    g = Graph("p2d_default_stride")
    x = g.input("x", "f64", [1, 2, 4, 4])
    g.outputs(g.op("Pool", [x], kind="avg", ndim=2, kernel=[2, 2]))
    xt, xv = rand(rng, [1, 2, 4, 4], "f64")
    suite.add("p2d_default_stride", g, inputs={"x": xt},
              expected=[ref_pool(xv, "avg", [2, 2], [1, 1], [0, 0, 0, 0], False)])

    f32 = "f32"
    error_case(suite, "p_err_pad_ge_kernel", "RLX_ERR_INVALID", [(f32, [1, 1, 5, 5])], "Pool",
               kind="max", ndim=2, kernel=[2, 2], stride=[1, 1], pad=[2, 0, 0, 0])
    error_case(suite, "p_err_no_kernel", "RLX_ERR_INVALID", [(f32, [1, 1, 5])], "Pool",
               kind="max", ndim=1)
    error_case(suite, "p_err_kernel_larger", "RLX_ERR_SHAPE", [(f32, [1, 1, 3])], "Pool",
               kind="avg", ndim=1, kernel=[5], pad=[1, 0])
    error_case(suite, "p_err_stride_zero", "RLX_ERR_INVALID", [(f32, [1, 1, 5])], "Pool",
               kind="avg", ndim=1, kernel=[2], stride=[0])
    error_case(suite, "p_err_int", "RLX_ERR_DTYPE", [("i64", [1, 1, 5])], "Pool",
               kind="max", ndim=1, kernel=[2])


def resize_cases(suite, rng):
    for dt in PLAIN_DTYPES:
        for shape in ([2, 3, 4, 5], [1, 1, 1, 1]):
            name = "rn2x_%s_%s" % (dt, "x".join(map(str, shape)))
            g = Graph(name)
            g.outputs(g.op("ResizeNearest2x", [g.input("x", dt, shape)]))
            if dt == "bool":
                xv = rng.random(shape) < 0.5
            elif dt in ("i8", "u8", "i32", "i64"):
                info = np.iinfo(RLX_TO_NP[dt])
                xv = rng.integers(info.min, info.max, size=shape, endpoint=True,
                                  dtype=RLX_TO_NP[dt])
            else:
                xv = round_to(rng.standard_normal(shape), dt).astype(np.float64)
            xt = T(xv, dt)
            suite.add(name, g, inputs={"x": xt},
                      expected=[T(xv.repeat(2, axis=2).repeat(2, axis=3), dt)])
    g = Graph("rn2x_sym")
    g.outputs(g.op("ResizeNearest2x", [g.input("x", "f32", [1, 2, "H", "W"])]))
    xt, xv = rand(rng, [1, 2, 3, 5], "f32")
    suite.add("rn2x_sym", g, inputs={"x": xt},
              expected=[T(xv.repeat(2, axis=2).repeat(2, axis=3), "f32")])

    # name, x shape, mode, out_h, out_w, align_corners
    configs = [
        ("rs_nearest_up", [2, 3, 3, 5], "nearest", 7, 8, False),
        ("rs_nearest_down", [1, 2, 9, 7], "nearest", 4, 3, False),
        ("rs_nearest_same", [1, 1, 3, 4], "nearest", 3, 4, False),
        ("rs_bilinear_up", [2, 2, 3, 4], "bilinear", 7, 9, False),
        ("rs_bilinear_down", [1, 3, 9, 8], "bilinear", 4, 3, False),
        ("rs_bilinear_up_ac", [2, 2, 3, 4], "bilinear", 7, 9, True),
        ("rs_bilinear_down_ac", [1, 3, 9, 8], "bilinear", 4, 3, True),
        ("rs_bilinear_to1_ac", [1, 2, 5, 4], "bilinear", 1, 1, True),
        ("rs_bilinear_from1", [1, 2, 1, 1], "bilinear", 3, 2, False),
        ("rs_bilinear_2x", [1, 1, 4, 4], "bilinear", 8, 8, False),
    ]
    for name, xs, mode, oh, ow, ac in configs:
        dts = FLOAT_DTYPES if name in ("rs_nearest_up", "rs_bilinear_up", "rs_bilinear_down_ac") \
            else ["f32"]
        for dt in dts:
            g = Graph(name)
            g.outputs(g.op("Resize", [g.input("x", dt, xs)], mode=mode, out_h=oh, out_w=ow,
                           align_corners=ac))
            xt, xv = rand(rng, xs, dt)
            suite.add(name + "_" + dt, g, inputs={"x": xt},
                      expected=[T(ref_resize(xv, mode, oh, ow, ac), dt)])

    error_case(suite, "rn2x_err_rank", "RLX_ERR_SHAPE", [("f32", [2, 3, 4])], "ResizeNearest2x")
    error_case(suite, "rs_err_out_zero", "RLX_ERR_INVALID", [("f32", [1, 1, 2, 2])], "Resize",
               mode="bilinear", out_h=0, out_w=2)
    error_case(suite, "rs_err_rank", "RLX_ERR_SHAPE", [("f32", [1, 2, 2])], "Resize",
               mode="nearest", out_h=2, out_w=2)
    error_case(suite, "rs_err_int", "RLX_ERR_DTYPE", [("i32", [1, 1, 2, 2])], "Resize",
               mode="nearest", out_h=2, out_w=2)


def fft_cases(suite, rng):
    # name, x shape (complex shapes end in 2), inverse, real, n, axis
    configs = [
        ("fft_pow2", [3, 8, 2], False, False, 0, -1),
        ("ifft_pow2", [3, 8, 2], True, False, 0, -1),
        ("fft_odd", [2, 7, 2], False, False, 0, 1),
        ("ifft_odd", [2, 7, 2], True, False, 0, -1),
        ("fft_even_bluestein", [12, 2], False, False, 0, 0),
        ("fft_len1", [4, 1, 2], False, False, 0, -1),
        ("fft_crop", [2, 8, 2], False, False, 5, -1),
        ("fft_zero_pad", [2, 6, 2], False, False, 16, -1),
        ("ifft_zero_pad_odd", [6, 2], True, False, 9, 0),
        ("fft_axis0", [5, 3, 2], False, False, 0, 0),
        ("ifft_axis_mid", [2, 6, 3, 2], True, False, 0, -2),
        ("fft_1024", [1024, 2], False, False, 0, 0),
        ("fft_1000", [1000, 2], False, False, 0, 0),
        ("rfft_pow2", [3, 8], False, True, 0, -1),
        ("rfft_odd", [2, 9], False, True, 0, -1),
        ("rfft_crop", [2, 10], False, True, 7, 1),
        ("rfft_pad", [5], False, True, 12, 0),
        ("rfft_axis0", [6, 4], False, True, 0, 0),
        ("irfft_default_n", [3, 5, 2], True, True, 0, -1),
        ("irfft_odd_n", [2, 5, 2], True, True, 9, -1),
        ("irfft_crop", [2, 6, 2], True, True, 3, -1),
        ("irfft_pad", [4, 2], True, True, 14, 0),
        ("irfft_axis0", [4, 3, 2], True, True, 0, 0),
        ("irfft_n1", [3, 2], True, True, 1, 0),
    ]
    for name, xs, inverse, real, n, axis in configs:
        dts = FLOAT_DTYPES if name in ("fft_pow2", "ifft_odd", "rfft_odd", "irfft_default_n") \
            else ["f64"] if name in ("fft_1024", "fft_1000") else ["f32"]
        for dt in dts:
            g = Graph(name)
            g.outputs(g.op("Fft", [g.input("x", dt, xs)], inverse=inverse, real=real, n=n,
                           axis=axis))
            xt, xv = rand(rng, xs, dt)
            suite.add(name + "_" + dt, g, inputs={"x": xt},
                      expected=[T(ref_fft(xv, inverse, real, n, axis), dt)])

    error_case(suite, "fft_err_not_complex", "RLX_ERR_SHAPE", [("f32", [4, 3])], "Fft")
    error_case(suite, "fft_err_axis", "RLX_ERR_SHAPE", [("f32", [4, 2])], "Fft", axis=1)
    error_case(suite, "fft_err_n_negative", "RLX_ERR_INVALID", [("f32", [4, 2])], "Fft", n=-1)
    error_case(suite, "fft_err_irfft_m1", "RLX_ERR_SHAPE", [("f32", [1, 2])], "Fft",
               inverse=True, real=True)
    error_case(suite, "fft_err_int", "RLX_ERR_DTYPE", [("i32", [4, 2])], "Fft")


def log_mel_cases(suite, rng):
    # name, dtype, [B, T], n_fft, hop, n_mels, sample_rate, f_min, f_max, silent
    configs = [
        ("lm_small", "f32", [2, 300], 64, 16, 10, 8000, 0.0, 4000.0, False),
        ("lm_small_band", "f64", [1, 301], 64, 16, 10, 8000, 100.0, 3000.0, False),
        ("lm_small_hop_odd", "f32", [1, 97], 32, 7, 6, 8000, 0.0, 4000.0, False),
        ("lm_short", "f64", [1, 33], 64, 16, 10, 8000, 0.0, 4000.0, False),
        ("lm_silence", "f32", [1, 100], 64, 16, 10, 8000, 0.0, 4000.0, True),
        ("lm_whisper", "f32", [1, 3200], 400, 160, 80, 16000, 0.0, 8000.0, False),
    ]
    for dt in ("f16", "bf16", "f64"):
        configs.append(("lm_small", dt, [1, 300], 64, 16, 10, 8000, 0.0, 4000.0, False))
    for name, dt, shape, n_fft, hop, n_mels, sr, f_min, f_max, silent in configs:
        g = Graph(name)
        g.outputs(g.op("LogMel", [g.input("audio", dt, shape)], n_fft=n_fft, hop=hop,
                       n_mels=n_mels, sample_rate=sr, f_min=f_min, f_max=f_max))
        xt, xv = rand(rng, shape, dt, 0.1)
        if silent:
            xv = np.zeros(shape)
            xt = T(xv, dt)
        ref = ref_log_mel(xv, n_fft, hop, n_mels, sr, f_min, f_max)
        suite.add(name + "_" + dt, g, inputs={"audio": xt}, expected=[T(ref, dt)])

    # The defaults are Whisper's front end.
    g = Graph("lm_defaults")
    g.outputs(g.op("LogMel", [g.input("audio", "f64", [2, 3200])]))
    xt, xv = rand(rng, [2, 3200], "f64", 0.1)
    suite.add("lm_defaults", g, inputs={"audio": xt},
              expected=[ref_log_mel(xv, 400, 160, 80, 16000, 0.0, 8000.0)])

    error_case(suite, "lm_err_odd_nfft", "RLX_ERR_INVALID", [("f32", [1, 300])], "LogMel",
               n_fft=63, hop=16, n_mels=10, sample_rate=8000, f_max=4000.0)
    error_case(suite, "lm_err_too_short", "RLX_ERR_SHAPE", [("f32", [1, 32])], "LogMel",
               n_fft=64, hop=16, n_mels=10, sample_rate=8000, f_max=4000.0)
    error_case(suite, "lm_err_rank", "RLX_ERR_SHAPE", [("f32", [300])], "LogMel",
               n_fft=64, hop=16, n_mels=10, sample_rate=8000, f_max=4000.0)
    error_case(suite, "lm_err_fmax", "RLX_ERR_INVALID", [("f32", [1, 300])], "LogMel",
               n_fft=64, hop=16, n_mels=10, sample_rate=8000, f_min=500.0, f_max=500.0)


def cases(suite, rng):
    conv_cases(suite, rng)
    conv_transpose_cases(suite, rng)
    pool_cases(suite, rng)
    resize_cases(suite, rng)
    fft_cases(suite, rng)
    log_mel_cases(suite, rng)
