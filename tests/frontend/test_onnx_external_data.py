"""ONNX external data: read from the model's directory, from any current directory,
and never from outside it."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetvm  # noqa: E402
from hetvm.errors import FrontendError  # noqa: E402

W = np.arange(8, dtype="float32").reshape(2, 4)


def _model(location: str | None = None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(W, "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if location is not None:  # point w at an external file by hand
        t = model.graph.initializer[0]
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", str(W.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    return model


def _saved(directory, location="w.bin"):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.onnx"
    onnx.save_model(_model(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)
    return path


def _run(path_or_model):
    mod = hetvm.frontend.from_onnx(path_or_model)
    x = np.ones((2, 4), "float32")
    return hetvm.VirtualMachine(hetvm.build(mod))["main"](x).numpy()


def test_external_data_is_read_from_the_models_directory_from_any_cwd(tmp_path, monkeypatch):
    path = _saved(tmp_path / "models")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "w.bin").write_bytes(np.full(8, 99, "float32").tobytes())  # a decoy in the cwd
    monkeypatch.chdir(elsewhere)
    np.testing.assert_array_equal(_run(str(path)), W + 1)
    monkeypatch.chdir(tmp_path / "models")
    np.testing.assert_array_equal(_run("model.onnx"), W + 1)  # a relative model path


def test_a_link_inside_the_directory_to_a_file_inside_it_is_read(tmp_path):
    (tmp_path / "m" / "data").mkdir(parents=True)
    path = _saved(tmp_path / "m", location="data/w.bin")
    os.rename(tmp_path / "m" / "data" / "w.bin", tmp_path / "m" / "real.bin")
    (tmp_path / "m" / "data" / "w.bin").symlink_to(tmp_path / "m" / "real.bin")
    np.testing.assert_array_equal(_run(str(path)), W + 1)


@pytest.mark.parametrize("location, match", [
    ("/etc/passwd", "an absolute path"),
    ("../secret.bin", r"outside the model's directory \('..'\)"),
    ("sub/../../secret.bin", r"outside the model's directory \('..'\)"),
])
def test_locations_outside_the_directory_are_refused(tmp_path, location, match):
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "model.onnx"
    onnx.save_model(_model(location), str(path))
    with pytest.raises(FrontendError, match=match) as info:
        hetvm.frontend.from_onnx(str(path))
    assert "tensor 'w'" in str(info.value) and location in str(info.value)


def test_a_symlink_escaping_the_directory_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").symlink_to(tmp_path / "secret.bin")
    path = tmp_path / "m" / "model.onnx"
    onnx.save_model(_model("w.bin"), str(path))
    with pytest.raises(FrontendError, match="resolves outside the model's directory"):
        hetvm.frontend.from_onnx(str(path))


def test_missing_and_truncated_files_are_clear_errors(tmp_path):
    path = _saved(tmp_path)
    data = (tmp_path / "w.bin").read_bytes()
    (tmp_path / "w.bin").write_bytes(data[:10])
    with pytest.raises(FrontendError, match=r"tensor 'w'.*do not fit in the file's 10 bytes"):
        hetvm.frontend.from_onnx(str(path))
    os.remove(tmp_path / "w.bin")
    with pytest.raises(FrontendError, match=r"tensor 'w' keeps its data in external file 'w.bin': no such file"):
        hetvm.frontend.from_onnx(str(path))


def test_a_length_that_does_not_match_the_tensor_is_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(W.tobytes() * 2)
    model = _model("w.bin")
    model.graph.initializer[0].external_data[2].value = str(2 * W.nbytes)
    onnx.save_model(model, str(tmp_path / "model.onnx"))
    with pytest.raises(FrontendError, match=r"64 bytes, but a float tensor of shape \(2, 4\) needs 32"):
        hetvm.frontend.from_onnx(str(tmp_path / "model.onnx"))


def test_a_model_without_a_directory_cannot_have_external_data(tmp_path):
    path = _saved(tmp_path)
    model = onnx.load(str(path), load_external_data=False)
    with pytest.raises(FrontendError, match="tensor 'w' keeps its data in external file 'w.bin'.*pass the model's path"):
        hetvm.frontend.from_onnx(model)
    np.testing.assert_array_equal(_run(onnx.load(str(path))), W + 1)  # onnx.load read it already
