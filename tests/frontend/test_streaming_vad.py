"""A stateful streaming model: an LSTM voice-activity detector built like Silero VAD
(an audio chunk, the sample rate and the LSTM's h/c state in; a speech probability
and the new state out; the rate picks one of two LSTM branches inside an ``If``).
Run chunk after chunk with the state carried from each call to the next, it
matches ONNX Runtime on every chunk, and the VM's memory does not grow after the
first call: the same peak, the same bytes in use between calls, the same pool.

The first call reads its state from NumPy arrays (not the VM's pool); every later
one reads the previous call's results, which the caller still holds while the
call runs, so from the second call on the peak is the plan's predicted peak plus
those carried bytes, exactly, on every call."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetvm  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

F = TensorProto.FLOAT
FRAMES, FRAME, FEATURES, HIDDEN = 4, 16, 8, 16  # a chunk of 64 samples = 4 frames of 16


def _lstm_branch(name: str, rng: np.random.Generator) -> onnx.GraphProto:
    """An LSTM over the chunk's frames reading the outer ``feat``, ``h`` and ``c``;
    outputs the last hidden state and the new (h, c)."""
    inits = {
        f"{name}_W": rng.normal(0, 0.4, (1, 4 * HIDDEN, FEATURES)),
        f"{name}_R": rng.normal(0, 0.4, (1, 4 * HIDDEN, HIDDEN)),
        f"{name}_B": rng.normal(0, 0.1, (1, 8 * HIDDEN)),
    }
    nodes = [
        helper.make_node("LSTM", ["feat", f"{name}_W", f"{name}_R", f"{name}_B", "", "h", "c"],
                         ["", f"{name}_hn", f"{name}_cn"], name=f"{name}_lstm", hidden_size=HIDDEN),  # fmt: skip
        helper.make_node("Identity", [f"{name}_hn"], [f"{name}_h_out"]),
        helper.make_node("Identity", [f"{name}_cn"], [f"{name}_c_out"]),
    ]
    outs = [helper.make_tensor_value_info(f"{name}_{k}_out", F, [1, 1, HIDDEN]) for k in ("h", "c")]
    init = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()]
    return helper.make_graph(nodes, name, [], outs, init)


def vad_model(seed: int = 0) -> onnx.ModelProto:
    """input [1, 64], sr (int64 scalar), h, c [1, 1, 16] -> output [1, 1], hn, cn."""
    rng = np.random.default_rng(seed)
    inits = {
        "frames_shape": np.array([FRAMES, 1, FRAME], np.int64),
        "filters": rng.normal(0, 0.5, (FRAME, FEATURES)).astype(np.float32),
        "one": np.array(1.0, np.float32),
        "rate_16k": np.array(16000, np.int64),
        "flat": np.array([1, HIDDEN], np.int64),
        "dec_w": rng.normal(0, 0.5, (HIDDEN, 1)).astype(np.float32),
        "dec_b": np.array([0.1], np.float32),
    }
    nodes = [
        # features: log(1 + |frames @ filters|)
        helper.make_node("Reshape", ["input", "frames_shape"], ["frames"]),
        helper.make_node("MatMul", ["frames", "filters"], ["spec"]),
        helper.make_node("Abs", ["spec"], ["mag"]),
        helper.make_node("Add", ["mag", "one"], ["mag1"]),
        helper.make_node("Log", ["mag1"], ["feat"]),
        helper.make_node("Equal", ["sr", "rate_16k"], ["is_16k"]),
        helper.make_node("If", ["is_16k"], ["hn", "cn"], name="rate",
                         then_branch=_lstm_branch("k16", rng), else_branch=_lstm_branch("k8", rng)),  # fmt: skip
        helper.make_node("Reshape", ["hn", "flat"], ["h_flat"]),
        helper.make_node("Relu", ["h_flat"], ["h_relu"]),
        helper.make_node("MatMul", ["h_relu", "dec_w"], ["logit0"]),
        helper.make_node("Add", ["logit0", "dec_b"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "vad",
        [helper.make_tensor_value_info("input", F, [1, FRAMES * FRAME]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, []),
         helper.make_tensor_value_info("h", F, [1, 1, HIDDEN]),
         helper.make_tensor_value_info("c", F, [1, 1, HIDDEN])],
        [helper.make_tensor_value_info("output", F, [1, 1]),
         helper.make_tensor_value_info("hn", F, [1, 1, HIDDEN]),
         helper.make_tensor_value_info("cn", F, [1, 1, HIDDEN])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _audio(chunks: int, seed: int = 1) -> np.ndarray:
    """Noise with bursts of a tone, so the probability moves."""
    rng = np.random.default_rng(seed)
    t = np.arange(chunks * FRAMES * FRAME) / 16000
    tone = np.sin(2 * np.pi * 440 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0)
    return (0.1 * rng.normal(size=t.size) + tone).astype(np.float32).reshape(chunks, 1, FRAMES * FRAME)


def _memory(vm: hetvm.VirtualMachine) -> dict:
    report = vm.memory_report()["cpu:0"]
    keys = ("peak_bytes", "bytes_in_use", "reserved_bytes", "segments", "high_water_bytes")
    return {k: report[k] for k in keys}


def _stream(chunks: int) -> None:
    model = vad_model()
    ort = onnxruntime_or_fail()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    exe = hetvm.build(from_onnx(model), target="llvm")
    predicted = exe.memory_plan()["main"][0]["predicted_peak_bytes"]
    vm = hetvm.VirtualMachine(exe, hetvm.cpu())
    run = vm["main"]
    audio = _audio(chunks)
    h = hetvm.nd.array(np.zeros((1, 1, HIDDEN), np.float32))
    c = hetvm.nd.array(np.zeros((1, 1, HIDDEN), np.float32))
    h_ref = c_ref = np.zeros((1, 1, HIDDEN), np.float32)
    steady: dict | None = None
    carried = 0
    probs = []
    for i in range(chunks):
        rate = 8000 if (i // 25) % 4 == 3 else 16000  # the else branch now and then
        sr = np.array(rate, np.int64)
        prob, h, c = run(hetvm.nd.array(audio[i]), hetvm.nd.array(sr), h, c)
        p_ref, h_ref, c_ref = sess.run(None, {"input": audio[i], "sr": sr, "h": h_ref, "c": c_ref})
        np.testing.assert_allclose(prob.numpy(), p_ref, rtol=1e-4, atol=1e-5, err_msg=f"chunk {i}")
        np.testing.assert_allclose(h.numpy(), h_ref, rtol=1e-4, atol=1e-5, err_msg=f"chunk {i}")
        np.testing.assert_allclose(c.numpy(), c_ref, rtol=1e-4, atol=1e-5, err_msg=f"chunk {i}")
        probs.append(float(p_ref.reshape(-1)[0]))
        memory = _memory(vm)
        assert memory["peak_bytes"] == predicted + carried, f"chunk {i}: {memory}, predicted {predicted}"
        carried = memory["bytes_in_use"]  # the results the caller now holds: prob, h, c
        assert carried == sum(a.numpy().nbytes for a in (prob, h, c))
        if i == 1:
            steady = memory
        elif i > 1:
            assert memory == steady, f"memory changed at chunk {i}"
    # the state really carries something: the probability moves with the audio
    assert np.ptp(probs) > 0.05


def test_streaming_vad_50_chunks_matches_onnxruntime_without_memory_growth():
    _stream(50)


@pytest.mark.slow
def test_streaming_vad_1000_chunks_matches_onnxruntime_without_memory_growth():
    _stream(1000)
