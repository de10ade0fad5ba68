"""The liveness analysis (hetvm.analysis.liveness): intervals, branch paths, kill points."""

import pytest

from hetvm.analysis.liveness import analyze_liveness, exclusive
from hetvm.analysis.memory_plan import memory_plan_report
from hetvm.pipeline import default_pipeline, target_vdevice
from hetvm.script import from_source
from hetvm.testing.ir_query import variables_by_name as _vars
from hetvm.transform import Sequential


def _live(src, name="main"):
    mod = from_source(src)
    func = mod[name]
    live = analyze_liveness(func, mod, name)
    return live, _vars(func)


def _loc(live, var):
    return live.values.loc_of[var]


CHAIN = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        a = R.exp(x)
        b = R.negative(a)
        c = R.add(a, b)
        d = R.tanh(c)
        return d
'''


def test_a_chain_lives_from_its_binding_to_its_last_read():
    live, v = _live(CHAIN)
    assert live.intervals[_loc(live, v["a"])] == ((0, 2),)
    assert live.intervals[_loc(live, v["b"])] == ((1, 2),)
    assert live.intervals[_loc(live, v["d"])] == ((3, 4),)  # read by the result (position 4)
    assert live.num_positions == 5
    # kills: after the binding that reads it last; the result is never killed
    assert live.kill_point(v["a"]) == 2 and live.kill_point(v["b"]) == 2 and live.kill_point(v["c"]) == 3
    assert live.kill_point(v["d"]) is None and live.kill_point(v["x"]) is None


BRANCHES = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((4,), dtype="float32"):
        a = R.exp(x)
        if c:
            t = R.negative(a)
            t1 = R.tanh(t)
            r = t1
        else:
            f = R.abs(x)
            r = f
        out = R.add(r, x)
        return out
'''


def test_branches_take_disjoint_ranges_and_exclusive_paths():
    live, v = _live(BRANCHES)
    t, f, t1 = (_loc(live, v[n]) for n in ("t", "f", "t1"))
    # true branch 1..3 (t, t1, its result t1), false branch 4..5, the If at 6
    assert live.intervals[t] == ((1, 2),)
    assert live.intervals[t1] == ((2, 3), (6, 7))  # not live in the false branch
    assert exclusive(live.path[t], live.path[f]) and not exclusive(live.path[t], live.path[t1])
    # a branch's result lives on through the If result's reads
    assert live.intervals[f][-1][1] == live.intervals[t1][-1][1] == 7
    # an outer value read in a branch is read by the whole If
    assert live.intervals[_loc(live, v["a"])] == ((0, 6),)
    assert live.kill_point(v["a"]) == 1  # after the If (binding 1 of the outer frame)
    assert live.kill_point(v["t"]) == 1  # inside the branch, after t1
    assert live.kill_point(v["t1"]) is None  # the branch's result: the outer frame kills r
    assert live.kill_point(v["r"]) == 2


TUPLE_FIELDS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        a = R.exp(x)
        b = R.negative(x)
        t = (a, b)
        u = R.tanh(b)
        e = t[0]
        out = R.add(e, x)
        return out
'''


def test_reading_one_field_of_a_literal_tuple_reads_that_field_only():
    live, v = _live(TUPLE_FIELDS)
    assert live.end(_loc(live, v["b"])) == 3  # not kept alive by t[0] at position 4
    assert live.end(_loc(live, v["a"])) == 5
    assert live.kill_point(v["t"]) == 4  # a tuple's register dies after its own last read



TUPLE_KILLED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        a = R.exp(x)
        b = R.negative(x)
        t = (a, b)
        f = t[1]
        u = R.tanh(f)
        e = t[0]
        R.vm.kill_object(t)
        out = R.add(e, u)
        return out
'''


def test_killing_a_tuple_register_reads_none_of_its_fields():
    """The VM's kill of a tuple clears the register and touches no bytes."""
    live, v = _live(TUPLE_KILLED)
    assert live.end(_loc(live, v["b"])) == 4  # last read by u (as f); the kill at 6 is not one
    assert live.end(_loc(live, v["a"])) == 7  # e is a, read by out


OUTLIVE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        k = R.call_packed("vm.builtin.reshape", R.const([1.0, 2.0], "float32"), R.shape([2]), ty_args=(R.Tensor((2,), dtype="float32"),))
        a = R.exp(x)
        o = R.call_packed("maybe_identity", a, ty_args=(R.Tensor((2,), dtype="float32"),))
        p = R.add(k, x)
        out = R.add(p, o)
        return out
'''


def test_values_that_outlive_the_call_are_never_killed():
    live, v = _live(OUTLIVE)
    assert live.kill_point(v["k"]) is None  # a constant's bytes
    assert live.kill_point(v["a"]) == 4  # o may be a, and o is read by out
    assert live.kill_point(v["p"]) == 4


IF_MAY_BE_OUTER = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((4,), dtype="float32"):
        a = R.exp(x)
        if c:
            t = R.negative(x)
            r = t
        else:
            r = a
        u = R.tanh(r)
        w = R.add(u, a)
        return w
'''


def test_an_if_result_that_may_be_an_outer_value_read_later_is_not_killed():
    """Killing `r` after `a`'s last read would release the branch's own `t` late:
    its bytes may be a later tensor's by then."""
    live, v = _live(IF_MAY_BE_OUTER)
    assert live.kill_point(v["r"]) is None
    assert live.kill_point(v["a"]) == 3  # after w, its last read
    assert live.end(_loc(live, v["t"])) < live.end(_loc(live, v["a"]))


# the callee's result has storage of its own (it is returned): the caller's kill frees it
CALLEE_RESULTS = '''
@I.ir_module
class Module:
    @R.function
    def helper(p: R.Tensor((64,), dtype="float32")) -> R.Tensor((64,), dtype="float32"):
        r = R.exp(p)
        return r

    @R.function
    def main(x: R.Tensor((64,), dtype="float32")) -> R.Tensor((64,), dtype="float32"):
        cls = Module
        a = cls.helper(x)
        b = R.negative(a)
        c = cls.helper(b)
        d = cls.helper(c)
        e = R.add(d, b)
        return e
'''


def _planned_and_lowered(mod):
    passes = default_pipeline(target_vdevice("llvm")).passes
    assert [p.name for p in passes[-2:]] == ["LowerAllocTensor", "KillAfterLastUse"]
    planned = Sequential(passes[:-2])(mod)
    return planned, Sequential(passes[-2:])(planned)


@pytest.mark.parametrize(
    "src",
    [CHAIN, BRANCHES, TUPLE_FIELDS, OUTLIVE, IF_MAY_BE_OUTER, CALLEE_RESULTS],
    ids=["chain", "branches", "tuple_fields", "outlive", "if_may_be_outer", "callee_results"],
)
def test_the_peak_simulation_replays_the_kills_killafterlastuse_inserts(src):
    """Right after planning, the report's simulated peak uses the liveness
    analysis's kill points; after LowerAllocTensor + KillAfterLastUse it follows
    the kills in the IR: the two agree, and neither runs a pass."""
    planned, lowered = _planned_and_lowered(from_source(src))
    assert memory_plan_report(planned) == memory_plan_report(lowered)
