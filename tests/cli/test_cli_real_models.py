"""``hetvm run`` on a BERT-style export: symbolic dims, token ids, masks (issue 15)."""

from __future__ import annotations

import numpy as np
import pytest

from hetvm.cli import main

onnx = pytest.importorskip("onnx")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bert_like_runs_with_no_flag_and_says_which_dims_it_chose(capsys, bert_onnx, tmp_path):
    saved = tmp_path / "out.npz"
    code, out, err = run_cli(capsys, "run", bert_onnx, "--plain", "--save-outputs", str(saved))
    assert code == 0, err
    assert "dim 'batch' = 1 (default for a batch dim; set with --dim batch=N)" in out
    assert "dim 'sequence' = 8 (default; set with --dim sequence=N)" in out
    assert "input_ids: random (1, 8) int64 in [0, 30) (indices of Gather node 'word_embedding'" in out
    assert "token_type_ids: random (1, 8) int64 in [0, 2)" in out
    assert "attention_mask: random (1, 8) int64 0/1 mask" in out
    hidden = np.load(saved)["last_hidden_state"]
    assert hidden.shape == (1, 8, 8) and np.isfinite(hidden).all()


@pytest.mark.parametrize("devices", ["cpu", "sim:0,cpu"])
def test_inputs_take_their_shapes_from_the_arrays_and_match_numpy(capsys, bert_onnx, tmp_path, devices):
    from hetvm.testing.bert_like import reference

    rng = np.random.default_rng(3)
    ids = rng.integers(0, 30, size=(2, 5)).astype(np.int64)
    types = rng.integers(0, 2, size=(2, 5)).astype(np.int64)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int64)
    for name, arr in (("ids", ids), ("types", types), ("mask", mask)):
        np.save(tmp_path / f"{name}.npy", arr)
    saved = tmp_path / "out.npz"
    code, out, err = run_cli(
        capsys, "run", bert_onnx, "--plain", "--devices", devices, "--save-outputs", str(saved),
        "--input", f"input_ids={tmp_path / 'ids.npy'}", "--input", f"token_type_ids={tmp_path / 'types.npy'}",
        "--input", f"attention_mask={tmp_path / 'mask.npy'}",
    )  # fmt: skip
    assert code == 0, err
    assert f"dim 'sequence' = 5 (from --input input_ids={tmp_path / 'ids.npy'})" in out
    want = reference(ids, types, mask, onnx.load(bert_onnx))
    np.testing.assert_allclose(np.load(saved)["last_hidden_state"], want, rtol=1e-4, atol=1e-5)


def test_dim_and_shape_set_the_symbolic_dims(capsys, bert_onnx):
    code, out, err = run_cli(capsys, "run", bert_onnx, "--plain", "--dim", "batch=3", "--dim", "sequence=6")
    assert code == 0, err
    assert "dim 'batch' = 3 (--dim batch=3)" in out and "(3, 6, 8)" in out
    # one --shape fixes the dims it names for every input that shares them
    code, out, err = run_cli(capsys, "run", bert_onnx, "--plain", "--shape", "input_ids=2x4")
    assert code == 0, err
    assert "dim 'sequence' = 4 (--shape input_ids=2x4)" in out
    assert "attention_mask: random (2, 4) int64 0/1 mask" in out and "(2, 4, 8)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dim", "seq=3"], "--dim seq: the model has no such symbolic dim (its dims: 'batch', 'sequence')"),
        (["--dim", "batch=two"], "--dim batch=two: expected a non-negative integer"),
        (["--shape", "input_ids=2x4", "--shape", "attention_mask=3x4"],
         "--shape attention_mask=3x4: dim 'batch' is 3 here but 2 in --shape input_ids=2x4"),
        (["--shape", "input_ids=2x4x1"], "--shape input_ids: 3 dim(s) given, the model's input has rank 2"),
    ],
)  # fmt: skip
def test_bad_dims_are_one_line_errors(capsys, bert_onnx, argv, message):
    code, _, err = run_cli(capsys, "run", bert_onnx, "--plain", *argv)
    assert code == 1
    assert err.strip() == f"hetvm: error: {message}"


def test_dim_given_twice_by_an_input_and_by_dim_is_refused(capsys, bert_onnx, tmp_path):
    np.save(tmp_path / "ids.npy", np.zeros((2, 3), np.int64))
    code, _, err = run_cli(capsys, "run", bert_onnx, "--plain", "--dim", "batch=4",
                           "--input", f"input_ids={tmp_path / 'ids.npy'}")  # fmt: skip
    assert code == 1
    assert "--dim batch=4: --input input_ids=" in err and "makes it 2" in err


@pytest.mark.parametrize("executor", ["vm", "graph"])
def test_a_kernel_failing_in_the_run_names_the_onnx_node_and_its_inputs(capsys, bert_onnx, tmp_path, executor):
    np.save(tmp_path / "types.npy", np.full((2, 3), 2, np.int64))  # the token-type table has 2 rows
    shapes = [a for k in ("input_ids", "attention_mask") for a in ("--shape", f"{k}=2x3")]
    code, _, err = run_cli(capsys, "run", bert_onnx, "--plain", "--executor", executor, *shapes,
                           "--input", f"token_type_ids={tmp_path / 'types.npy'}")  # fmt: skip
    assert code == 1, err
    assert "ONNX node 'token_type_embedding' (Gather; inputs 'token_type_embeddings', 'token_type_ids')" in err
    assert err.rstrip().endswith("IndexError: index 2 is out of bounds for axis 0 with size 2")
