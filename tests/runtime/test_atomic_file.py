"""Exports write through an exclusive temporary file in the target's directory."""

import os
import zipfile

import numpy as np
import pytest

import hetvm
from hetvm.runtime import atomic_file
from hetvm.runtime.atomic_file import write_atomically
from hetvm.script.parser import from_source

SRC = """
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.exp(x)
        return y
"""


def _exe():
    return hetvm.build(from_source(SRC))


def test_a_symlink_at_the_target_is_replaced_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "model.hetvm"
    link.symlink_to(victim)
    _exe().export(str(link))
    assert victim.read_text() == "keep me"
    assert not link.is_symlink() and zipfile.is_zipfile(link)
    out = hetvm.VirtualMachine(hetvm.load_module(str(link)))["main"](np.zeros(4, "float32"))
    np.testing.assert_allclose(out.numpy(), np.ones(4))


def test_a_planted_predictable_temporary_name_is_not_written(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "g.hetvm"
    (tmp_path / f"g.hetvm.tmp-{os.getpid()}").symlink_to(victim)  # the old temporary name
    _exe().export(str(target))
    assert victim.read_text() == "keep me" and zipfile.is_zipfile(target)


@pytest.mark.parametrize("exc", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, exc):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def write(f):
        f.write(b"half")
        raise exc

    with pytest.raises(type(exc)):
        write_atomically(target, write)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_the_temporary_is_created_exclusively_beside_the_target(tmp_path, monkeypatch):
    seen = []
    real = atomic_file.tempfile.mkstemp

    def spy(**kw):
        seen.append(kw)
        return real(**kw)

    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", spy)
    write_atomically(tmp_path / "a.bin", lambda f: f.write(b"x"))
    assert seen and seen[0]["dir"] == str(tmp_path)
    assert (tmp_path / "a.bin").read_bytes() == b"x"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_graph_export_is_atomic_too(tmp_path):
    gm = hetvm.build(from_source(SRC), executor="graph")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "g.hetvmg"
    link.symlink_to(victim)
    gm.export(link)
    assert victim.read_text() == "keep me"
    loaded = hetvm.graph_executor.load_graph(link)
    assert loaded.graph["outputs"] == gm.graph["outputs"]
