"""The value analysis (hetvm.analysis.values): locations, points-to, summaries, owners."""

from hetvm.analysis.values import CONST_LOC, LocKind, analyze_values, result_vars
from hetvm.script import from_source
from hetvm.testing.ir_query import variables_by_name as _vars


def _names(locs):
    return sorted(f"{loc.kind.value}:{loc.var.name_hint if loc.var is not None else ''}" for loc in locs)


LOWERED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((6,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        arena: R.Any = R.memory.alloc_storage(R.shape([48]), 0, R.str("global"), R.dtype("uint8"))
        a: R.Tensor((2, 3), dtype="float32") = R.memory.alloc_tensor(arena, 0, R.shape([2, 3]), R.dtype("float32"))
        R.call_packed("kernel.exp", x, a, num_outputs=1, ty_args=(R.Tuple,))
        v: R.Tensor((6,), dtype="float32") = R.call_packed("vm.builtin.reshape", a, R.shape([6]), ty_args=(R.Tensor((6,), dtype="float32"),))
        o: R.Tensor((6,), dtype="float32") = R.call_packed("my_func", v, x, ty_args=(R.Tensor((6,), dtype="float32"),))
        return o
'''


def test_allocations_views_and_opaque_calls():
    func = from_source(LOWERED)["main"]
    facts = analyze_values(func)
    v = _vars(func)
    assert _names(facts.of(v["arena"])) == ["alloc:arena"]
    assert _names(facts.of(v["a"])) == ["alloc:a"]  # carved: a tensor of its own
    assert facts.of(v["v"]) == facts.of(v["a"])  # a view is its source's bytes
    # an undeclared packed function may return any argument, or bytes of its own
    assert _names(facts.of(v["o"])) == ["alloc:a", "alloc:o", "param:x"]
    assert _names(facts.escaping()) == ["alloc:a", "alloc:o", "param:x"]
    assert facts.owner(v["v"]) is v["a"] and facts.owner(v["o"]) is v["o"]


CALLS = '''
@I.ir_module
class Module:
    @R.function
    def identity(p: R.Tensor((2,), dtype="float32"), q: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return p

    @R.function
    def constant(p: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return R.const([1.0, 2.0], "float32")

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        a = R.exp(x)
        b = R.negative(x)
        c = cls.identity(a, b)
        d = cls.constant(b)
        t = (a, b)
        e = t[1]
        return R.add(c, d)
'''


def test_module_function_summaries():
    mod = from_source(CALLS)
    func = mod["main"]
    facts = analyze_values(func, mod, "main")
    v = _vars(func)
    assert analyze_values(mod["identity"], mod).summary().returned_params == {0}
    assert analyze_values(mod["constant"], mod).summary().may_return_constant
    # the callee returns its first argument, never its second
    assert _names(facts.of(v["c"])) == ["alloc:a", "alloc:c"]
    assert CONST_LOC in facts.of(v["d"]) and not any(loc.kind is LocKind.PARAM for loc in facts.of(v["d"]))
    # without the module, a call may return any argument
    blind = analyze_values(func)
    assert _names(blind.of(v["c"])) == ["alloc:a", "alloc:b", "alloc:c"]


def test_tuple_fields_are_tracked_one_by_one():
    mod = from_source(CALLS)
    func = mod["main"]
    facts = analyze_values(func, mod)
    v = _vars(func)
    assert facts.of(v["e"]) == facts.of(v["b"])
    assert facts.owner(v["e"]) is v["b"]  # a field of a literal tuple is that variable's object
    assert isinstance(facts.points_to[v["t"]], tuple)


def test_a_recursive_summary_is_the_least_fixpoint():
    # f returns f(p, c) or a fresh exp(p): never a parameter (the old guess, "any
    # parameter may come back", kept a loop's inputs alive until the caller returned)
    src = '''
@I.ir_module
class Module:
    @R.function
    def f(p: R.Tensor((2,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        if c:
            r = cls.f(p, c)
        else:
            r = R.exp(p)
        return r
'''
    mod = from_source(src)
    summary = analyze_values(mod["f"], mod, "f").summary()
    assert summary.returned_params == frozenset()


LOOP = '''
@I.ir_module
class Module:
    @R.function
    def loop(i: R.Tensor((), dtype="int64"), acc: R.Tensor((2,), dtype="float32"), w: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        c = R.less(i, R.const(3, "int64"))
        if c:
            a = R.add(acc, w)
            j = R.add(i, R.const(1, "int64"))
            r = cls.loop(j, a, w)
            out = r
        else:
            out = acc
        return out

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        w = R.exp(x)
        y = cls.loop(R.const(0, "int64"), x, w)
        z = R.add(y, x)
        return z
'''


def test_a_loop_returns_its_accumulator_and_passes_its_carried_values_on():
    mod = from_source(LOOP)
    facts = analyze_values(mod["loop"], mod, "loop")
    assert facts.summary().returned_params == {1}  # acc, not the counter or w
    v = _vars(mod["loop"])
    # what the loop passes to its next iteration outlives this one (the VM makes
    # the tail call after the frame is gone): the counter too, which no one returns
    assert facts.loc_of[v["j"]] in facts.escaping()
    assert facts.loc_of[v["a"]] in facts.escaping()
    # the caller's w is not returned by the loop: main may release it after the call
    main = analyze_values(mod["main"], mod, "main")
    vm_ = _vars(mod["main"])
    assert main.loc_of[vm_["w"]] not in main.escaping()
    assert main.loc_of[vm_["w"]] not in main.of(vm_["y"])


def test_if_results_and_result_vars():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")):
        lv = R.tanh(x)
        if c:
            lv1 = R.negative(lv)
            lv2 = lv1
        else:
            lv2 = lv
        t = (lv2, x)
        return t
'''
    func = from_source(src)["main"]
    facts = analyze_values(func)
    v = _vars(func)
    assert _names(facts.of(v["lv2"])) == ["alloc:lv", "alloc:lv1"]
    assert _names(facts.escaping()) == ["alloc:lv", "alloc:lv1", "param:x"]
    assert result_vars(func.body) == {v["t"], v["lv2"], v["x"]}


def test_a_declared_view_builtin_is_an_alias_for_every_analysis():
    """A new view builtin is its declaration (plus its implementations): the value
    analysis, the liveness analysis and KillAfterLastUse follow it."""
    from hetvm.op import effects as fx
    from hetvm.transform import KillAfterLastUse

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((6,), dtype="float32"):
        a = R.exp(x)
        v: R.Tensor((6,), dtype="float32") = R.call_packed("testing.flat_view", a, ty_args=(R.Tensor((6,), dtype="float32"),))
        b = R.negative(x)
        c = R.add(v, R.reshape(b, R.shape([6])))
        return c
'''
    mod = from_source(src)
    func = mod["main"]
    names = _vars(func)
    opaque = analyze_values(func)
    assert opaque.of(names["v"]) != opaque.of(names["a"])  # undeclared: may be anything
    fx.declare_builtin("testing.flat_view", fx.VIEW)
    try:
        facts = analyze_values(func)
        assert facts.of(names["v"]) == facts.of(names["a"]) and facts.owner(names["v"]) is names["a"]
        body = KillAfterLastUse()(mod)["main"].body
        kills = [(b.value.op.name, b.value.args[0].name_hint) for blk in body.blocks for b in blk.bindings
                 if getattr(b.value.op, "name", "").startswith(("memory.kill", "vm.kill"))]
        # the view's register is cleared and its root killed after the view's last read
        assert kills[-3:] == [("vm.kill_object", "v"), ("memory.kill_tensor", "a"), ("memory.kill_tensor", "lv")]
    finally:
        fx.BUILTIN_EFFECTS.pop("testing.flat_view")


def test_owners_of_a_long_chain_of_views_cost_linear_work(monkeypatch):
    """InplaceElementwise turns an n-op element-wise chain into n views of one
    buffer; asking every view's owner walked the chain each time (quadratic: a
    10,000-add chain did not build in 500 s). Counted, not timed."""
    from hetvm.analysis.values import FunctionValues

    n = 400
    lines = [f'        v{i + 1}: R.Tensor((6,), dtype="float32") = R.call_packed("vm.builtin.reshape", v{i}, '
             f'R.shape([6]), ty_args=(R.Tensor((6,), dtype="float32"),))' for i in range(n)]  # fmt: skip
    src = LOWERED.split("        v: R.Tensor")[0].replace("a: R.Tensor((2, 3)", "v0: R.Tensor((2, 3)")
    src = src.replace('R.call_packed("kernel.exp", x, a,', 'R.call_packed("kernel.exp", x, v0,')
    func = from_source(src + "\n".join(lines) + f"\n        return v{n}\n")["main"]
    facts = analyze_values(func)
    steps = []
    real = FunctionValues._same_object
    monkeypatch.setattr(FunctionValues, "_same_object", lambda self, value: steps.append(1) or real(self, value))
    v = _vars(func)
    assert all(facts.owner(v[f"v{i}"]) is v["v0"] for i in range(n, -1, -1))
    assert len(steps) <= 2 * (n + 1)
