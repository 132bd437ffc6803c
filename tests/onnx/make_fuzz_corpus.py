#!/usr/bin/env python3
"""make_fuzz_corpus.py DIR — seeds of tests/fuzz/fuzz_onnx: a few small node
test models of the onnx package (one per op family), serialized as is."""
import os
import sys
import warnings

warnings.simplefilter("ignore")
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

WANT = ["test_add", "test_conv_with_strides_padding", "test_maxpool_2d_pads", "test_reshape_reordered_all_dims",
        "test_slice", "test_gather_0", "test_gemm_all_attributes", "test_batchnorm_example",
        "test_softmax_axis_1", "test_reduce_sum_keepdims_example", "test_constant", "test_cast_FLOAT_to_INT32",
        "test_attention_4d_attn_mask", "test_sce_mean_weight", "test_dequantizelinear_axis", "test_gather_elements_0",
        "test_resize_upsample_scales_linear", "test_layer_normalization_2d_axis0", "test_expand_dim_changed",
        "test_split_equal_parts_1d_opset18", "test_if", "test_loop11", "test_scan9_sum", "test_scan_sum",
        "test_lstm_with_peepholes", "test_gru_seq_length", "test_simple_rnn_bidirectional",
        "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_dequantizelinear_int4", "test_quantizelinear_uint4",
        "test_gridsample_bicubic", "test_col2im_pads", "test_linear_attention_gated_delta",
        "test_bitwise_and_i32_2d", "test_averagepool_3d_dilations_small", "test_causal_conv_with_state_basic",
        "test_optional_has_element_optional_input", "test_bitcast_float32_to_int32", "test_roialign_aligned_true",
        "test_tfidfvectorizer_tf_uniandbigrams_skip5", "test_scatter_elements_with_reduction_max"]
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for c in collect_testcases():
    if c.name in WANT:
        with open(os.path.join(out, c.name + ".onnx"), "wb") as f:
            f.write(c.model.SerializeToString())
