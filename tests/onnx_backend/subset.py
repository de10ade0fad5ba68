"""The conformance cases the default test suite runs (seconds, not minutes).

A few cases of each operator the light CNNs and transformer encoders use,
plus one light real model; the full run is ``HETVM_CONFORMANCE=full``.
"""

SUBSET = [
    "test_conv_with_strides_padding", "test_conv_with_strides_and_asymmetric_padding",
    "test_relu", "test_maxpool_2d_precomputed_pads", "test_averagepool_2d_precomputed_strides",
    "test_globalaveragepool", "test_gemm_default_no_bias", "test_gemm_default_scalar_bias",
    "test_matmul_2d", "test_matmul_4d", "test_softmax_example", "test_softmax_example_expanded",
    "test_concat_2d_axis_0", "test_transpose_default",
    "test_batchnorm_example", "test_batchnorm_epsilon", "test_layer_normalization_4d_axis0_expanded",
    "test_add", "test_mul", "test_sub", "test_div", "test_erf", "test_sqrt", "test_pow",
    "test_gather_0", "test_split_equal_parts_2d_opset13", "test_cast_FLOAT_to_DOUBLE", "test_where_example",
    "test_flatten_axis1", "test_dropout_default", "test_lrn", "test_sigmoid", "test_tanh",
    "test_shape", "test_identity", "test_clip_example", "test_leakyrelu",
    "test_loop11", "test_scan9_sum", "test_scan_sum",  # control flow: a loop through the whole pipeline
    "test_shufflenet",
]  # fmt: skip
