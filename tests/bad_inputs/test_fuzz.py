"""Fuzzing the script parser and the artifact loader: whatever the input, nothing
but a HetvmError subclass may come out (a bug elsewhere shows as any other type).

Inputs are bounded (a few kilobytes of text, one small artifact), so no case can
hang; ``HETVM_LONG=1 HETVM_FUZZ_FACTOR=50`` runs many more examples.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tempfile
import warnings
import zipfile

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import hetvm
from hetvm.errors import ArtifactError, HetvmError
from hetvm.pipeline import lower
from hetvm.script import from_source

from .conftest import CONSTANTS, HERE, MANIFEST, PROGRAM, fuzz_settings

VALID = ["call_target.tvmscript", "artifact_source.tvmscript"]
MAX_TEXT = 16_000


def _bases() -> list[str]:
    texts = [(HERE / "scripts" / name).read_text() for name in VALID]
    mod = from_source(texts[0])
    texts.append(mod.script())  # as the printer writes it
    texts.append(lower(mod).script())  # lowered: builtins, packed calls, storage
    texts.append((HERE / "scripts" / "tuple_pinned_twice.tvmscript").read_text())
    return texts


BASES = _bases()
TOKEN = re.compile(r"\w+|\s+|\S")
VOCAB = sorted({t for text in BASES for t in TOKEN.findall(text) if not t.isspace()})


@st.composite
def mutated_scripts(draw) -> str:
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["token", "line", "bytes", "vocab"]))
        if kind == "line":
            lines = text.splitlines(keepends=True)
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(["delete", "duplicate", "swap"]))
            if op == "delete":
                del lines[i]
            elif op == "duplicate":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
        elif kind in ("token", "vocab"):
            tokens = TOKEN.findall(text)
            if not tokens:
                continue
            i = draw(st.integers(0, len(tokens) - 1))
            j = draw(st.integers(0, len(tokens) - 1))
            if kind == "vocab":
                tokens[i] = draw(st.sampled_from(VOCAB))
            else:
                op = draw(st.sampled_from(["delete", "duplicate", "swap"]))
                if op == "delete":
                    del tokens[i]
                elif op == "duplicate":
                    tokens.insert(j, tokens[i])
                else:
                    tokens[i], tokens[j] = tokens[j], tokens[i]
            text = "".join(tokens)
        else:
            at = draw(st.integers(0, len(text)))
            junk = draw(st.binary(min_size=1, max_size=12)).decode("latin-1")
            text = text[:at] + junk + text[at:]
    return text[:MAX_TEXT]


def _parse(text: str) -> None:
    try:
        with warnings.catch_warnings():  # ast.parse warns on odd literals
            warnings.simplefilter("ignore", SyntaxWarning)
            mod = from_source(text, filename="fuzz.tvmscript")
    except HetvmError:
        return
    mod.script()  # what parses also prints


@fuzz_settings(150)
@given(mutated_scripts())
def test_parser_on_mutated_modules(text):
    _parse(text)


@fuzz_settings(50)
@given(st.text(max_size=400) | st.binary(max_size=400).map(lambda b: b.decode("latin-1")))
def test_parser_on_random_text(text):
    _parse(text)


# -- artifacts ------------------------------------------------------------------


def _good_artifact() -> bytes:
    exe = hetvm.build(from_source((HERE / "scripts" / "artifact_source.tvmscript").read_text()))
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/good.hetvm"
        exe.export(path)
        with open(path, "rb") as f:
            return f.read()


GOOD = _good_artifact()


def _json_paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _json_paths(v, path + (i,))


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**6]),
    st.text(max_size=12),
    st.sampled_from(["r", "c", "f", "i", "Call", "KernelCall", "Kill", "Ret", "Goto", "If", "float32", "tensor"]),
    st.lists(st.integers(-3, 3), max_size=3),
    st.just({}),
)


@st.composite
def damaged_artifacts(draw) -> bytes:
    kind = draw(st.sampled_from(["flip", "truncate", "json", "member"]))
    data = bytearray(GOOD)
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    members = read_members_from(bytes(data))
    if kind == "json":  # a structural edit with the checksums made right again
        name = draw(st.sampled_from([PROGRAM, MANIFEST]))
        doc = json.loads(members[name])
        for _ in range(draw(st.integers(1, 3))):
            paths = list(_json_paths(doc))
            path = draw(st.sampled_from(paths[1:]))
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            op = draw(st.sampled_from(["set", "delete"]))
            if op == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(JSON_VALUES)
        members[name] = json.dumps(doc).encode()
        return _zip(members, checksums=name != MANIFEST)
    # a member replaced by random bytes (checksums right, so the parsers behind see it)
    name = draw(st.sampled_from([PROGRAM, CONSTANTS, MANIFEST]))
    blob = bytearray(members[name])
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(blob) - 1))
        blob[i] = draw(st.integers(0, 255))
    members[name] = bytes(blob)
    return _zip(members, checksums=name != MANIFEST)


def read_members_from(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _zip(members: dict[str, bytes], checksums: bool) -> bytes:
    buf = io.BytesIO()
    if checksums:
        manifest = json.loads(members[MANIFEST])
        for name in (PROGRAM, CONSTANTS):
            manifest["files"][name] = {"size": len(members[name]), "sha256": hashlib.sha256(members[name]).hexdigest()}
        members = {**members, MANIFEST: json.dumps(manifest).encode()}
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return buf.getvalue()


@fuzz_settings(200)
@given(damaged_artifacts())
def test_loader_on_damaged_artifacts(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "damaged.hetvm"
    path.write_bytes(data)
    try:
        exe = hetvm.load_module(path)
    except ArtifactError:
        return
    # it loaded: whatever it says, running it may fail only with hetvm's errors
    try:
        vm = hetvm.VirtualMachine(exe)
        vm["main"](np.ones((2, 3), "float32"))
    except HetvmError:
        pass
