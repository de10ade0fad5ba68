"""A symbolic arena re-packed at a call's dims: the constant packer's placement
where it is smaller than the formula's, the formula's where it is not, cached
per dims tuple, and a malformed spec refused with the arena's name."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError
from hetvm.runtime.plan_specialise import PlanSpecialiser

from .test_plan_queries import _chain_module  # x: (n, 256) -> softmax x 3: a symbolic arena

N = ["var", "n"]


def _metadata(buffers, total, alignment=64):
    arena = {"var": "arena", "specialise": {"dims": ["n"], "buffers": buffers, "total": total}}
    return {"memory_plan": {"functions": {"main": {"alignment": alignment, "devices": {"0": {"arenas": [arena]}}}}}}


def _stacked():
    """Three tensors of 64 x n bytes, each live at one position of its own (no
    two live together), but the formula stacks them: 192 x n."""
    size = ["mul", 64, N]
    offsets = [0, size, ["mul", 128, N]]
    buffers = [{"name": f"t{k}", "size": size, "intervals": [[k, k]], "path": [], "offset": offsets[k]} for k in range(3)]
    return _metadata(buffers, [["mul", 192, N]])


def _apart(placement, sizes, live_together):
    total, offsets = placement
    for i, j in live_together:
        assert offsets[i] + sizes[i] <= offsets[j] or offsets[j] + sizes[j] <= offsets[i], (i, j, offsets)
    assert all(o + s <= total for o, s in zip(offsets, sizes))


def test_the_packer_reuses_what_the_formula_stacked():
    spec = PlanSpecialiser(_stacked())
    assert spec.place("main", "arena", (5,)) == (320, (0, 0, 0))  # one tensor's bytes: the lower bound
    assert spec.place_at("main", "arena", {"n": 7}) == (448, (0, 0, 0))


def test_the_formula_is_kept_where_the_packer_is_no_better():
    # two tensors live together: the formula's placement is already optimal
    buffers = [
        {"name": "a", "size": ["mul", 64, N], "intervals": [[0, 1]], "path": [], "offset": 0},
        {"name": "b", "size": ["mul", 64, N], "intervals": [[1, 2]], "path": [], "offset": ["mul", 64, N]},
    ]
    total, offsets = PlanSpecialiser(_metadata(buffers, [["mul", 128, N]])).place("main", "arena", (3,))
    assert (total, offsets) == (384, (0, 192))
    _apart((total, offsets), [192, 192], [(0, 1)])


def test_sizes_that_cross_get_the_placement_of_their_size():
    # s (n x n) and h (32 x n) bytes: which one the third tensor can share depends on n
    nn = ["mul", N, N]
    h = ["mul", 32, N]
    buffers = [
        {"name": "s", "size": nn, "intervals": [[0, 1]], "path": [], "offset": 0},
        {"name": "h", "size": h, "intervals": [[0, 3]], "path": [], "offset": ["add", nn, 63]},
        {"name": "u", "size": nn, "intervals": [[2, 3]], "path": [], "offset": ["add", ["add", nn, 63], h]},
    ]
    spec = PlanSpecialiser(_metadata(buffers, [["add", ["add", ["mul", 2, nn], h], 126]], alignment=1))
    for n in (2, 8, 40, 200):
        sizes = [n * n, 32 * n, n * n]
        total, offsets = spec.place("main", "arena", (n,))
        _apart((total, offsets), sizes, [(0, 1), (1, 2)])
        assert total == n * n + 32 * n  # s and u share their bytes at every n


def test_branches_of_one_if_share_bytes():
    size = ["mul", 64, N]
    buffers = [
        {"name": "t", "size": size, "intervals": [[1, 2]], "path": [[0, 0]], "offset": 0},
        {"name": "f", "size": size, "intervals": [[1, 2]], "path": [[0, 1]], "offset": size},
    ]
    assert PlanSpecialiser(_metadata(buffers, [["mul", 128, N]])).place("main", "arena", (2,)) == (128, (0, 0))


def test_placements_are_cached_per_dims_least_recent_dropped():
    spec = PlanSpecialiser(_stacked(), cache_size=2)
    spec.place("main", "arena", (1,))
    spec.place("main", "arena", (1,))
    assert spec.misses == 1
    spec.place("main", "arena", (2,))
    spec.place("main", "arena", (3,))  # drops n=1
    spec.place("main", "arena", (3,))
    assert spec.misses == 3
    spec.place("main", "arena", (1,))
    assert spec.misses == 4


@pytest.mark.parametrize(
    "broken, what",
    [
        ({"dims": "n"}, "'dims' must be a list of names"),
        ({"total": []}, "'total' must be a list of candidates"),
        ({"buffers": [{"name": "a", "size": ["pow", 2, 3], "intervals": [], "path": [], "offset": 0}]}, "bad symbolic expression"),
        ({"buffers": [{"name": "a", "size": 4, "intervals": [[3, 1]], "path": [], "offset": 0}]}, "ends before it starts"),
        ({"buffers": [{"name": "a", "size": 4, "intervals": [["x", 1]], "path": [], "offset": 0}]}, "buffer 'a'"),
    ],
)
def test_a_malformed_spec_names_the_arena(broken, what):
    meta = _stacked()
    raw = meta["memory_plan"]["functions"]["main"]["devices"]["0"]["arenas"][0]["specialise"]
    raw.update(broken)
    with pytest.raises(hetvm.HetvmError, match=f"arena 'arena'.*{what}"):
        PlanSpecialiser(meta).place("main", "arena", (2,))


def test_an_unknown_arena_or_a_missing_dim_is_an_error():
    spec = PlanSpecialiser(_stacked())
    with pytest.raises(HetvmRuntimeError, match="no symbolic arena 'other'"):
        spec.place("main", "other", (1,))
    with pytest.raises(HetvmRuntimeError, match="depends on n; give it in dims"):
        spec.place_at("main", "arena", {"m": 1})




def test_the_vm_places_a_symbolic_arena_per_call_and_survives_export(tmp_path):
    exe = hetvm.build(_chain_module(), target="llvm")
    assert any(getattr(i, "func", "") == "vm.builtin.arena_plan" for i in exe["main"].instructions)
    path = str(tmp_path / "chain.hetvm")
    exe.export(path)
    for built in (exe, hetvm.load_module(path)):
        vm = hetvm.VirtualMachine(built, hetvm.cpu(0))
        for n in (3, 5, 3):
            x = np.random.default_rng(n).standard_normal((n, 256)).astype(np.float32)
            got = vm["main"](hetvm.nd.array(x)).numpy()
            ref = x
            for _ in range(3):
                e = np.exp(ref - ref.max(axis=-1, keepdims=True))
                ref = e / e.sum(axis=-1, keepdims=True)
            np.testing.assert_allclose(got, ref, rtol=1e-5)
        assert built.specialiser().misses == 2  # n = 3 placed once, then from the cache
