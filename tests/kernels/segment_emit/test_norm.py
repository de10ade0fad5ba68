"""Segment bodies of normalisations, softmax, reductions, clip and leaky relu
against their NumPy kernels."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches, run_both

pytest.importorskip("numba")

F32 = dict(rtol=2e-6, atol=2e-6)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f(shape, dtype=np.float32, seed=0):
    return _rng(seed).standard_normal(shape).astype(dtype)


def _compiled_fn(seg):
    (kind, fn, idx, _), = seg.pieces
    assert kind == "g"
    return fn, idx


def _ln(x, gamma, beta, axes, **attrs):
    return ("nn.layer_norm", {"axes": axes, "epsilon": 1e-5, "center": True, "scale": True, **attrs},
            [x, gamma, beta, np.empty_like(x)])


def test_layer_norm_matches_the_numpy_kernel_over_trailing_other_and_several_axes(numba_on):
    x = _f((2, 5, 32))
    x[0, 1, 3] = np.nan  # one row NaN, the others intact
    x[1, 2, 0] = np.inf
    wide = _f((3, 4, 40), np.float64, 1)
    big = _f((2, 3000), seed=2)  # the NumPy passes (rows above norm_direct.SMALL), float32 sums
    strided = _f((32, 6), seed=3).T  # a transposed view
    seg = assert_segment_matches([
        _ln(x, _f(32, seed=4), _f(32, seed=5), [2]),
        _ln(wide, _f(4, np.float64), _f(4, np.float64), [-2]),
        _ln(wide, _f(120, np.float64), _f(120, np.float64), [0, 2], center=False),
        _ln(wide, _f(160, np.float64), np.zeros(1, np.float64), [-1, 1], center=False, scale=True),
        _ln(big, _f(3000), _f(3000), [1], scale=False, epsilon=1e-12),
        _ln(strided, _f(32), _f(32), [-1]),
        _ln(np.zeros((0, 8), np.float32), _f(8), _f(8), [1]),
    ], **F32)
    assert seg.pieces[0][0] == "g"


def test_layer_norm_with_parameters_of_the_wrong_size_raises_in_compiled_code(numba_on):
    x = _f((2, 8))
    seg = assert_segment_matches([_ln(x, _f(8), _f(8), [1]), _ln(x, _f(8), _f(8), [-1])], **F32)
    fn, idx = _compiled_fn(seg)
    assert idx[:3] == (0, 1, 2)
    args = [x, _f(7), _f(8), np.empty_like(x), _f(8), _f(8), np.empty_like(x)]
    with pytest.raises(ValueError, match="nn.layer_norm: gamma"):
        fn(*args)
    with pytest.raises(ValueError):  # the NumPy kernel refuses it too
        run_both([_ln(x, _f(7), _f(8), [1])])


def test_layer_norm_declines_parameters_it_does_not_mirror(numba_on):
    x = _f((2, 8))
    assert_segment_matches([
        _ln(x, _f(8, np.float64), _f(8), [1]),  # gamma of another dtype
        _ln(x, _f((1, 8)), _f((1, 8)), [1]),  # 2-D parameters (the kernel reshapes them)
        _ln(x.astype(np.int32), _f(8), _f(8), [1]),
    ], compiled=False)
    with pytest.raises(ValueError, match="duplicate"):  # a repeated axis: NumPy's error
        run_both([("nn.layer_norm", {"axes": [1, -1]}, [x, _f(64), _f(64), np.empty_like(x)]),
                  ("add", {}, [x, x, np.empty_like(x)])])


def _sm(op, x, axis):
    return (op, {"axis": axis}, [x, np.empty_like(x)])


def test_softmax_and_log_softmax_match_numpy_over_any_axis(numba_on):
    x = _f((2, 3, 5)) * 4
    x[0, 0, 2] = np.nan
    x[1, 2, :] = -np.inf  # a row of -inf: NaN, as NumPy's passes
    x[1, 0, 1] = np.inf
    wide = _f((4, 6), np.float64, 1) * 10
    strided = _f((9, 4), seed=2).T
    assert_segment_matches([
        _sm("nn.softmax", x, -1), _sm("nn.softmax", x, 1), _sm("nn.softmax", wide, 0),
        _sm("nn.softmax", strided, -1), _sm("nn.softmax", _f((2, 3000), seed=3), 1),
        _sm("nn.softmax", np.zeros((3, 0), np.float32), 1),
        _sm("nn.log_softmax", x, -1), _sm("nn.log_softmax", wide, -2), _sm("nn.log_softmax", strided, 0),
    ], **F32)


def test_softmax_declines_integers_and_axes_numpy_refuses(numba_on):
    assert_segment_matches([_sm("nn.softmax", np.arange(6, dtype=np.int64).reshape(2, 3), -1)], compiled=False)
    x = _f((2, 3))
    with pytest.raises(np.exceptions.AxisError):  # the NumPy kernel's, not a loop over a wrapped axis
        run_both([_sm("nn.softmax", x, 2), ("add", {}, [x, x, np.empty_like(x)])])


def _red(op, x, axis, keep, out_dtype=None):
    shape = np.sum(np.zeros(x.shape), axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keep).shape
    return (op, {"axis": axis, "keepdims": keep}, [x, np.empty(shape, out_dtype or x.dtype)])


def test_float_reductions_match_numpy_with_nan_inf_negative_axes_and_empty_sets(numba_on):
    x = _f((3, 4, 5))
    x[0, 1, 2] = np.nan
    x[2, 0, 0] = np.inf
    wide = _f((4, 7), np.float64, 1)
    empty = np.zeros((3, 0), np.float32)
    strided = _f((6, 5), seed=2)[::2]
    assert_segment_matches([
        _red("mean", x, [-1], True), _red("mean", x, [0, 2], False), _red("mean", wide, None, False),
        _red("mean", empty, [1], False),  # NaN, as NumPy's mean of nothing
        _red("mean", strided, 0, True),
        _red("sum", x, [1], False), _red("sum", wide, [], False), _red("sum", empty, [-1], True),
        _red("max", x, [2], False), _red("min", x, [0, 1], True), _red("max", empty, [1], False),
        _red("min", np.zeros((0, 3), np.float64), [0], False),  # +inf, the kernel's identity
        _red("prod", wide, [1], False), _red("prod", strided, None, True),
    ], **F32)


def test_integer_and_bool_reductions_wrap_and_promote_as_numpy(numba_on):
    rng = _rng(3)
    i32 = rng.integers(-2**31, 2**31 - 1, (4, 6), dtype=np.int32)  # sums that wrap in int32
    u8 = rng.integers(0, 255, (3, 5), dtype=np.uint8)
    b = rng.random((3, 4)) > 0.5
    assert_segment_matches([
        _red("sum", i32, [1], False), _red("sum", i32, None, False, np.int64), _red("prod", u8, [1], True, np.uint64),
        _red("sum", b, [0], False, np.int64), _red("max", b, [1], False), _red("min", b, None, True),
        _red("max", i32, [-1], False), _red("min", u8, [0, 1], False),
        _red("min", np.zeros((0, 2), np.uint64), [0], False),  # the type's largest value
        _red("max", np.zeros((2, 0), np.int8), [1], True),
        _red("mean", i32, [0], False, np.float64),
    ])


def test_reductions_decline_other_output_dtypes_and_axes_numpy_refuses(numba_on):
    x = _f((2, 3))
    assert_segment_matches([
        _red("sum", x, [1], False, np.float64),  # NumPy sums in float32, then widens
        _red("mean", x.astype(np.int32), [1], False, np.int32),
        _red("max", x, [1], False, np.float64),
        ("sum", {"axis": None, "keepdims": False}, [x, np.empty(2, np.float32)]),  # a 0-d result broadcast
    ], compiled=False)
    for axis in ([1, -1], [2]):  # NumPy's errors, not a loop over a wrapped or repeated axis
        with pytest.raises(ValueError):
            run_both([("sum", {"axis": axis, "keepdims": False}, [x, np.empty(2, np.float32)]),
                      ("add", {}, [x, x, np.empty_like(x)])])


def test_a_reduction_into_a_wrongly_shaped_output_raises_in_compiled_code(numba_on):
    x = _f((2, 3))
    seg = assert_segment_matches([_red("mean", x, [1], False), _red("sum", x, [1], False)])
    fn, _ = _compiled_fn(seg)
    with pytest.raises(ValueError, match="mean: the output shape"):
        fn(x, np.empty(3, np.float32), np.empty(2, np.float32))


def test_clip_and_leakyrelu_match_numpy_with_nan_and_one_sided_bounds(numba_on):
    x = _f((3, 4)) * 5
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    wide = _f((2, 3, 2), np.float64, 1) * 5
    out = np.empty_like(x)
    assert_segment_matches([
        ("clip", {"min": -1.5, "max": 2.0}, [x, out]),
        ("clip", {"min": None, "max": 1}, [x, np.empty_like(x)]),
        ("clip", {"min": 0.5, "max": None}, [wide, np.empty_like(wide)]),
        ("clip", {"min": 3.0, "max": 1.0}, [wide, np.empty_like(wide)]),  # min above max: max wins, as np.clip
        ("clip", {"min": 0.0, "max": 6.0}, [np.array(7.5, np.float32), np.empty((2, 2), np.float32)]),
        ("nn.leakyrelu", {"alpha": 0.2}, [x, np.empty_like(x)]),
        ("nn.leakyrelu", {}, [wide, np.empty_like(wide)]),
    ])


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint64"])
def test_an_integer_clip_promotes_its_bounds_as_numpy_does(numba_on, dtype):
    from hetvm.kernels.codegen_numba import float_to_int

    info = np.iinfo(dtype)
    small = [-3, -1, 0, 1, 2, 7] if info.min else [0, 1, 2, 3, 7]
    i = np.array([info.min, info.min + 1, *small, 100, info.max - 1, info.max], dtype)
    if dtype == "int64":  # above 2**53 a float bound's clip rounds in float64, as NumPy's does
        i = np.concatenate([i, np.array([2**53 + 1, -(2**53) - 3], dtype)])
    grid = np.stack([i, i[::-1]], axis=1)  # non-contiguous rows
    calls = [
        ("clip", {"min": 0, "max": 5}, [i, np.empty_like(i)]),  # ints: in the dtype
        ("clip", {"min": None, "max": int(info.max)}, [grid, np.empty_like(grid)]),
        ("clip", {"min": 9, "max": 2}, [i, np.empty_like(i)]),  # min above max: max wins
        ("clip", {"min": 1, "max": None}, [np.array(info.max, dtype), np.empty((2, 2), dtype)]),
        ("clip", {"min": 0, "max": 5}, [np.empty((0, 3), dtype), np.empty((0, 3), dtype)]),
    ]
    assert_segment_matches(calls)
    floats = [  # a float bound: float64, then the output's cast
        ("clip", {"min": -1.5, "max": 6.5}, [i, np.empty_like(i)]),
        ("clip", {"min": 0.5, "max": None}, [grid, np.empty_like(grid)]),
        ("clip", {"min": None, "max": 2}, [i, np.empty_like(i)]),
        ("clip", {"min": -2, "max": 9.25}, [i, np.empty_like(i)]),
    ]
    floats[2] = ("clip", {"min": None, "max": 2.75}, floats[2][2])
    if float_to_int("v", dtype) is None:  # one-sided float bounds: no exact cast generated
        assert_segment_matches(floats[1:3], compiled=False)
        floats = [floats[0], floats[3]] if info.min else []
    if floats:
        assert_segment_matches(floats)


def test_an_integer_clip_by_other_bounds_keeps_its_numpy_kernel(numba_on):
    i = np.arange(-3, 3, dtype=np.int8)
    for attrs in ({"min": 0, "max": 300}, {"min": np.int64(0), "max": 2}, {"min": True, "max": 2},
                  {"min": None, "max": None}, {"min": 0.0, "max": 2.0**60}):  # fmt: skip
        assert_segment_matches([("clip", attrs, [i, np.empty_like(i)])], compiled=False)


def test_clip_and_leakyrelu_decline_integers_and_shapes_the_kernel_refuses(numba_on):
    i = np.arange(-3, 3, dtype=np.int32)
    x = _f((1, 3))
    assert_segment_matches([
        ("clip", {"min": None, "max": None}, [x, np.empty_like(x)]),
        ("nn.leakyrelu", {"alpha": 0.1}, [i, np.empty_like(i)]),
    ], compiled=False)
    with pytest.raises(ValueError):  # store() refuses a broadcast result
        run_both([("clip", {"min": 0.0, "max": 1.0}, [x, np.empty((2, 3), np.float32)]),
                  ("add", {}, [x, x, np.empty_like(x)])])


def test_rms_norm_batch_norm_and_scale_shift_act_match_their_numpy_kernels(numba_on):
    x = _f((2, 3, 4, 5))
    x[0, 1, 2, 3] = np.nan
    x[1, 0, 0, 0] = -np.inf
    wide = _f((3, 6), np.float64, 1)
    pos = np.abs(_f(3, seed=2)) + 0.5
    bn = {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True, "training": False}
    assert_segment_matches([
        ("nn.rms_norm", {"axes": [-1], "epsilon": 1e-6}, [x, _f(5, seed=3), np.empty_like(x)]),
        ("nn.rms_norm", {"axes": [0, 1], "epsilon": 1e-6}, [wide, _f(18, np.float64), np.empty(wide.shape, np.float32)]),
        ("nn.batch_norm", bn, [x, _f(3, seed=4), _f(3, seed=5), _f(3, seed=6), pos, np.empty_like(x),
                               np.empty(3, np.float32), np.empty(3, np.float32)]),
        ("nn.batch_norm", {**bn, "axis": -1, "center": False}, [wide, _f(6, np.float64), _f(6, np.float64),
                                                                _f(1, np.float64), np.ones(6), np.empty_like(wide)]),
        ("nn.scale_shift_act", {"activation": "relu"}, [x, _f(3, seed=7), _f(3, seed=8), np.empty_like(x)]),
        ("nn.scale_shift_act", {"activation": "none"}, [wide[:, ::3], _f(2, np.float64), _f(2, np.float64),
                                                        np.empty((3, 2))]),  # a strided view
    ], **F32)


def test_scale_shift_act_by_planes_and_by_its_nest_for_every_layout(numba_on):
    # C-contiguous data and output take one loop a plane, any other layout the nest
    x = _f((2, 5, 7, 3))
    x[1, 2, 3, 1] = np.nan
    x[0, 4, 0, 0] = np.inf
    out_t = np.empty((2, 3, 7, 5), np.float32).transpose(0, 3, 2, 1)  # a non-contiguous output
    inplace = _f((1, 4, 6), np.float64, 9)
    calls = [
        ("nn.scale_shift_act", {"activation": "relu"}, [x, _f(5, seed=1), _f(5, seed=2), np.empty_like(x)]),
        ("nn.scale_shift_act", {"activation": "none"}, [x, _f(5, seed=3), _f(5, seed=4), out_t]),
        ("nn.scale_shift_act", {"activation": "relu"}, [x.transpose(0, 1, 3, 2), _f(5, seed=5), _f(5, seed=6),
                                                        np.empty((2, 5, 3, 7), np.float32)]),
        ("nn.scale_shift_act", {"activation": "relu"}, [inplace, _f(4, np.float64), _f(4, np.float64), inplace]),
        ("nn.scale_shift_act", {"activation": "none"}, [_f((3, 4)), _f(4, seed=7), _f(4, seed=8),
                                                        np.empty((3, 4), np.float32)]),  # planes of one
        ("nn.scale_shift_act", {"activation": "relu"}, [np.zeros((0, 2, 3), np.float32), _f(2), _f(2),
                                                        np.zeros((0, 2, 3), np.float32)]),
    ]
    assert_segment_matches(calls, **F32)


def test_batch_norm_training_and_mixed_dtypes_keep_their_numpy_kernels(numba_on):
    x = _f((2, 3, 4))
    v = np.abs(_f(3)) + 0.5
    bn = {"axis": 1, "epsilon": 1e-5, "training": False}
    assert_segment_matches([
        ("nn.batch_norm", {**bn, "training": True, "momentum": 0.1}, [x, v, v, v, v, np.empty_like(x)]),
        ("nn.batch_norm", bn, [x, v.astype(np.float64), v, v, v, np.empty_like(x)]),
        ("nn.scale_shift_act", {"activation": "relu"}, [x.astype(np.int32), np.ones(3, np.int32),
                                                        np.zeros(3, np.int32), np.empty((2, 3, 4), np.int32)]),
        ("nn.rms_norm", {"axes": [2], "epsilon": 1e-6}, [x.astype(np.int64), _f(4), np.empty_like(x)]),
    ], compiled=False)
    seg = assert_segment_matches([("nn.scale_shift_act", {}, [x, v, v, np.empty_like(x)]),
                                  ("nn.rms_norm", {"axes": [2], "epsilon": 1e-6}, [x, _f(4), np.empty_like(x)])], **F32)
    fn, _ = _compiled_fn(seg)
    with pytest.raises(ValueError, match="nn.scale_shift_act: scale and shift"):
        fn(x, _f(2), np.empty_like(x), _f(4), np.empty_like(x))


def test_large_inputs_keep_the_numpy_kernels_whose_vectorised_passes_are_faster(numba_on):
    """float64, or axes the direct float32 row loops do not take (these run at any size)."""
    from hetvm.kernels.segment_emit import norm

    x = _f((2, norm.NORM_MAX // 2 + 1), np.float64)
    s = _f((1, norm.SOFTMAX_MAX + 1), np.float64)
    x32 = _f((norm.NORM_MAX // 2 + 1, 2))
    s32 = _f((norm.SOFTMAX_MAX // 2 + 1, 2))
    assert_segment_matches([
        _ln(x, _f(x.shape[1], np.float64), _f(x.shape[1], np.float64), [1]),
        _ln(x32, _f(x32.shape[0]), _f(x32.shape[0]), [0]),
        _sm("nn.softmax", s, -1),
        _sm("nn.softmax", s32, 0),
        _sm("nn.log_softmax", _f((1, norm.SOFTMAX_MAX + 1)), -1),
        _red("max", _f(norm.REDUCE_MAX + 1), [0], False),  # sum and mean: reduce.py at any size
        _red("mean", _f((2, norm.REDUCE_MAX // 2 + 1, 2)), [0, 2], False),  # axes not one run
    ], compiled=False)


def _softmax64(x):
    d = (x - x.max(axis=-1, keepdims=True)).astype(np.float64)
    e = np.exp(d)
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm64(x, gamma, beta):
    w = x.astype(np.float64)
    c = w - w.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * gamma + beta


def test_float32_rows_of_any_size_run_the_direct_loops_in_the_segment(numba_on):
    """float32 softmax / layer norm over trailing axes: the direct row loops at
    any size, for C-contiguous arrays in place and for strided ones through a
    contiguous copy (a transposed input, an output in Fortran order): the same
    numbers as the direct kernel (C: bit for bit) and close to float64."""
    from hetvm.kernels import norm_direct

    big = _f((3, 128, 256), seed=6) * 4
    big[0, 5, 7] = np.nan
    big[1, 3, :] = -np.inf
    odd = _f((7, 1000), seed=7)
    strided = _f((300, 40), seed=8).T  # rows of 300 items, 1200 apart
    g, b = _f(256, seed=9), _f(256, seed=10)
    g3, b3 = _f((4, 300), seed=11), _f((4, 300), seed=12)
    wide = _f((2, 4, 300), seed=13)
    calls = [_sm("nn.softmax", big, -1), _sm("nn.softmax", odd, 1), _sm("nn.softmax", strided, -1),
             _ln(big, g, b, [2]), _ln(odd, _f(1000), _f(1000), [-1], center=False),
             _ln(strided, _f(300), _f(300), [1], scale=False),
             _ln(wide, g3.ravel(), b3.ravel(), [1, 2])]
    seg = assert_segment_matches(calls, **F32)
    assert seg.pieces[0][0] == "g"
    got, _, _ = run_both(calls)
    order = []  # the segment's arrays: distinct, by first appearance
    for _, _, args in calls:
        order += [a for a in args if isinstance(a, np.ndarray) and not any(a is o for o in order)]
    outs = [got[next(k for k, o in enumerate(order) if o is args[-1])] for _, _, args in calls]
    loops = norm_direct._loops()
    want = np.empty_like(big.reshape(-1, 256))
    loops.softmax32(big.reshape(-1, 256), want)
    np.testing.assert_array_equal(outs[0].reshape(-1, 256), want)
    np.testing.assert_allclose(outs[1], _softmax64(odd), rtol=4e-7, atol=1e-12)
    np.testing.assert_allclose(outs[2], _softmax64(np.ascontiguousarray(strided)), rtol=4e-7, atol=1e-12)
    ok = ~np.isnan(big).any(axis=-1) & ~np.isinf(big).any(axis=-1)
    np.testing.assert_allclose(outs[3][ok], _layer_norm64(big, g, b)[ok], rtol=1e-5, atol=2e-6)
    assert np.isnan(outs[3][~ok]).all()
    lw = _layer_norm64(wide.reshape(2, 1200), g3.ravel(), b3.ravel()).reshape(wide.shape)
    np.testing.assert_allclose(outs[6], lw, rtol=1e-5, atol=2e-6)


def test_float32_direct_rows_in_place_in_the_segment(numba_on):
    x = _f((4, 5000), seed=14)
    want = _softmax64(x)
    y = x.copy()
    run = assert_segment_matches([("nn.softmax", {"axis": -1}, [y, y])], **F32)
    assert run.pieces[0][0] == "g"
    got, _, _ = run_both([("nn.softmax", {"axis": -1}, [y, y])])
    np.testing.assert_allclose(got[0], want, rtol=4e-7, atol=1e-12)
