"""Export -> load -> run, and clean failures on broken artifacts."""

import io
import json
import random
import zipfile

import numpy as np
import pytest

import hetvm
from hetvm.errors import ArtifactError
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Kill, Ret, VMFunction
from hetvm.testing.mutations import mutate_json

B = "vm.builtin."
F32 = "float32"


def imm(v):
    return ("i", v)


def r(i):
    return ("r", i)


def hetero_exe():
    """cpu -> sim:1 (exp) -> sim:2 (add) -> cpu, with kills in between."""
    hetvm.device("sim", 1, capacity=None, missing_kernels=())
    hetvm.device("sim", 2, capacity=None, missing_kernels=())
    devices = [{"kind": k, "index": i, "memory_scope": "global"} for k, i in (("cpu", 0), ("sim", 1), ("sim", 2))]
    instrs = [
        Call(1, B + "copy_to", (r(0), imm(1))),
        Call(2, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(1))),
        KernelCall("exp", {}, 1, (r(1), r(2)), 1),
        Kill(1),
        Call(3, B + "copy_to", (r(2), imm(2))),
        Kill(2),
        Call(4, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(2))),
        KernelCall("add", {}, 2, (r(3), r(3), r(4)), 1),
        Call(7, B + "copy_to", (r(4), imm(0))),
        Ret(7),
    ]
    info = {"kind": "tensor", "shape": [4], "dtype": F32, "device": 0}
    return Executable(devices, [], {"main": VMFunction("main", ["x"], [info], 8, instrs, {})})



def exe_with_constants():
    exe = hetero_exe()
    main = exe.functions["main"]
    instrs = list(main.instructions[:-1]) + [
        Call(8, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(7), ("c", 0), r(8)), 1, names=("y", "bias", "out")),
        Ret(8),
    ]
    f = VMFunction("main", main.params, main.param_info, 9, instrs, {"n": [1, None]})
    return Executable(exe.devices, [np.arange(4, dtype=F32), np.eye(2, dtype="int64")],
                      {"main": f}, {"memory_plan": {"sim:1": 16}, "note": "kept as is"})  # fmt: skip


def test_export_load_run_gives_same_outputs(tmp_path):
    exe = exe_with_constants()
    path = tmp_path / "model.hetvm"
    exe.export(str(path))
    loaded = hetvm.load_module(str(path))
    assert loaded.metadata == exe.metadata
    assert loaded.to_json() == exe.to_json()
    x = np.array([0.0, 0.5, -1.0, 2.0], F32)
    want = hetvm.VirtualMachine(exe)["main"](x).numpy()
    got = hetvm.VirtualMachine(loaded)["main"](x).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(want, 2 * np.exp(x) + np.arange(4), rtol=1e-6)


def rewrite(path, out, program=None, manifest=None, keep_checksums=False):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    if program is not None:
        members["executable.json"] = program
    man = json.loads(members["manifest.json"])
    if manifest is not None:
        man.update(manifest)
    if program is not None and not keep_checksums:
        import hashlib

        man["files"]["executable.json"] = {"size": len(program), "sha256": hashlib.sha256(program).hexdigest()}
    members["manifest.json"] = json.dumps(man).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "good.hetvm"
    exe_with_constants().export(str(path))
    return path


def test_garbage_truncated_and_missing_files(tmp_path, artifact):
    bad = tmp_path / "garbage.hetvm"
    bad.write_bytes(b"definitely not an artifact" * 10)
    with pytest.raises(ArtifactError, match="not a hetvm artifact"):
        hetvm.load_module(str(bad))
    data = artifact.read_bytes()
    short = tmp_path / "short.hetvm"
    short.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError):
        hetvm.load_module(str(short))
    with pytest.raises(ArtifactError, match="no such file"):
        hetvm.load_module(str(tmp_path / "absent.hetvm"))


def test_tampered_program_fails_the_checksum(tmp_path, artifact):
    with zipfile.ZipFile(artifact) as zf:
        program = zf.read("executable.json")
    evil = program.replace(b'"add"', b'"sub"')
    out = tmp_path / "tampered.hetvm"
    rewrite(artifact, out, program=evil, keep_checksums=True)
    with pytest.raises(ArtifactError, match="checksum mismatch in 'executable.json'"):
        hetvm.load_module(str(out))


def test_wrong_version_and_bad_structure(tmp_path, artifact):
    out = tmp_path / "v99.hetvm"
    rewrite(artifact, out, manifest={"format_version": 99})
    with pytest.raises(ArtifactError, match="format version 99; this hetvm reads version 1"):
        hetvm.load_module(str(out))
    with zipfile.ZipFile(artifact) as zf:
        program = json.loads(zf.read("executable.json"))
    program["functions"][0]["instructions"][0]["args"][0] = ["r", 999]  # register out of range
    out = tmp_path / "badreg.hetvm"
    rewrite(artifact, out, program=json.dumps(program).encode())
    with pytest.raises(ArtifactError, match="register 999 out of range"):
        hetvm.load_module(str(out))
    program["functions"][0]["instructions"][0] = {"op": "Goto", "offset": 10_000}
    rewrite(artifact, out, program=json.dumps(program).encode())
    with pytest.raises(ArtifactError, match="jump target"):
        hetvm.load_module(str(out))


def test_absurd_declared_sizes_are_rejected_before_reading(tmp_path, artifact):
    out = tmp_path / "huge.hetvm"
    with zipfile.ZipFile(artifact) as zf:
        man = json.loads(zf.read("manifest.json"))
    man["files"]["constants.npz"]["size"] = 1 << 60
    rewrite(artifact, out, manifest={"files": man["files"]})
    with pytest.raises(ArtifactError, match="absurd size"):
        hetvm.load_module(str(out))
    # a constant whose .npy header claims a gigantic shape
    with zipfile.ZipFile(artifact) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    inner = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["constants.npz"])) as src, zipfile.ZipFile(inner, "w") as dst:
        for n in src.namelist():
            blob = src.read(n)
            if n == "c0.npy":
                old = b"(4,), }" + b" " * 9
                assert old in blob
                blob = blob.replace(old, b"(9999999999,), }")  # same header length
            dst.writestr(n, blob)
    import hashlib

    members["constants.npz"] = inner.getvalue()
    man = json.loads(members["manifest.json"])
    man["files"]["constants.npz"] = {"size": len(inner.getvalue()), "sha256": hashlib.sha256(inner.getvalue()).hexdigest()}
    members["manifest.json"] = json.dumps(man).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    with pytest.raises(ArtifactError, match=r"constant c\[0\] declares 39999999996 bytes"):
        hetvm.load_module(str(out))


def test_random_corruption_raises_only_artifact_error(tmp_path, artifact):
    data = artifact.read_bytes()
    original = hetvm.load_module(str(artifact)).to_json()
    rng = random.Random(1234)
    target = tmp_path / "fuzz.hetvm"
    outcomes = {"error": 0, "ok": 0}
    for trial in range(300):
        blob = bytearray(data)
        if trial % 3 == 0:
            blob = blob[: rng.randrange(len(blob))]
        else:
            for _ in range(rng.randint(1, 4)):
                blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(blob))
        try:
            loaded = hetvm.load_module(str(target))
        except ArtifactError:
            outcomes["error"] += 1
            continue
        # a flip in bytes no check covers (e.g. a timestamp) must not change the program
        assert loaded.to_json() == original
        outcomes["ok"] += 1
    assert outcomes["error"] > 250


def test_a_scalar_constant_survives_export_and_load(tmp_path):
    """Found by the export property: np.ascontiguousarray made the 0-d constant
    of `x + 1.0` a (1,) array, so the artifact failed its own load check
    ("constant c[0] is (1,) float32, declared () float32"). On sim the same
    call made a 0-d host array 1-d on its way to the device."""
    from hetvm.script import from_source

    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((), dtype="float32")) -> R.Tensor((), dtype="float32"):
        lv: R.Tensor((), dtype="float32") = R.add(x, R.const(1.0, "float32"))
        return lv
''')
    path = tmp_path / "scalar.hvm"
    from hetvm.runtime.artifact import export_executable, load_module

    export_executable(hetvm.build(mod), path)
    exe = load_module(path)
    assert exe.constants[0].shape == ()
    out = hetvm.VirtualMachine(exe)["main"](np.float32(2.0))
    assert out.numpy().shape == () and out.numpy() == np.float32(3.0)
    on_sim = hetvm.nd.array(np.float32(2.5), hetvm.device("sim", 0))
    assert on_sim.shape == () and on_sim.copyto(hetvm.cpu(0)).numpy() == np.float32(2.5)


def test_edited_and_rehashed_program_fails_only_with_hetvm_errors(tmp_path, artifact):
    """An executable.json edited and re-hashed passes the checksum; the bytecode
    validation behind it (and the VM, if it loads) must then fail with a hetvm
    error, never a KeyError/TypeError from deep inside."""
    with zipfile.ZipFile(artifact) as zf:
        program = json.loads(zf.read("executable.json"))
    rng = random.Random(11)
    x = np.array([0.0, 0.5, -1.0, 2.0], F32)
    outcomes = {"refused": 0, "ran": 0}
    for _ in range(300):
        doc = json.loads(json.dumps(program))
        for _ in range(rng.randint(1, 3)):
            doc = mutate_json(doc, rng)
        target = tmp_path / "edited.hetvm"
        rewrite(artifact, target, program=json.dumps(doc).encode())
        try:
            vm = hetvm.VirtualMachine(hetvm.load_module(str(target)))
            vm["main"](x)
            outcomes["ran"] += 1
        except hetvm.HetvmError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 150, outcomes
