"""Per-thread scratch buffers: reuse, isolation, limits, and kernels that do not
depend on what an earlier call left in them."""

import threading

import numpy as np
import pytest

from hetvm.kernels import scratch as S
from hetvm.kernels.registry import get_kernel


@pytest.fixture(autouse=True)
def _fresh():
    S.release()
    yield
    S.release()


def test_same_slot_reuses_memory_and_other_slots_do_not_alias() -> None:
    a = S.scratch(np, "one", (4, 8), np.float32)
    b = S.scratch(np, "one", (2, 3), np.float64)
    c = S.scratch(np, "two", (4, 8), np.float32)
    assert np.shares_memory(a, b) and not np.shares_memory(a, c)
    assert b.shape == (2, 3) and b.dtype == np.float64 and b.flags.c_contiguous
    assert S.held_bytes() == a.nbytes + c.nbytes


def test_growing_a_slot_and_the_cache_limit() -> None:
    small = S.scratch(np, "g", (10,), np.float32)
    big = S.scratch(np, "g", (1000,), np.float32)
    assert not np.shares_memory(small, big) and S.held_bytes() == big.nbytes
    huge = S.scratch(np, "g", (S.CACHE_LIMIT // 4 + 1,), np.float32)
    assert not np.shares_memory(huge, big) and S.held_bytes() == big.nbytes  # not kept
    S.release()
    assert S.held_bytes() == 0


def test_threads_have_their_own_buffers() -> None:
    mine = S.scratch(np, "t", (16,), np.float32)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(S.scratch(np, "t", (16,), np.float32)))
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, seen[0])


def test_other_array_modules_get_plain_empty() -> None:
    class FakeXp:
        def empty(self, shape, dtype):
            return ("empty", shape, dtype)

    assert S.scratch(FakeXp(), "x", (2,), "float32") == ("empty", (2,), "float32")
    assert S.held_bytes() == 0


def _reference(op: str, attrs: dict, x: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Sliding windows over ``np.pad``: slow, obviously right."""
    pt, pl, pb, pr = attrs["padding"]
    sh, sw = attrs.get("strides", (1, 1))
    fill = -np.inf if op == "nn.max_pool2d" else 0.0
    xp_ = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    kh, kw = w.shape[2:] if w is not None else attrs["pool_size"]
    win = np.lib.stride_tricks.sliding_window_view(xp_, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    if op == "nn.max_pool2d":
        return win.max(axis=(4, 5))
    if op == "nn.avg_pool2d":  # count_include_pad=False
        ones = np.pad(np.ones(x.shape[2:]), ((pt, pb), (pl, pr)))
        count = np.lib.stride_tricks.sliding_window_view(ones, (kh, kw))[::sh, ::sw].sum(axis=(2, 3))
        return win.sum(axis=(4, 5)) / count
    groups = attrs.get("groups", 1)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    parts = [np.einsum("nchwij,ocij->nohw", win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og])
             for g in range(groups)]  # fmt: skip
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("op,attrs,w_shape", [
    ("nn.conv2d", {"padding": (1, 2, 0, 1)}, (5, 4, 3, 3)),  # im2col
    ("nn.conv2d", {"padding": (1, 1, 1, 1)}, (2, 4, 3, 3)),  # kn2row
    ("nn.conv2d", {"padding": (2, 1, 1, 0), "groups": 4}, (4, 1, 3, 3)),  # depthwise, flat
    ("nn.conv2d", {"padding": (1, 1, 1, 1), "groups": 4, "strides": (2, 2)}, (4, 1, 3, 3)),
    ("nn.max_pool2d", {"pool_size": (3, 3), "padding": (1, 1, 1, 1), "strides": (2, 2)}, None),
    ("nn.avg_pool2d", {"pool_size": (3, 3), "padding": (1, 0, 1, 1)}, None),
])  # fmt: skip
def test_kernels_ignore_garbage_left_in_scratch(op, attrs, w_shape) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = None if w_shape is None else rng.standard_normal(w_shape).astype(np.float32)
    want = _reference(op, attrs, x, w)
    for slot in ("pad", "cols", "acc", "tmp", "prod", "rows"):  # poison every slot
        S.scratch(np, slot, (1 << 16,), np.float32)[...] = np.nan
    out = np.full(want.shape, 7, np.float32)
    get_kernel(op, "cpu")(np, attrs, *([x] if w is None else [x, w]), out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_vm_release_pools_drops_this_threads_scratch(monkeypatch) -> None:
    import hetvm
    import hetvm.op as op
    from hetvm.ir import BlockBuilder, TensorStructInfo, Var
    from hetvm.kernels import codegen_numba

    # the NumPy pooling (its padded plane is scratch): with Numba on, whatever an
    # earlier test left set, the direct pooling loops keep their own planes
    monkeypatch.setenv("HETVM_NUMBA", "0")
    monkeypatch.setattr(codegen_numba, "_checked", False)
    monkeypatch.setattr(codegen_numba, "_numba", codegen_numba._numba)  # put back after

    x = Var("x", struct_info=TensorStructInfo((1, 2, 9, 9), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(op.nn.max_pool2d(x, pool_size=(3, 3), padding=(1, 1, 1, 1))))
    vm = hetvm.VirtualMachine(hetvm.build(bb.get()))
    vm["main"](np.ones((1, 2, 9, 9), np.float32))
    assert S.held_bytes() > 0  # the padded input and the row buffer
    vm.release_pools()
    assert S.held_bytes() == 0
