"""hetvm.explain: one entry per copy, table text, totals per device pair."""

from __future__ import annotations

import hetvm.op as R
from hetvm.explain import ExplainReport, _plain_text, explain
from hetvm.ir import BlockBuilder, Span, TensorStructInfo, Var, VDevice
from hetvm.ir import expr as E

CPU = VDevice("llvm", 0)
SIM = VDevice("sim", 0)


def split_program():
    bb = BlockBuilder()
    x = Var("x", struct_info=TensorStructInfo((8, 8), "float32", vdevice=SIM))
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x), "a")
        b = bb.emit(E.replace(R.nn.softmax(a), span=Span("model.py", 3)), "b")
        c = bb.emit(R.negative(b), "c")
        y = bb.emit(E.replace(R.to_vdevice(c, CPU), span=Span("model.py", 5)), "y")
        bb.emit_func_output(y)
    mod = bb.get()
    mod.global_infos["vdevice"] = [CPU, SIM]
    return mod


def test_report_has_one_entry_per_copy_with_reasons():
    rep = explain(split_program(), default_vdevice=SIM, missing_kernels={"sim:0": ["nn.softmax"]})
    assert [(c["value"], c["src"], c["dst"]) for c in rep.copies] == [("a", "sim:0", "cpu:0")]
    c = rep.copies[0]
    assert c["bytes"] == 256 and c["consumers"] == ["b"] and c["pass"] == "PlanDevices"
    assert "nn.softmax" in c["reason"]
    assert rep.totals == {("sim:0", "cpu:0"): {"copies": 1, "bytes": 256}}


def test_table_text_rich_and_plain():
    rep = explain(split_program(), default_vdevice=SIM, missing_kernels={"sim:0": ["nn.softmax"]})
    for text in (str(rep), _plain_text(rep)):
        assert "sim:0" in text and "cpu:0" in text and "256" in text and "nn.softmax" in text
        assert "1 device copies" in text


def test_explicit_copy_is_reported_as_users():
    rep = explain(split_program(), default_vdevice=SIM)
    assert len(rep.copies) == 1
    assert rep.copies[0]["pass"] == "<input>" and rep.copies[0]["line"] == 5
    assert str(ExplainReport([])) == "no device copies"


def test_module_is_callable_as_function():
    import hetvm.explain as mod_explain

    rep = mod_explain(split_program(), default_vdevice=SIM)
    assert isinstance(rep, ExplainReport)
    assert rep.to_json()["totals"] == [{"src": "sim:0", "dst": "cpu:0", "copies": 1, "bytes": 256}]
