"""Saving and loading executables as one plain-data file (never pickle).

The artifact is a zip archive (stored, not compressed) of three members:

* ``manifest.json`` -- format name, format version, and for each other member
  its size and SHA-256;
* ``executable.json`` -- devices, functions, metadata, constant shapes/dtypes;
* ``constants.npz`` -- the constant pool (``c0.npy``, ``c1.npy`` ...).

``load_module`` trusts nothing: it checks the archive, every declared size
against hard limits *before* reading, the checksums, each ``.npy`` header
against the declared shape and dtype (object arrays are refused), and the
bytecode structure. Anything wrong raises :class:`ArtifactError` saying what.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from typing import Any

import numpy as np

from ..errors import ArtifactError, HetvmError
from .atomic_file import write_atomically
from .bytecode import FORMAT_VERSION, Executable

__all__ = ["export_executable", "load_module", "FORMAT_NAME", "MAX_MEMBER_BYTES"]

FORMAT_NAME = "hetvm-executable"
MANIFEST = "manifest.json"
PROGRAM = "executable.json"
CONSTANTS = "constants.npz"
MAX_MANIFEST_BYTES = 1 << 16
MAX_MEMBER_BYTES = 1 << 32  # 4 GiB per member
MAX_CONSTANTS = 1 << 20


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _constants_bytes(constants: list) -> bytes:
    buf = io.BytesIO()
    arrays = {}
    for i, c in enumerate(constants):
        arr = np.asarray(c, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        if arr.dtype.hasobject or arr.dtype.kind not in "biuf":
            raise ArtifactError(f"constant c[{i}] has unsupported dtype {arr.dtype}")
        arrays[f"c{i}"] = arr
    np.savez(buf, **arrays)
    return buf.getvalue()


def export_executable(exe: Executable, path: str | os.PathLike) -> None:
    """Writes ``exe`` to ``path`` (atomically, see :mod:`.atomic_file`)."""
    try:
        exe.validate()
        program = json.dumps(exe.to_json(), sort_keys=True, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"cannot export: the executable is not plain JSON data ({exc})") from exc
    except HetvmError as exc:
        raise ArtifactError(f"cannot export an invalid executable: {exc}") from exc
    consts = _constants_bytes(exe.constants)
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "files": {
            PROGRAM: {"size": len(program), "sha256": _sha256(program)},
            CONSTANTS: {"size": len(consts), "sha256": _sha256(consts)},
        },
    }

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr(MANIFEST, json.dumps(manifest, sort_keys=True))
            zf.writestr(PROGRAM, program)
            zf.writestr(CONSTANTS, consts)

    write_atomically(path, write)


def load_module(path: str | os.PathLike) -> Executable:
    """Reads and validates an artifact; raises ArtifactError on any defect."""
    path = os.fspath(path)
    try:
        return _load(path)
    except ArtifactError:
        raise
    except HetvmError as exc:  # bytecode structure
        raise ArtifactError(f"{path}: invalid executable: {exc}") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    except Exception as exc:  # a malformed archive can fail in many library ways
        raise ArtifactError(
            f"{path}: corrupted or not a hetvm artifact ({type(exc).__name__}: {exc})"
        ) from None


def _fail(path: str, msg: str) -> ArtifactError:
    return ArtifactError(f"{path}: {msg}")


def _read_member(zf: zipfile.ZipFile, path: str, name: str, limit: int) -> bytes:
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise _fail(path, f"missing member '{name}'") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise _fail(path, f"member '{name}' is compressed; artifacts are stored uncompressed")
    if info.file_size > limit:
        raise _fail(path, f"member '{name}' declares {info.file_size} bytes (limit {limit})")
    with zf.open(info) as f:
        data = f.read(limit + 1)
    if len(data) != info.file_size:
        raise _fail(path, f"member '{name}' is truncated")
    return data


def _load(path: str) -> Executable:
    if not os.path.isfile(path):
        raise _fail(path, "no such file")
    if not zipfile.is_zipfile(path):
        raise _fail(path, "not a hetvm artifact (not a zip archive, or truncated)")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if names != {MANIFEST, PROGRAM, CONSTANTS}:
            raise _fail(
                path,
                f"unexpected members {sorted(names)} (an artifact holds {MANIFEST}, {PROGRAM} "
                f"and {CONSTANTS}; not a hetvm artifact, or truncated)",
            )
        manifest = _parse_json(path, _read_member(zf, path, MANIFEST, MAX_MANIFEST_BYTES), MANIFEST)
        _check_manifest(path, manifest)
        blobs = {}
        for name in (PROGRAM, CONSTANTS):
            entry = manifest["files"][name]
            data = _read_member(zf, path, name, min(MAX_MEMBER_BYTES, entry["size"]))
            if len(data) != entry["size"] or _sha256(data) != entry["sha256"]:
                raise _fail(path, f"checksum mismatch in '{name}' (tampered or corrupted)")
            blobs[name] = data
    program = _parse_json(path, blobs[PROGRAM], PROGRAM)
    if not isinstance(program, dict):
        raise _fail(path, f"'{PROGRAM}' must hold an object")
    if program.get("format_version") != FORMAT_VERSION:
        raise _fail(path, f"program format version {program.get('format_version')!r}, expected {FORMAT_VERSION}")
    declared = program.get("constants")
    if not isinstance(declared, list) or len(declared) > MAX_CONSTANTS:
        raise _fail(path, "'constants' must be a list of {shape, dtype}")
    constants = _load_constants(path, blobs[CONSTANTS], declared)
    return Executable.from_json(program, constants)


def _parse_json(path: str, data: bytes, name: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(path, f"'{name}' is not valid JSON ({exc})") from None


def _check_manifest(path: str, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise _fail(path, "not a hetvm artifact (bad manifest)")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise _fail(
            path, f"artifact format version {version!r}; this hetvm reads version {FORMAT_VERSION}"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != {PROGRAM, CONSTANTS}:
        raise _fail(path, "manifest must list executable.json and constants.npz")
    for name, entry in files.items():
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_MEMBER_BYTES:
            raise _fail(path, f"manifest declares an absurd size for '{name}': {size!r}")
        if not isinstance(digest, str) or len(digest) != 64:
            raise _fail(path, f"manifest has no valid checksum for '{name}'")


def _load_constants(path: str, blob: bytes, declared: list) -> list:
    with zipfile.ZipFile(io.BytesIO(blob)) as inner:
        names = set(inner.namelist())
        want = {f"c{i}.npy" for i in range(len(declared))}
        if names != want:
            raise _fail(path, f"constants.npz holds {len(names)} arrays, the program declares {len(declared)}")
        out = []
        for i, decl in enumerate(declared):
            if not isinstance(decl, dict) or not isinstance(decl.get("shape"), list):
                raise _fail(path, f"constant c[{i}] has a malformed declaration")
            data = _read_member(inner, path, f"c{i}.npy", MAX_MEMBER_BYTES)
            f = io.BytesIO(data)
            major, _ = np.lib.format.read_magic(f)
            reader = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(f)
            if dtype.hasobject or dtype.kind not in "biuf":
                raise _fail(path, f"constant c[{i}] has unsupported dtype {dtype}")
            nbytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            if nbytes > len(data):
                raise _fail(path, f"constant c[{i}] declares {nbytes} bytes but holds {len(data)}")
            if list(shape) != decl["shape"] or str(dtype) != decl.get("dtype"):
                raise _fail(
                    path,
                    f"constant c[{i}] is {tuple(shape)} {dtype}, declared "
                    f"{tuple(decl['shape'])} {decl.get('dtype')}",
                )
            arr = np.load(io.BytesIO(data), allow_pickle=False)
            out.append(arr)
        return out
