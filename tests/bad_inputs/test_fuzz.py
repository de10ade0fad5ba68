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
import pytest
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


# -- the ONNX importer ----------------------------------------------------------

# node cases of the onnx package used as the models to damage: small, and
# between them conv/pool windows, shapes, splits, gathers and constant folding
_ONNX_BASES = ("test_conv_with_strides_padding", "test_maxpool_2d_pads", "test_averagepool_2d_same_upper",
               "test_maxpool_1d_default", "test_split_equal_parts_default_axis_opset18",
               "test_split_variable_parts_2d_opset13", "test_reshape_reordered_all_dims", "test_concat_2d_axis_0",
               "test_gather_0", "test_slice", "test_transpose_all_permutations_0", "test_einsum_transpose",
               "test_gemm_all_attributes", "test_batchnorm_example", "test_softmax_axis_1", "test_expand_dim_changed",
               "test_unsqueeze_two_axes", "test_resize_upsample_scales_nearest", "test_constant_pad",
               "test_where_example", "test_layer_normalization_2d_axis0", "test_reduce_mean_keepdims_example",
               "test_tile", "test_flatten_axis1", "test_clip", "test_cast_FLOAT_to_FLOAT16")  # fmt: skip


def _onnx_bases() -> list:
    """The base models (collecting the onnx package's cases takes ~3 s once)."""
    if not _BASES_CACHE:
        pytest.importorskip("onnx")
        from onnx.backend.test.case.node import collect_testcases

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # the package computes its expected outputs
            models = {case.name: case.model for case in collect_testcases(None) if case.name in _ONNX_BASES}
        _BASES_CACHE.extend(models[n] for n in _ONNX_BASES if n in models)
    return _BASES_CACHE


_BASES_CACHE: list = []


@fuzz_settings(150)
@given(st.integers(0, 2**31 - 1))
def test_importer_on_damaged_onnx_models(seed):
    """A damaged small model (attributes, dims, inputs, op types, initializers,
    dropped nodes) is imported, built and run: whatever happens, only hetvm's
    errors may come out. (This found a 1-value kernel_shape on a 2-D pool,
    Einsum with a bad equation folded by onnx.reference, and Split's
    num_outputs=2**33 building a list of 8 billion sections.)"""
    import copy
    import random

    from hetvm.frontend import from_onnx
    from hetvm.ir import prim as P
    from hetvm.testing.mutations import mutate_onnx

    bases = _onnx_bases()
    rng = random.Random(seed)
    model = copy.deepcopy(rng.choice(bases))
    op_types = sorted({n.op_type for m in bases for n in m.graph.node})
    for _ in range(rng.randint(1, 2)):
        mutate_onnx(model, rng, op_types)
    try:
        mod = from_onnx(model)
        exe = hetvm.build(mod)
        data = np.random.default_rng(seed)
        args = []
        for p in mod["main"].params:
            shape = [int(c) if (c := P.const_value(d)) is not None else 2 for d in p.struct_info.shape or ()]
            args.append(np.asarray(data.standard_normal(shape), p.struct_info.dtype or "float32"))
        with np.errstate(all="ignore"):  # damaged values (a negative variance) are allowed
            hetvm.VirtualMachine(exe)["main"](*args)
    except HetvmError:
        pass

