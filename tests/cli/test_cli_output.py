"""What a person reads: 80 columns, legends, the model's names, idle devices, bad .npy files."""

from __future__ import annotations

import numpy as np
import pytest

from hetvm.cli import main
from hetvm.cli_support.console import Table, short_bytes

onnx = pytest.importorskip("onnx")


def _lines(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.parametrize("plain", [False, True], ids=["rich", "plain"])
def test_demo_fits_80_columns_and_explains_its_figures(capsys, monkeypatch, plain):
    monkeypatch.setenv("COLUMNS", "80")
    code, lines, err = _lines(capsys, "demo", *(["--plain"] if plain else []))
    assert code == 0, err
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long
    text = "\n".join(lines)
    # headings are never cut inside a word ("predict / ed peak")
    assert all("predicted" in line for line in lines if "predict" in line)
    # the output as the model names it, and the copy in the model's tensor and node names
    assert any(line.split()[:1] == ["probs"] for line in lines), text
    assert "logits1" not in text and "probs1" not in text
    row = next(line for line in lines if line.split()[:2] == ["1", "logits"])
    assert "fc (Gemm)" in row
    # the CPU's predicted peak exceeds its arena by the output, which is outside the plan
    cpu = next(line.split() for line in lines if line.startswith("cpu:0"))
    assert cpu[1:9] == ["80", "B"] * 4 and cpu[9:13] == ["160", "B"] * 2
    assert "outside: tensors outside the plan (results, which outlive the call" in text.replace("\n  ", " ")
    # every heading reads as one phrase on one line at 80 columns
    assert any("lower bound" in line and "predicted peak" in line and "measured peak" in line for line in lines)


def test_plain_table_wraps_long_cells_to_the_width():
    t = Table("T", ["name", "reason"])
    t.add("a", "word " * 30)
    lines = t.plain(width=40).splitlines()
    assert max(map(len, lines)) <= 40 and len(lines) > 4
    assert " ".join(" ".join(line.split()[1:]) for line in lines[3:]).split() == ["word"] * 29 or \
        sum(line.count("word") for line in lines) == 30  # fmt: skip
    assert short_bytes(229792) == "224 KiB" and short_bytes(3928576) == "3.75 MiB" and short_bytes(80) == "80 B"


def _chain_model(path, layers: int) -> str:
    """x -> (MatMul -> Softmax) x layers: softmax in every layer, as in attention."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Softmax", [f"h{i}"], [f"s{i}"], name=f"sm{i}", axis=-1))
        x = f"s{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, 16])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_explain_says_when_the_accelerator_ends_up_idle_and_why(capsys, tmp_path):
    model = _chain_model(tmp_path / "chain.onnx", 4)
    code, lines, err = _lines(capsys, "explain", model, "--devices", "sim:0,cpu",
                              "--missing-kernel", "sim:0=nn.softmax", "--plain")  # fmt: skip
    assert code == 0, err
    text = " ".join(" ".join(lines).split())
    assert "note: sim:0 runs only 1 of 8 kernel calls" in text
    assert "sim:0 has no kernel for nn.softmax (4 calls)" in text
    # an explicit pin of every MatMul elsewhere: no kernel at all, and the pin is the reason
    code, lines, err = _lines(capsys, "explain", model, "--devices", "sim:0,cpu", "--place", "MatMul=cpu", "--plain")
    assert code == 0, err
    text = " ".join(" ".join(lines).split())
    assert "sim:0 runs no kernel" in text and "--place MatMul=cpu" in text


def test_explain_is_quiet_when_the_accelerator_does_the_work(capsys, demo_onnx):
    code, lines, err = _lines(capsys, "explain", demo_onnx, "--devices", "sim:0,cpu",
                              "--missing-kernel", "sim:0=nn.softmax", "--plain")  # fmt: skip
    assert code == 0, err
    assert not [line for line in lines if line.startswith("note:")]


def _npy(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _object_npy() -> bytes:
    """A .npy whose header declares dtype object, written by hand (no pickle anywhere)."""
    import io

    buf = io.BytesIO()
    header = {"descr": "|O", "fortran_order": False, "shape": (1,)}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + b"\x00" * 16


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"just some text\n", "not a .npy file (it does not start with NumPy's magic string)"),
        (_object_npy(), "holds Python objects (dtype object)"),
        (_npy(np.ones((2, 3, 32, 32), np.float32))[:200], "truncated: the header says (2, 3, 32, 32) float32"),
        (_npy(np.ones(3))[:30], "damaged .npy header"),
        (b"PK\x03\x04" + b"\x00" * 40, "is a .npz archive"),
    ],
    ids=["text", "object", "truncated-data", "truncated-header", "npz"],
)
def test_a_malformed_npy_input_is_a_clear_error_never_about_pickle(capsys, demo_onnx, tmp_path, content, needle):
    bad = tmp_path / "x.npy"
    bad.write_bytes(content)
    code, _, err = _lines(capsys, "run", demo_onnx, "--input", f"image={bad}", "--plain")
    assert code == 1 and needle in err and str(bad) in err, err
    assert "pickle" not in err.replace("never unpickles", "") and len(err.strip().splitlines()) == 1
