"""Bad scripts raise ParseError with file, line, column, the source line and a caret."""

import inspect
import os

import pytest

from hetvm.errors import HetvmError
from hetvm.script import ParseError, from_source
from hetvm.script import ir as I
from hetvm.script import relax as R


def parse_error(body: str, *, header: str = "") -> ParseError:
    text = (
        header
        + "@I.ir_module\nclass Module:\n    @R.function\n"
        + '    def main(x: R.Tensor((4,), "float32"), w: R.Tensor((3,), "float32")):\n'
        + body
    )
    with pytest.raises(ParseError) as info:
        from_source(text, filename="bad.py")
    return info.value


def where(err: ParseError) -> tuple[int, int]:
    return err.line, err.column


def test_unknown_op_suggests_close_names():
    err = parse_error("        y = R.ad(x, x)\n        return y\n")
    assert "unknown op 'R.ad'" in err.raw_message and "did you mean" in err.raw_message
    assert "add" in err.raw_message
    assert where(err) == (5, 12)
    text = str(err)
    assert text.startswith("bad.py:5:13: error: unknown op")
    assert "        y = R.ad(x, x)\n" in text and text.endswith("\n    " + " " * 12 + "^")


def test_unknown_namespaced_op():
    err = parse_error("        y = R.nn.reluu(x)\n        return y\n")
    assert "unknown op 'R.nn.reluu'" in err.raw_message and "nn.relu" in err.raw_message


def test_wrong_arity_names_the_signature():
    err = parse_error("        y = R.add(x)\n        return y\n")
    assert "R.add(lhs, rhs)" in err.raw_message and "rhs" in err.raw_message
    assert where(err) == (5, 12)
    err = parse_error("        y = R.exp(x, x)\n        return y\n")
    assert "R.exp(data)" in err.raw_message


def test_undefined_variable():
    err = parse_error("        y = R.add(x, xx)\n        return y\n")
    assert "undefined variable 'xx'" in err.raw_message and "did you mean x" in err.raw_message
    assert where(err) == (5, 21)


def test_annotation_mismatch_points_at_the_binding():
    err = parse_error('        y: R.Tensor((3,), "float32") = R.add(x, x)\n        return y\n')
    assert "struct info mismatch for 'y'" in err.raw_message
    assert "Tensor((4), float32)" in err.raw_message.replace("(4,)", "(4)")
    assert where(err) == (5, 8)


def test_inference_error_becomes_parse_error_at_the_call():
    err = parse_error("        y = R.add(x, w)\n        return y\n")
    assert "add" in err.raw_message and "broadcast" in err.raw_message
    assert where(err) == (5, 12)


def test_return_annotation_mismatch():
    text = (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((5,), "float32"):\n'
        "        return x\n"
    )
    with pytest.raises(ParseError, match="function returns Tensor") as info:
        from_source(text)
    assert info.value.line == 5


@pytest.mark.parametrize(
    "body, message",
    [
        ("        for i in range(3):\n            pass\n        return x\n", "unsupported Python syntax here: For"),
        ("        y = x @ x\n        return y\n", "unsupported operator MatMult on Relax values"),
        ("        y = x + 1\n        return y\n", "convert 1 with R.const"),
        ("        y = x == x\n        return y\n", "use R.equal"),
        ("        y = lambda: x\n        return y\n", "unsupported Python syntax here: Lambda"),
        ("        a, b = x, x\n        return a\n", "exactly one name"),
        ("        y = R.exp(x)\n", "must end with a return"),
        ("        y = R.match_cast(x, R.Tensor((5,), \"float32\"))\n        return y\n", "can never succeed"),
        ("        y = metadata[\"relax.expr.Constant\"][0]\n        return y\n", "write the constant inline"),
        ("        y = T.int64(3, 4)\n        return y\n", "takes one argument"),
        ("        if x:\n            y = x\n        return y\n", "needs an else"),
        ("        if x:\n            y = x\n        else:\n            z = x\n        return x\n", "same name"),
        ("        with R.dataflow():\n            y = R.exp(x)\n        return x\n", "must end with R.output"),
        ("        with R.dataflow():\n            y = R.exp(x)\n            R.output(q)\n        return x\n", "does not bind"),
        ("        y = R.Tensor((4,), \"float32\")\n        return y\n", "expected a Relax expression"),
        ("        y = R.shape([q])\n        return y\n", "undefined shape variable 'q'"),
        ("        R.func_attr(3)\n        return x\n", "dict literal"),
        ("        y = R.call_packed(\"f\", x, sinfo_args=3)\n        return y\n", "expected struct info"),
    ],
)
def test_semantic_errors(body, message):
    err = parse_error(body)
    assert message in err.raw_message
    assert err.line is not None and err.line >= 5 and err.source_line is not None


def test_undeclared_vdevice():
    text = (
        "@I.ir_module\nclass Module:\n"
        '    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("cuda", 0)]})\n'
        "    @R.function\n"
        '    def main(x: R.Tensor((4,), "float32", "cuda")):\n'
        '        y = R.to_vdevice(x, "cuda:1")\n'
        '        z = R.to_vdevice(x, "sim")\n'
        "        return y\n"
    )
    with pytest.raises(ParseError, match="declares only 1 'cuda' vdevice") as info:
        from_source(text)
    assert info.value.line == 6
    with pytest.raises(ParseError, match="'sim' is not declared"):
        from_source(text.replace('"cuda:1"', '"cuda:0"'))


def test_dataflow_variable_does_not_escape():
    err = parse_error(
        "        with R.dataflow():\n            y = R.exp(x)\n            z = R.exp(y)\n"
        "            R.output(z)\n        return y\n"
    )
    assert "local to its dataflow block" in err.raw_message and err.line == 9


def test_python_syntax_error_has_a_position():
    with pytest.raises(ParseError, match="invalid Python syntax") as info:
        from_source("@I.ir_module\nclass M:\n    def f(x:\n", filename="s.py")
    assert info.value.filename == "s.py" and info.value.line is not None


def test_missing_module_function():
    err = parse_error("        y = cls.nothere(x)\n        return y\n", header="")
    assert "undefined variable 'cls'" in err.raw_message
    text = (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(x: R.Tensor((4,), "float32")):\n'
        "        y = Module.mian(x)\n        return y\n"
        "    @R.function\n"
        '    def main2(x: R.Tensor((4,), "float32")):\n        return x\n'
    )
    with pytest.raises(ParseError, match="no function 'mian'; did you mean main"):
        from_source(text)


def test_recursion_needs_a_return_annotation():
    text = (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def f(x: R.Tensor((4,), "float32")):\n        y = Module.f(x)\n        return y\n'
    )
    with pytest.raises(ParseError, match="annotate its return struct info"):
        from_source(text)
    ok = text.replace('"float32")):', '"float32")) -> R.Tensor((4,), "float32"):')
    mod = from_source(ok)
    assert mod["f"].body.blocks[0].bindings[0].value.op.name_hint == "f"


def test_errors_are_hetvm_errors():
    assert issubclass(ParseError, HetvmError)


def test_nothing_in_the_script_runs(tmp_path):
    marker = tmp_path / "ran"
    evil = f'__import__("os").system("touch {marker}")'
    scripts = [
        f"@I.ir_module\nclass M:\n    @R.function(pure={evil})\n    def f(x: R.Object):\n        return x\n",
        f"@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Object):\n        y = {evil}\n        return y\n",
        f"@I.ir_module\nclass M:\n    I.module_global_infos({evil})\n",
        f"@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Tensor(({evil},))):\n        return x\n",
        f"{evil}\n@I.ir_module\nclass M:\n    pass\n",
    ]
    for text in scripts:
        with pytest.raises(ParseError):
            from_source(text)
    assert not marker.exists()
    assert not os.path.exists(str(marker))


def test_decorator_errors_point_into_this_file():
    with pytest.raises(ParseError) as info:

        @I.ir_module
        class Bad:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                y = R.bogus_op(x)
                return y

    err = info.value
    assert err.filename == __file__
    lines, first = inspect.getsourcelines(test_decorator_errors_point_into_this_file)
    expected = first + next(i for i, s in enumerate(lines) if "R.bogus_op" in s)
    assert err.line == expected
    assert err.source_line.strip() == "y = R.bogus_op(x)"
    assert err.source_line[err.column :].startswith("R.bogus_op")
