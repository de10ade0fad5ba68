"""The ``hetvm`` commands end to end, through ``hetvm.cli.main`` (exit codes, output)."""

from __future__ import annotations

import numpy as np
import pytest

from hetvm.cli import main

pytest.importorskip("onnx")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_runs_on_sim_and_cpu_and_shows_the_copy(capsys):
    code, out, err = run_cli(capsys, "demo", "--plain")
    assert code == 0, err
    assert "Device copies" in out and "Memory per device" in out
    assert "sim:0 -> cpu:0: 1 copy" in out
    assert "nn.softmax" in out
    rows = [line for line in out.splitlines() if line.startswith(("sim:0 ", "cpu:0 "))]
    assert len(rows) == 2  # both devices hold memory


def test_run_reports_outputs_and_memory_on_cpu(capsys, demo_onnx):
    code, out, err = run_cli(capsys, "run", demo_onnx, "--plain")
    assert code == 0, err
    assert "probs" in out and "(2, 10)" in out
    assert "single device" in out
    assert "cpu:0" in out


def test_run_takes_a_thread_budget(capsys, demo_onnx):
    code, out, err = run_cli(capsys, "run", demo_onnx, "--plain", "--threads", "1")
    assert code == 0, err
    assert "(vm, 1 thread)" in out
    with pytest.raises(SystemExit) as info:
        main(["run", demo_onnx, "--threads", "0"])
    assert info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_run_with_input_file_and_saved_outputs(capsys, demo_onnx, tmp_path):
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    saved = tmp_path / "out.npz"
    code, out, err = run_cli(capsys, "run", demo_onnx, "--input", f"image={tmp_path / 'x.npy'}",
                             "--save-outputs", str(saved), "--plain")  # fmt: skip
    assert code == 0, err
    probs = np.load(saved)["probs"]
    assert probs.shape == (2, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # the same input on sim:0 + cpu gives the same result
    saved2 = tmp_path / "out2.npz"
    code, _, err = run_cli(capsys, "run", demo_onnx, "--input", f"image={tmp_path / 'x.npy'}",
                           "--devices", "sim:0,cpu", "--missing-kernel", "sim:0=nn.softmax",
                           "--save-outputs", str(saved2), "--plain")  # fmt: skip
    assert code == 0, err
    np.testing.assert_allclose(np.load(saved2)["probs"], probs, rtol=1e-5, atol=1e-6)


def test_place_op_type_on_cpu_makes_copies(capsys, demo_onnx):
    code, out, err = run_cli(capsys, "explain", demo_onnx, "--devices", "sim:0,cpu",
                             "--place", "Softmax=cpu", "--plain")  # fmt: skip
    assert code == 0, err
    assert "sim:0 -> cpu:0: 1 copy" in out


def test_place_node_name_pins_that_node(capsys, demo_onnx):
    code, out, err = run_cli(capsys, "explain", demo_onnx, "--devices", "sim:0,cpu",
                             "--place", "relu2=cpu", "--plain")  # fmt: skip
    assert code == 0, err
    assert "sim:0 -> cpu:0" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--place", "NoSuchOp=cpu", "--devices", "sim:0,cpu"], "NoSuchOp=cpu:0: matches no op type"),
        (["--place", "Softmax=cuda:3", "--devices", "sim:0,cpu"], "not in --devices"),
        (["--devices", "tpu:0"], "unknown device 'tpu:0'"),
        (["--input", "nope=x.npy"], "--input 'nope': the model has no such input"),
        (["--input", "image"], "expected NAME=VALUE"),
    ],
)
def test_bad_arguments_are_one_line_errors(capsys, demo_onnx, argv, needle):
    code, out, err = run_cli(capsys, "run", demo_onnx, "--plain", *argv)
    assert code == 1
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("array", "needle"),
    [
        (np.zeros((2, 3, 32, 32), np.float64), "dtype float64, the model expects (2, 3, 32, 32) float32"),
        (np.zeros((1, 3, 32, 32), np.float32), "shape (1, 3, 32, 32), the model expects"),
        (np.zeros((3, 32, 32), np.float32), "shape (3, 32, 32)"),
    ],
)
def test_wrong_input_shape_or_dtype(capsys, demo_onnx, tmp_path, array, needle):
    np.save(tmp_path / "x.npy", array)
    code, _, err = run_cli(capsys, "run", demo_onnx, "--input", f"image={tmp_path / 'x.npy'}", "--plain")
    assert code == 1
    assert "input 'image'" in err and needle in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("kind", "needle"), [("text", "not an ONNX model"),
                                              ("truncated", "not an ONNX model or truncated"),
                                              ("invalid", "invalid ONNX model")])  # fmt: skip
def test_bad_model_files(capsys, bad_files, kind, needle):
    code, _, err = run_cli(capsys, "run", bad_files[kind], "--plain")
    assert code == 1
    assert needle in err and bad_files[kind] in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_file_and_debug_traceback(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", str(tmp_path / "absent.onnx"))
    assert code == 1 and "no such file" in err
    with pytest.raises(Exception, match="no such file"):
        main(["run", str(tmp_path / "absent.onnx"), "--debug"])


def test_plan_memory_table_and_plot(capsys, demo_onnx, tmp_path):
    png = tmp_path / "memory.png"
    code, out, err = run_cli(capsys, "plan", demo_onnx, "--memory", "--devices", "sim:0,cpu",
                             "--missing-kernel", "sim:0=nn.softmax", "--plot", str(png), "--plain")  # fmt: skip
    assert code == 0, err
    assert "lower bound" in out and "measured peak" in out
    assert "order: " in out  # what the memory-aware order did (or that it kept the given one)
    assert "sim:0: tensor by tensor, peak 160.00 KiB with kills, 224.41 KiB without kills" in out
    pytest.importorskip("matplotlib")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_show_text_dot_svg(capsys, demo_onnx, tmp_path):
    code, out, err = run_cli(capsys, "show", demo_onnx, "--format", "text")
    assert code == 0, err
    assert "def main(" in out and "R.nn.conv2d" in out and "<elided" in out
    code, out, err = run_cli(capsys, "show", demo_onnx, "--format", "dot", "--devices", "sim:0,cpu",
                             "--missing-kernel", "sim:0=nn.softmax")  # fmt: skip
    assert code == 0, err
    assert out.startswith('digraph "main"') and "shape=diamond" in out and "sim:0" in out
    svg = tmp_path / "g.svg"
    code, out, err = run_cli(capsys, "show", demo_onnx, "--format", "svg", "--builtin-layout",
                             "--devices", "sim:0,cpu", "--missing-kernel", "sim:0=nn.softmax",
                             "-o", str(svg))  # fmt: skip
    assert code == 0, err
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    assert "copy" in svg.read_text()


SCRIPT = '''from hetvm.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.multiply(x, x)
            z = R.nn.softmax(y, axis=-1)
            R.output(z)
        return z
'''


def test_tvmscript_model_runs_across_devices(capsys, tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    code, out, err = run_cli(capsys, "run", str(path), "--devices", "sim:0,cpu",
                             "--missing-kernel", "sim:0=nn.softmax", "--plain")  # fmt: skip
    assert code == 0, err
    assert "sim:0 -> cpu:0: 1 copy, 128 B" in out
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    code, _, err = run_cli(capsys, "show", str(bad))
    assert code == 1 and f"{bad}:1:" in err and len(err.strip().splitlines()) == 1


def test_graph_executor_gives_the_vm_result(capsys, demo_onnx, tmp_path):
    x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    outs, rows = [], []
    for executor in ("vm", "graph"):
        saved = tmp_path / f"{executor}.npz"
        code, out, err = run_cli(capsys, "run", demo_onnx, "--executor", executor, "--devices", "sim:0,cpu",
                                 "--missing-kernel", "sim:0=nn.softmax", "--input", f"image={tmp_path / 'x.npy'}",
                                 "--save-outputs", str(saved), "--plain")  # fmt: skip
        assert code == 0, err
        assert "configured without a kernel for 'nn.softmax'" in out
        assert "no memory statistics" not in out  # both executors report their memory
        outs.append(np.load(saved)["probs"])
        table = out[out.index("Memory per device"):]
        rows.append(next(line.split() for line in table.splitlines() if line.startswith("sim:0")))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)
    # both show the build's plan (no reuse, lower bound, planned, predicted peak)
    assert rows[0][1:9] == rows[1][1:9] and "-" not in rows[1][1:9], rows


def test_missing_kernel_names_a_hetvm_op_and_repeat_is_positive(capsys, demo_onnx):
    """An ONNX op type after --missing-kernel configured nothing, silently (the
    model then ran wholly on sim:0); now it is an error with hetvm's names."""
    code, _, err = run_cli(capsys, "run", demo_onnx, "--devices", "sim:0,cpu",
                           "--missing-kernel", "sim:0=Softmax", "--plain")  # fmt: skip
    assert code == 1 and "'Softmax' is not a hetvm op" in err and "nn.softmax" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as info:
        main(["run", demo_onnx, "--repeat", "0"])
    assert info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_plan_prints_formulas_for_symbolic_dims_and_who_is_outside(capsys, bert_onnx):
    code, out, err = run_cli(capsys, "plan", bert_onnx, "--dim", "batch=2", "--dim", "sequence=8", "--plain")
    assert code == 0, err
    assert "plan:     cpu:0 (bytes, in batch, sequence): planned " in out
    assert "lower bound max(" in out and "x batch x sequence" in out
    assert "outside:  cpu:0: 1 tensor not in the plan (returned)" in out


def test_plan_fit_answers_the_largest_dim_per_device(capsys, bert_onnx):
    code, out, err = run_cli(capsys, "plan", bert_onnx, "--fit", "1MiB", "--dim", "sequence=64", "--plain")
    assert code == 0, err
    assert "Largest dims that fit 1.00 MiB (sequence=64)" in out
    row = next(line for line in out.splitlines() if line.startswith("batch"))
    largest = int(row.split()[2].replace(",", ""))
    import hetvm
    from hetvm.frontend import from_onnx
    from hetvm.runtime.plan_queries import need_at

    exe = hetvm.build(from_onnx(bert_onnx), target="llvm")
    assert need_at(exe, {"batch": largest, "sequence": 64})[0] <= 1 << 20
    assert need_at(exe, {"batch": largest + 1, "sequence": 64})[0] > 1 << 20


def test_bound_makes_the_plan_static_and_a_bad_bound_is_an_error(capsys, bert_onnx):
    code, out, err = run_cli(capsys, "plan", bert_onnx, "--bound", "batch=4", "--bound", "sequence=16",
                             "--dim", "batch=2", "--dim", "sequence=8", "--plain")  # fmt: skip
    assert code == 0, err
    assert "plan:     cpu:0" not in out  # no formulas: sized for the bounds
    code, out, err = run_cli(capsys, "plan", bert_onnx, "--bound", "seq=4", "--plain")
    assert code != 0 and "has no symbolic dim 'seq'; its dims are batch, sequence" in err
