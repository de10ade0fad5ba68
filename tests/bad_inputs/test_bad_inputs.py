"""The bad-input corpus (CASES below): every case raises its hetvm error, saying what and where."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import hetvm
from hetvm import errors
from hetvm.script import from_source

from .conftest import HERE, MUTATIONS

# The corpus: each case names an input, the hetvm error type it must raise
# (exactly that class) and fragments its message must contain.
# Inputs: `script` (a file under scripts/, parsed; with stage="build" also built),
# `artifact` (a mutation from conftest.py applied to an export of
# scripts/artifact_source.tvmscript), `onnx` (a file under onnx/), `call` (the
# arguments handed to main of `script`: shape, dtype, and `device` for an NDArray
# placed there; plain NumPy otherwise; main(x: (2, n) f32, w: (n, 4) f32 on sim:0)).
# Where: a script error names `file:line:`, an artifact or ONNX error its file,
# a call error the function.
CASES: list[dict] = [
    # -- malformed scripts
    dict(id='syntax_error', script='syntax_error.tvmscript', line=5, error='ParseError', message=['invalid Python syntax']),
    dict(id='unknown_op', script='unknown_op.tvmscript', line=5, error='ParseError', message=["unknown op 'R.frobnicate'"]),
    dict(id='wrong_arity', script='wrong_arity.tvmscript', line=5, error='ParseError', message=['R.add(lhs, rhs)', "missing a required argument: 'rhs'"]),
    dict(id='too_many_arguments', script='too_many_arguments.tvmscript', line=5, error='ParseError', message=['R.exp(data)', 'too many positional arguments']),
    dict(id='undefined_variable', script='undefined_variable.tvmscript', line=5, error='ParseError', message=["undefined variable 'z'"]),
    dict(id='undefined_function', script='undefined_function.tvmscript', line=6, error='ParseError', message=["no function 'helper'"]),
    dict(id='struct_info_mismatch', script='struct_info_mismatch.tvmscript', line=5, error='ParseError', message=["struct info mismatch for 'y'", 'Tensor((2, 3), float32)', 'Tensor((3, 2), float32)']),
    dict(id='return_mismatch', script='return_mismatch.tvmscript', line=5, error='ParseError', message=['the function returns Tensor((2, 3), float32)', 'Tensor((2, 3), int32)']),
    dict(id='attrs_not_data', script='attrs_not_data.tvmscript', line=4, error='ParseError', message=["I.module_attrs['copies'][0]['line'] is Namespace, not plain data"]),
    dict(id='two_modules', script='two_modules.tvmscript', line=8, error='ParseError', message=['exactly one @I.ir_module class']),
    # -- ill-typed programs
    dict(id='matmul_shape_mismatch', script='matmul_shape_mismatch.tvmscript', line=5, error='ParseError', message=["op 'matmul'", 'inner dimensions differ', '(2, 3)', '(4, 5)']),
    dict(id='broadcast_mismatch', script='broadcast_mismatch.tvmscript', line=5, error='ParseError', message=["op 'add'", '(2, 3) and (4,) cannot be broadcast']),
    dict(id='dtype_mismatch', script='dtype_mismatch.tvmscript', line=5, error='ParseError', message=["op 'add'", 'float32', 'int32']),
    # -- devices
    dict(id='undeclared_vdevice', script='undeclared_vdevice.tvmscript', line=5, error='ParseError', message=["vdevice 'cuda:0:global' is not declared", 'llvm, sim']),
    dict(id='undeclared_hint_device', script='undeclared_hint_device.tvmscript', stage='build', line=7, error='DevicePlanError', message=["'y'", 'names vdevice sim:3', 'not declared', 'cpu:0, sim:0']),
    dict(id='conflicting_pins', script='conflicting_pins.tvmscript', stage='build', line=7, error='DevicePlanError', message=["'b'", 'cannot satisfy both constraints', 'wants sim:0', "without a kernel for 'nn.softmax'"]),
    dict(id='tuple_pinned_twice', script='tuple_pinned_twice.tvmscript', stage='build', line=7, error='DevicePlanError', message=["value 's'", 'cannot satisfy both constraints', 'wants cpu:0', 'wants sim:0']),
    # -- artifacts
    dict(id='artifact_truncated_half', artifact='truncated_half', error='ArtifactError', message=['not a hetvm artifact', 'truncated']),
    dict(id='artifact_truncated_tail', artifact='truncated_tail', error='ArtifactError', message=['truncated']),
    dict(id='artifact_empty_file', artifact='empty_file', error='ArtifactError', message=['not a hetvm artifact']),
    dict(id='artifact_not_a_zip', artifact='not_a_zip', error='ArtifactError', message=['not a zip archive']),
    dict(id='artifact_flipped_byte', artifact='flipped_program_byte', error='ArtifactError', message=['corrupted', 'executable.json']),
    dict(id='artifact_tampered', artifact='tampered_program', error='ArtifactError', message=["checksum mismatch in 'executable.json'", 'tampered']),
    dict(id='artifact_wrong_version', artifact='manifest_wrong_version', error='ArtifactError', message=['artifact format version 99', 'reads version 1']),
    dict(id='artifact_wrong_format', artifact='manifest_wrong_format', error='ArtifactError', message=['not a hetvm artifact (bad manifest)']),
    dict(id='artifact_program_wrong_version', artifact='program_wrong_version', error='ArtifactError', message=['program format version 0, expected 1']),
    dict(id='artifact_absurd_manifest_size', artifact='manifest_absurd_size', error='ArtifactError', message=["absurd size for 'executable.json'", '4611686018427387904']),
    dict(id='artifact_absurd_member_size', artifact='member_absurd_size', error='ArtifactError', message=["member 'executable.json' declares 4294967280 bytes", 'limit']),
    dict(id='artifact_absurd_constant_shape', artifact='constant_absurd_shape', error='ArtifactError', message=['constant c[0] declares 4398046511104 bytes but holds']),
    dict(id='artifact_object_constant', artifact='constant_object_dtype', error='ArtifactError', message=['constant c[0]', 'unsupported dtype object']),
    dict(id='artifact_constant_count', artifact='constant_count', error='ArtifactError', message=['holds 1 arrays, the program declares 2']),
    dict(id='artifact_bad_register', artifact='bad_register', error='ArtifactError', message=['invalid executable', "function 'main', pc 0", 'register 1000000 out of range']),
    dict(id='artifact_extra_member', artifact='extra_member', error='ArtifactError', message=['unexpected members', 'payload.py']),
    dict(id='artifact_compressed_member', artifact='compressed_member', error='ArtifactError', message=['is compressed', 'stored uncompressed']),
    # -- call time (main(x: (2, n) float32, w: (n, 4) float32 on sim:0))
    dict(id='call_too_few_inputs', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}], error='HetvmRuntimeError', message=["function 'main' takes 2 argument(s) (x, w), given 1"]),
    dict(id='call_too_many_inputs', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}, {'shape': [3, 4], 'dtype': 'float32'}, {'shape': [1], 'dtype': 'float32'}], error='HetvmRuntimeError', message=['takes 2 argument(s)', 'given 3']),
    dict(id='call_wrong_dimension', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}, {'shape': [3, 5], 'dtype': 'float32'}], error='HetvmRuntimeError', message=["parameter 'w'", 'dimension 1', 'expected 4, given 5']),
    dict(id='call_inconsistent_symbolic_dimension', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}, {'shape': [5, 4], 'dtype': 'float32'}], error='HetvmRuntimeError', message=["parameter 'w'", 'dimension 0', 'expected n = 3', 'given 5']),
    dict(id='call_wrong_rank', script='call_target.tvmscript', call=[{'shape': [6], 'dtype': 'float32'}, {'shape': [3, 4], 'dtype': 'float32'}], error='HetvmRuntimeError', message=["parameter 'x'", 'expected 2 dimension(s)', 'given 1']),
    dict(id='call_wrong_dtype', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float64'}, {'shape': [3, 4], 'dtype': 'float32'}], error='HetvmRuntimeError', message=["parameter 'x'", 'expected dtype float32, given float64']),
    dict(id='call_wrong_dtype_ndarray', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}, {'shape': [3, 4], 'dtype': 'int32', 'device': 'sim:0'}], error='HetvmRuntimeError', message=["parameter 'w'", 'expected dtype float32, given int32']),
    dict(id='call_wrong_device', script='call_target.tvmscript', call=[{'shape': [2, 3], 'dtype': 'float32'}, {'shape': [3, 4], 'dtype': 'float32', 'device': 'cpu:0'}], error='DeviceMismatchError', message=["parameter 'w'", 'is on cpu:0', 'expects it on sim:0']),
    # -- ONNX
    dict(id='onnx_truncated', onnx='truncated.onnx', error='FrontendError', message=['not an ONNX model or truncated']),
    dict(id='onnx_dangling_input', onnx='dangling_input.onnx', error='FrontendError', message=['invalid ONNX model', 'nowhere']),
    dict(id='onnx_no_nodes', onnx='no_nodes.onnx', error='FrontendError', message=['no graph nodes']),
    dict(id='onnx_broadcast_mismatch', onnx='broadcast_mismatch.onnx', error='FrontendError', message=["Add node 'add_bias'", '(2, 3) and (4,) cannot be broadcast']),
    dict(id='onnx_unsupported_ops', onnx='unsupported_ops.onnx', error='FrontendError', message=['3 unsupported ONNX operator(s)', 'Bernoulli (opset 17)', 'com.example.Frobnicate (opset 1)', 'com.example.Twiddle (opset 1)']),
]
_built: dict[str, object] = {}


def _script(name: str) -> tuple[str, str]:
    path = HERE / "scripts" / name
    return path.read_text(), str(path)


def _executable(name: str):
    if name not in _built:
        text, path = _script(name)
        _built[name] = hetvm.build(from_source(text, filename=path))
    return _built[name]


def _argument(spec: dict):
    value = np.ones(spec["shape"], spec["dtype"])
    if "device" not in spec:
        return value
    return hetvm.nd.array(value, hetvm.device(spec["device"]))


def _run(case: dict, tmp_path: pathlib.Path) -> str | None:
    """Feeds the case's input to hetvm; returns the text that says where, if any."""
    if "call" in case:
        vm = hetvm.VirtualMachine(_executable(case["script"]))
        vm["main"](*[_argument(spec) for spec in case["call"]])
        return None
    if "script" in case:
        text, path = _script(case["script"])
        mod = from_source(text, filename=path)
        if case.get("stage") == "build":
            hetvm.build(mod)
        return None
    if "artifact" in case:
        good, bad = tmp_path / "good.hetvm", tmp_path / f"{case['artifact']}.hetvm"
        _executable("artifact_source.tvmscript").export(str(good))
        hetvm.load_module(good)  # the undamaged file loads
        MUTATIONS[case["artifact"]](good, bad)
        hetvm.load_module(bad)
        return None
    if "onnx" in case:
        from hetvm.frontend import from_onnx

        from_onnx(str(HERE / "onnx" / case["onnx"]))
        return None
    raise AssertionError(f"case {case['id']} names no input")


def _where(case: dict, tmp_path: pathlib.Path) -> str | None:
    if "call" in case:
        return "function 'main'"
    if "script" in case:
        return f"{HERE / 'scripts' / case['script']}:{case['line']}:"
    if "artifact" in case:
        return str(tmp_path / f"{case['artifact']}.hetvm")
    return str(HERE / "onnx" / case["onnx"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused(case, tmp_path):
    want = getattr(errors, case["error"])
    with pytest.raises(errors.HetvmError) as info:
        _run(case, tmp_path)
    err = info.value
    assert type(err) is want, f"{case['id']}: raised {type(err).__name__}, want {want.__name__}: {err}"
    text = str(err)
    for fragment in case["message"] + [_where(case, tmp_path)]:
        assert fragment in text, f"{case['id']}: {fragment!r} not in the message:\n{text}"


def test_every_corpus_file_is_used():
    used = {c.get("script") for c in CASES} | {c.get("onnx") for c in CASES} | {"artifact_source.tvmscript"}
    files = {p.name for p in (HERE / "scripts").iterdir()} | {p.name for p in (HERE / "onnx").iterdir()}
    assert files <= used, f"corpus files without a case: {sorted(files - used)}"
    assert {c["artifact"] for c in CASES if "artifact" in c} == set(MUTATIONS)
