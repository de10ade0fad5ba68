"""StaticPlanBlockMemory: exact offsets and arena sizes on small lowered programs.

Programs are written directly in the lowered form CallTIRRewrite produces
(``builtin.alloc_tensor`` + ``call_packed("kernel.*", ins..., outs...)``) so
every position, offset and byte count below can be checked by hand.
"""

from __future__ import annotations

import json

import pytest

from hetvm.analysis.memory_plan import check_no_overlap
from hetvm.errors import MemoryPlanError
from hetvm.ir import (
    BindingBlock,
    Call,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    IRModule,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    VDevice,
    structural_equal,
)
from hetvm.ir import prim as P
from hetvm.transform.call_tir_rewrite import alloc_tensor_call
from hetvm.transform.static_plan_block_memory import StaticPlanBlockMemory

UNIT = TupleStructInfo([])
F32 = "float32"


class Lowered:
    """Writes lowered bindings: allocations, kernels, views, tuples."""

    def __init__(self, vdevices: list[VDevice] | None = None) -> None:
        self.bindings: list = []
        self.vdevices = vdevices or []

    def alloc(self, name: str, shape, dtype: str = F32, dev: int = 0) -> Var:
        vdev = self.vdevices[dev] if self.vdevices else None
        sinfo = TensorStructInfo(shape, dtype, vdevice=vdev)
        var = Var(name, struct_info=sinfo)
        self.bindings.append(VarBinding(var, alloc_tensor_call(sinfo, dev)))
        return var

    def kernel(self, op: str, ins, outs, dev: int = 0) -> None:
        call = Call(
            ExternFunc("kernel." + op),
            tuple(ins) + tuple(outs),
            {"device_index": dev, "num_outputs": len(outs)},
            struct_info=UNIT,
        )
        self.bindings.append(VarBinding(Var("_", struct_info=UNIT), call))

    def op(self, name: str, op: str, ins, shape, dtype: str = F32, dev: int = 0) -> Var:
        out = self.alloc(name, shape, dtype, dev)
        self.kernel(op, ins, [out], dev)
        return out

    def reshape(self, name: str, x: Var, shape) -> Var:
        sinfo = TensorStructInfo(shape, x.struct_info.dtype, vdevice=x.struct_info.vdevice)
        call = Call(ExternFunc("vm.builtin.reshape"), (x, ShapeExpr(tuple(shape))), struct_info=sinfo)
        var = Var(name, struct_info=sinfo)
        self.bindings.append(VarBinding(var, call))
        return var

    def bind(self, name: str, value) -> Var:
        var = Var(name, struct_info=value.struct_info)
        self.bindings.append(VarBinding(var, value))
        return var

    def seq(self, result) -> SeqExpr:
        return SeqExpr((BindingBlock(tuple(self.bindings)),), result)


def module(params, body: SeqExpr, vdevices=None, attrs=None, name="main", extra=None) -> IRModule:
    func = Function(tuple(params), body, is_pure=False, attrs=attrs or {})
    funcs = {name: func, **(extra or {})}
    infos = {"vdevice": vdevices} if vdevices else {}
    return IRModule(funcs, infos)


def bindings(func: Function):
    def walk(seq):
        for block in seq.blocks:
            for b in block.bindings:
                yield b
                if isinstance(b.value, If):
                    yield from walk(b.value.true_branch)
                    yield from walk(b.value.false_branch)

    return list(walk(func.body))


def placement(mod: IRModule, name: str = "main") -> dict[str, tuple[str, int]]:
    """Tensor name -> (arena name, offset) for planned allocations."""
    out = {}
    for b in bindings(mod[name]):
        op = getattr(b.value, "op", None)
        if getattr(op, "name", None) == "memory.alloc_tensor":
            out[b.var.name_hint] = (b.value.args[0].name_hint, P.const_value(b.value.args[1].value))
    return out


def arenas(mod: IRModule, name: str = "main") -> dict[str, tuple[int, int, str]]:
    """Arena name -> (nbytes, device, scope)."""
    out = {}
    for b in bindings(mod[name]):
        op = getattr(b.value, "op", None)
        if getattr(op, "name", None) == "memory.alloc_storage":
            size, dev, scope, _ = b.value.args
            out[b.var.name_hint] = (
                P.const_value(size.values[0]),
                P.const_value(dev.value),
                scope.value,
            )
    return out


def unplanned(mod: IRModule, name: str = "main") -> set[str]:
    return {
        b.var.name_hint
        for b in bindings(mod[name])
        if getattr(getattr(b.value, "op", None), "name", None) == "builtin.alloc_tensor"
    }


def facts(mod: IRModule, name: str = "main") -> dict:
    return mod.attrs["memory_plan"]["functions"][name]


X = TensorStructInfo((4, 8), F32)  # 128 bytes


def chain_module() -> IRModule:
    x = Var("x", struct_info=X)
    lb = Lowered()
    a = lb.op("a", "matmul", [x], (4, 8))
    b = lb.op("b", "relu", [a], (4, 8))
    v = lb.reshape("v", b, (32,))
    c = lb.op("c", "add", [v, v], (32,))
    d = lb.op("d", "multiply", [c, c], (32,))
    return module([x], lb.seq(d))


def test_chain_exact_offsets_and_sizes():
    mod = StaticPlanBlockMemory()(chain_module())
    assert placement(mod) == {"a": ("arena", 0), "b": ("arena", 128), "c": ("arena", 0)}
    assert arenas(mod) == {"arena": (256, 0, "global")}
    assert unplanned(mod) == {"d"}
    f = facts(mod)
    dev = f["devices"]["0"]
    assert (dev["planned_bytes"], dev["lower_bound_bytes"], dev["no_reuse_bytes"]) == (256, 256, 384)
    assert f["outputs_in_plan"] is False
    assert f["unplanned"] == [{"name": "d", "device": 0, "reason": "returned", "nbytes": 128}]
    json.dumps(mod.attrs["memory_plan"])  # plain data
    assert check_no_overlap(mod)["main"] == 2


def test_arena_is_bound_first_and_input_unchanged():
    before = chain_module()
    mod = StaticPlanBlockMemory()(before)
    first = mod["main"].body.blocks[0].bindings[0]
    assert first.var.name_hint == "arena"
    assert unplanned(before) == {"a", "b", "c", "d"}
    assert "memory_plan" not in before.attrs


def test_idempotent():
    once = StaticPlanBlockMemory()(chain_module())
    twice = StaticPlanBlockMemory()(once)
    assert twice is once
    assert structural_equal(twice["main"], once["main"])
    assert twice.attrs["memory_plan"] == once.attrs["memory_plan"]


def test_dtypes_share_bytes():
    x = Var("x", struct_info=TensorStructInfo((16, 16), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (16, 16), "float32")  # 1024 B, live 0..3
    b = lb.op("b", "astype", [a], (16, 16), "float16")  # 512 B, live 2..5
    c = lb.op("c", "astype", [b], (16, 16), "int32")  # 1024 B, live 4..7
    d = lb.op("d", "add", [c, c], (16, 16), "int32")
    mod = StaticPlanBlockMemory()(module([x], lb.seq(d)))
    assert placement(mod) == {"a": ("arena", 0), "b": ("arena", 1024), "c": ("arena", 0)}
    assert arenas(mod)["arena"][0] == 1536
    assert facts(mod)["devices"]["0"]["lower_bound_bytes"] == 1536


def test_offsets_are_aligned_to_64():
    x = Var("x", struct_info=TensorStructInfo((3,), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (3,))  # 12 bytes
    b = lb.op("b", "relu", [a], (5,))  # 20 bytes
    c = lb.op("c", "add", [a, b], (3,))  # 12 bytes: a, b, c all live together
    d = lb.op("d", "add", [c, c], (3,))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(d)))
    offsets = sorted(off for _, off in placement(mod).values())
    assert offsets == [0, 64, 128]
    assert arenas(mod)["arena"][0] == 128 + 12
    assert facts(mod)["devices"]["0"]["lower_bound_bytes"] == 44


def test_reshape_view_keeps_its_root_alive():
    x = Var("x", struct_info=X)
    lb = Lowered()
    a = lb.op("a", "relu", [x], (4, 8))
    v = lb.reshape("v", a, (32,))  # the last read of `a` itself
    b = lb.op("b", "relu", [x], (32,))  # would reuse a's bytes if views were ignored
    c = lb.op("c", "add", [v, b], (32,))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(c)))
    place = placement(mod)
    assert place["a"][1] != place["b"][1]
    assert arenas(mod)["arena"][0] == 256
    check_no_overlap(mod)


def test_tuple_fields_and_getitem():
    x = Var("x", struct_info=X)
    lb = Lowered()
    o0 = lb.alloc("o0", (4, 8))  # 0
    o1 = lb.alloc("o1", (4, 8))  # 1
    lb.kernel("split", [x], [o0, o1])  # 2
    t = lb.bind("t", Tuple((o0, o1)))  # 3
    g = lb.bind("g", TupleGetItem(t, 1))  # 4: o0 dies here, o1 lives on through g
    p = lb.op("p", "relu", [g], (4, 8))  # 5, 6
    q = lb.op("q", "relu", [p], (4, 8))  # 7, 8
    mod = StaticPlanBlockMemory()(module([x], lb.seq(q)))
    assert placement(mod) == {"o0": ("arena", 0), "o1": ("arena", 128), "p": ("arena", 0)}
    assert arenas(mod)["arena"][0] == 256
    check_no_overlap(mod)


def test_returned_tuple_fields_stay_unplanned():
    x = Var("x", struct_info=X)
    lb = Lowered()
    a = lb.op("a", "relu", [x], (4, 8))
    b = lb.op("b", "relu", [a], (4, 8))
    c = lb.op("c", "relu", [a], (4, 8))
    t = lb.bind("t", Tuple((b, c)))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(t)))
    assert set(placement(mod)) == {"a"}
    assert unplanned(mod) == {"b", "c"}


def test_outputs_in_plan_option():
    mod = StaticPlanBlockMemory(plan_outputs=True)(chain_module())
    place = placement(mod)
    assert set(place) == {"a", "b", "c", "d"}
    assert place["d"][1] not in (place["c"][1],)  # d is written while c is read
    assert facts(mod)["outputs_in_plan"] is True
    assert facts(mod)["unplanned"] == []
    check_no_overlap(mod)


def if_module() -> IRModule:
    x = Var("x", struct_info=X)
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    outer = Lowered()
    a = outer.op("a", "relu", [x], (4, 8))  # 0, 1
    tb = Lowered()
    t1 = tb.op("t1", "exp", [a], (4, 8))  # 2, 3
    t2 = tb.op("t2", "exp", [t1], (4, 8))  # 4, 5 (result read at 6)
    fb = Lowered()
    f1 = fb.op("f1", "log", [a], (4, 8))  # 7, 8 (result read at 9)
    r = outer.bind("r", If(cond, tb.seq(t2), fb.seq(f1), struct_info=X))  # 10
    out = outer.op("out", "add", [r, r], (4, 8))  # 11, 12
    return module([x, cond], outer.seq(out))


def test_if_branches_share_bytes():
    mod = StaticPlanBlockMemory()(if_module())
    place = placement(mod)
    assert place == {
        "a": ("arena", 0),
        "t1": ("arena", 128),
        "t2": ("arena", 256),
        "f1": ("arena", 128),  # the other branch: shares t1's bytes
    }
    assert arenas(mod)["arena"][0] == 384
    assert facts(mod)["devices"]["0"]["lower_bound_bytes"] == 384
    assert check_no_overlap(mod)["main"] > 0


def test_if_result_returned_is_unplanned():
    x = Var("x", struct_info=X)
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    outer = Lowered()
    a = outer.op("a", "relu", [x], (4, 8))
    tb = Lowered()
    t1 = tb.op("t1", "exp", [a], (4, 8))
    fb = Lowered()
    f1 = fb.op("f1", "log", [a], (4, 8))
    r = outer.bind("r", If(cond, tb.seq(t1), fb.seq(f1), struct_info=X))
    mod = StaticPlanBlockMemory()(module([x, cond], outer.seq(r)))
    assert set(placement(mod)) == {"a"}
    assert unplanned(mod) == {"t1", "f1"}


def test_outer_value_read_in_a_branch_lives_through_the_if():
    x = Var("x", struct_info=X)
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    outer = Lowered()
    a = outer.op("a", "relu", [x], (4, 8))
    tb = Lowered()
    t1 = tb.op("t1", "exp", [x], (4, 8))
    t2 = tb.op("t2", "add", [t1, a], (4, 8))  # a read late in one branch
    fb = Lowered()
    f1 = fb.op("f1", "log", [x], (4, 8))
    r = outer.bind("r", If(cond, tb.seq(t2), fb.seq(f1), struct_info=X))
    out = outer.op("out", "add", [r, r], (4, 8))
    mod = StaticPlanBlockMemory()(module([x, cond], outer.seq(out)))
    place = placement(mod)
    assert place["a"][1] not in (place["t1"][1], place["t2"][1], place["f1"][1])
    check_no_overlap(mod)


def test_values_crossing_blocks():
    x = Var("x", struct_info=X)
    lb1 = Lowered()
    a = lb1.op("a", "relu", [x], (4, 8))
    b = lb1.op("b", "relu", [a], (4, 8))
    lb2 = Lowered()
    c = lb2.op("c", "add", [a, b], (4, 8))  # a, b used in the next block
    d = lb2.op("d", "relu", [c], (4, 8))
    e = lb2.op("e", "relu", [d], (4, 8))
    body = SeqExpr((BindingBlock(tuple(lb1.bindings)), BindingBlock(tuple(lb2.bindings))), e)
    mod = StaticPlanBlockMemory()(module([x], body))
    place = placement(mod)
    assert len({place["a"][1], place["b"][1], place["c"][1]}) == 3
    assert place["d"][1] in (place["a"][1], place["b"][1])
    assert arenas(mod)["arena"][0] == 384
    check_no_overlap(mod)


def test_bounded_symbolic_shape_uses_upper_bound():
    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 4), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (n, 4))  # at most 128 * 16 = 2048 bytes
    b = lb.op("b", "relu", [a], (n, 4))
    c = lb.op("c", "relu", [b], (n, 4))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(c), attrs={"tir_var_upper_bound": {"n": 128}}))
    assert placement(mod) == {"a": ("arena", 0), "b": ("arena", 2048)}
    assert arenas(mod)["arena"][0] == 4096
    tensors = {t["name"]: t for t in facts(mod)["tensors"]}
    assert tensors["a"]["nbytes"] == 2048 and tensors["a"]["exact"] is False
    # the carved tensor keeps its symbolic shape
    carved = next(b for b in bindings(mod["main"]) if b.var.name_hint == "a")
    assert carved.value.args[2].values[0] is n


def test_unbounded_symbolic_shape_is_planned_with_expressions():
    # sizes 16 x n (a, b) and 64 (s), all three live together at b's kernel:
    # offsets are expressions, valid for every n (see test_symbolic_memory_plan.py)
    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 4), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (n, 4))
    s = lb.op("s", "relu", [x], (4, 4))
    b = lb.op("b", "add", [a, s], (n, 4))
    c = lb.op("c", "relu", [b], (n, 4))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(c)))
    assert set(placement(mod)) == {"a", "s", "b"}
    assert unplanned(mod) == {"c"}
    reasons = {u["name"]: u["reason"] for u in facts(mod)["unplanned"]}
    assert reasons == {"c": "returned"}
    dev = facts(mod)["devices"]["0"]
    assert dev["planned_bytes"] is None and dev["formulas"]["lower_bound_bytes"] == "32 x n + 64"
    assert check_no_overlap(mod) == {"main": 3}  # proven for every n
    for value in (1, 3, 4, 5, 100):
        assert check_no_overlap(mod, {"n": value}) == {"main": 3}


def test_bad_upper_bound_is_an_error():
    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n,), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (n,))
    b = lb.op("b", "relu", [a], (n,))
    mod = module([x], lb.seq(b), attrs={"tir_var_upper_bound": {"n": -3}})
    with pytest.raises(MemoryPlanError, match="function main: upper bound of 'n'"):
        StaticPlanBlockMemory()(mod)


def test_list_valued_lower_bound_is_an_error():
    # TVM's planner rejects {"n": [4]} the same way (its value must be an integer)
    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n,), F32))
    lb = Lowered()
    a = lb.op("a", "relu", [x], (n,))
    mod = module([x], lb.seq(a), attrs={"tir_var_lower_bound": {"n": (4,)}})
    with pytest.raises(MemoryPlanError, match="function main: lower bound of 'n' in tir_var_lower_bound"):
        StaticPlanBlockMemory()(mod)


def test_devices_get_separate_arenas():
    vdevs = [VDevice("llvm", 0), VDevice("sim", 0, "global"), VDevice("sim", 1, "shared")]
    x = Var("x", struct_info=TensorStructInfo((4, 8), F32, vdevice=vdevs[0]))
    lb = Lowered(vdevs)
    a = lb.op("a", "relu", [x], (4, 8), dev=0)
    b = lb.alloc("b", (4, 8), dev=1)
    lb.bindings.append(
        VarBinding(
            Var("_", struct_info=UNIT),
            Call(ExternFunc("vm.builtin.copy_to"), (a, PrimValue(1), b), struct_info=UNIT),
        )
    )
    c = lb.op("c", "exp", [b], (4, 8), dev=1)
    d = lb.op("d", "exp", [c], (4, 8), dev=2)
    e = lb.op("e", "exp", [d], (4, 8), dev=2)
    f = lb.op("f", "exp", [e], (4, 8), dev=2)
    mod = StaticPlanBlockMemory()(module([x], lb.seq(f), vdevices=vdevs))
    ar = arenas(mod)
    assert ar == {
        "arena_d0": (128, 0, "global"),
        "arena_d1": (256, 1, "global"),
        "arena_d2_shared": (256, 2, "shared"),
    }
    place = placement(mod)
    assert place["a"] == ("arena_d0", 0)
    assert {place["b"][0], place["c"][0]} == {"arena_d1"}
    assert {place["d"][0], place["e"][0]} == {"arena_d2_shared"}
    devs = facts(mod)["devices"]
    assert sorted(devs) == ["0", "1", "2"]
    assert devs["2"]["memory_scope"] == "shared"


def test_call_result_may_alias_argument():
    """A module function may return its argument: the caller's result keeps it alive."""
    y = Var("y", struct_info=X)
    ident = Function((y,), SeqExpr((), y), X, is_pure=True)
    x = Var("x", struct_info=X)
    lb = Lowered()
    a = lb.op("a", "relu", [x], (4, 8))
    r = lb.bind("r", Call(GlobalVar("ident"), (a,), struct_info=X))
    b = lb.op("b", "relu", [x], (4, 8))
    c = lb.op("c", "add", [r, b], (4, 8))
    mod = StaticPlanBlockMemory()(module([x], lb.seq(c), extra={"ident": ident}))
    place = placement(mod)
    assert place["a"][1] != place["b"][1]
    check_no_overlap(mod)


def test_check_no_overlap_catches_a_bad_plan():
    mod = StaticPlanBlockMemory()(chain_module())
    # move b onto a's bytes while both are live
    func = mod["main"]
    blocks = []
    for block in func.body.blocks:
        new = []
        for b in block.bindings:
            if b.var.name_hint == "b":
                storage, _, shape, dtype = b.value.args
                b = VarBinding(b.var, Call(b.value.op, (storage, PrimValue(0), shape, dtype), struct_info=b.value.struct_info))
            new.append(b)
        blocks.append(BindingBlock(tuple(new)))
    bad = mod.with_function("main", Function(func.params, SeqExpr(tuple(blocks), func.body.body), is_pure=False))
    with pytest.raises(MemoryPlanError, match="'a'.*'b'.*overlap"):
        check_no_overlap(bad)


def test_check_no_overlap_catches_out_of_arena():
    mod = StaticPlanBlockMemory()(chain_module())
    func = mod["main"]
    blocks = []
    for block in func.body.blocks:
        new = []
        for b in block.bindings:
            if b.var.name_hint == "c":
                storage, _, shape, dtype = b.value.args
                b = VarBinding(b.var, Call(b.value.op, (storage, PrimValue(192), shape, dtype), struct_info=b.value.struct_info))
            new.append(b)
        blocks.append(BindingBlock(tuple(new)))
    bad = mod.with_function("main", Function(func.params, SeqExpr(tuple(blocks), func.body.body), is_pure=False))
    with pytest.raises(MemoryPlanError, match="'c' at offset 192.*256 bytes"):
        check_no_overlap(bad)
