"""FusePoolEpilogue: a convolution's bias and relu move into the max pool that
follows it, with exactly the same result, and only where that holds."""

import numpy as np
import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import const
from hetvm.ir.structural import assert_structural_equal
from hetvm.testing.ir_query import build_and_run, one_input_module, op_calls, op_names
from hetvm.transform import FuseConvEpilogue, FusePoolEpilogue, Normalize, Sequential

RNG = np.random.default_rng(0)


def _rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def _stem(shape=(1, 3, 17, 17), pool=None, relu=True, dtype="float32", extra_reader=False):
    """conv 3x3/2 + bias (+ relu), then a max pool; optionally a second reader of
    the convolution's result."""
    w, b = _rand(8, shape[1], 3, 3, dtype=dtype), _rand(1, 8, 1, 1, dtype=dtype)
    pool = pool or {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), strides=(2, 2), padding=(1, 1, 1, 1)))
        y = bb.emit(op.add(y, const(b)))
        if relu:
            y = bb.emit(op.nn.relu(y))
        z = bb.emit(op.nn.max_pool2d(y, **pool))
        return bb.emit(op.add(z, op.sum(y))) if extra_reader else z

    return one_input_module(body, shape, dtype=dtype)


def _fused(mod):
    out = Sequential([Normalize(), FuseConvEpilogue(), FusePoolEpilogue()])(mod)
    assert_structural_equal(FusePoolEpilogue()(out), out)  # nothing left to fuse
    return out


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bias_and_relu_move_into_the_pool(relu, dtype):
    mod = _stem(relu=relu, dtype=dtype)
    out = _fused(mod)
    assert op_names(out) == ["nn.conv2d", "nn.max_pool2d_bias_act"]
    fused = op_calls(out)[-1]
    assert fused.attrs["activation"] == ("relu" if relu else "none")
    assert fused.struct_info.shape == op_calls(mod)[-1].struct_info.shape
    x = _rand(1, 3, 17, 17, dtype=dtype)
    np.testing.assert_array_equal(build_and_run(mod, x), build_and_run(mod, x, disabled=["FusePoolEpilogue"]))


@pytest.mark.parametrize(
    "pool",
    [
        {"pool_size": (3, 3), "strides": (2, 2)},
        {"pool_size": (2, 2), "strides": (2, 2), "padding": (0, 0, 1, 1)},
        {"pool_size": (3, 3), "strides": (2, 2), "ceil_mode": True},
        {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1)},
        {"pool_size": (2, 2), "strides": (2, 2), "dilation": (2, 2), "padding": (1, 1, 1, 1)},
    ],
)
def test_exact_on_pool_geometries_where_every_window_reads_the_input(pool):
    mod = _stem(shape=(2, 3, 16, 15), pool=pool)
    assert "nn.max_pool2d_bias_act" in op_names(_fused(mod))
    x = _rand(2, 3, 16, 15)
    np.testing.assert_array_equal(build_and_run(mod, x), build_and_run(mod, x, disabled=["FusePoolEpilogue"]))


def test_a_window_wholly_in_padding_keeps_the_order():
    """8 columns after the conv, pool 2x2/2 with 2 columns of right padding: the
    last window is all padding (-inf), which relu(-inf + b) would turn into 0."""
    pool = {"pool_size": (2, 2), "strides": (2, 2), "padding": (0, 0, 0, 2)}
    mod = _stem(shape=(1, 3, 16, 16), pool=pool)
    assert "nn.max_pool2d_bias_act" not in op_names(_fused(mod))


def test_a_second_reader_of_the_convolution_keeps_the_order():
    assert "nn.max_pool2d_bias_act" not in op_names(_fused(_stem(extra_reader=True)))


def test_average_pool_is_left_alone():
    w, b = _rand(4, 3, 3, 3), _rand(1, 4, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.relu(bb.emit(op.add(bb.emit(op.nn.conv2d(x, const(w))), const(b)))))
        return bb.emit(op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2)))

    out = _fused(one_input_module(body, (1, 3, 10, 10)))
    assert op_names(out) == ["nn.conv2d_bias_act", "nn.avg_pool2d"]


def test_fused_op_checks_its_bias():
    x = const(_rand(1, 4, 6, 6))
    with pytest.raises(StructInfoError, match="bias has 3 values"):
        op.nn.max_pool2d_bias_act(x, const(_rand(3)), 2, 2)
    with pytest.raises(StructInfoError, match="activation"):
        op.nn.max_pool2d_bias_act(x, const(_rand(4)), 2, 2, activation="tanh")


def test_a_device_without_max_pool_has_no_fused_pool_either():
    """The fused op is made of nn.max_pool2d, add and nn.relu: a sim device without
    a max pool kernel leaves it to the CPU (a copy), with the same result."""
    import hetvm
    from hetvm.cli_support.placement import pin_params
    from hetvm.ir import VDevice
    from hetvm.pipeline import lower

    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    base = _stem()
    mod = pin_params(base.with_global_infos(vdevice=[sim, cpu]), sim)
    options = {"missing_kernels": {"sim:0": ["nn.max_pool2d"]}}
    low = lower(mod, plan_devices_options=options)
    assert low.attrs["device_copies"], "the pool should run on the CPU"
    exe = hetvm.build(mod, plan_devices_options=options)
    x = _rand(1, 3, 17, 17)
    vm = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0, missing_kernels=["nn.max_pool2d"]), hetvm.cpu(0)])
    got = vm["main"](x).copyto(hetvm.cpu(0)).numpy()
    np.testing.assert_array_equal(got, build_and_run(base, x, disabled=["FusePoolEpilogue"]))
