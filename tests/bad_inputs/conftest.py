"""Damaged copies of an exported executable, shared by the corpus and the fuzz tests.

Each mutation reads a good artifact (``src``) and writes a damaged one (``dst``);
those that keep the manifest's checksums right reach the checks behind them.
"""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import struct
import zipfile
from typing import Callable

import numpy as np

HERE = pathlib.Path(__file__).parent
MANIFEST, PROGRAM, CONSTANTS = "manifest.json", "executable.json", "constants.npz"


def read_members(path: pathlib.Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def write_members(
    path: pathlib.Path,
    members: dict[str, bytes],
    *,
    checksums: bool = True,
    compression: int = zipfile.ZIP_STORED,
) -> None:
    """Writes ``members`` as an artifact; ``checksums`` recomputes the manifest's."""
    members = dict(members)
    if checksums and MANIFEST in members:
        manifest = json.loads(members[MANIFEST])
        for name in (PROGRAM, CONSTANTS):
            if name in members:
                data = members[name]
                manifest["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        members[MANIFEST] = json.dumps(manifest, sort_keys=True).encode()
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _edit_json(name: str, edit: Callable[[dict], None], checksums: bool = True) -> Callable:
    def mutate(src: pathlib.Path, dst: pathlib.Path) -> None:
        members = read_members(src)
        doc = json.loads(members[name])
        edit(doc)
        members[name] = json.dumps(doc).encode()
        write_members(dst, members, checksums=checksums)

    return mutate


def _edit_constant(array_bytes: Callable[[bytes], bytes]) -> Callable:
    """Replaces ``c0.npy`` inside constants.npz (checksums kept right)."""

    def mutate(src: pathlib.Path, dst: pathlib.Path) -> None:
        members = read_members(src)
        inner = read_members_bytes(members[CONSTANTS])
        inner["c0.npy"] = array_bytes(inner["c0.npy"])
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, data in inner.items():
                zf.writestr(name, data)
        members[CONSTANTS] = buf.getvalue()
        write_members(dst, members)

    return mutate


def read_members_bytes(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _huge_shape(npy: bytes) -> bytes:
    """The same data under a header declaring 2**40 elements."""
    f = io.BytesIO(npy)
    np.lib.format.read_magic(f)
    _, _, dtype = np.lib.format.read_array_header_1_0(f)
    data = npy[f.tell():]
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": dtype.str, "fortran_order": False, "shape": (1 << 40,)})
    return out.getvalue() + data


def _object_dtype(npy: bytes) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "|O", "fortran_order": False, "shape": (3,)})
    return out.getvalue() + b"\0" * 24


def _truncate(fraction: float) -> Callable:
    def mutate(src: pathlib.Path, dst: pathlib.Path) -> None:
        data = src.read_bytes()
        dst.write_bytes(data[: int(len(data) * fraction)])

    return mutate


def _flip_program_byte(src: pathlib.Path, dst: pathlib.Path) -> None:
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo(PROGRAM)
    start = info.header_offset + 30 + len(PROGRAM)  # local header, then the stored bytes
    data[start + info.file_size // 2] ^= 0x20
    dst.write_bytes(bytes(data))


def _huge_member_size(src: pathlib.Path, dst: pathlib.Path) -> None:
    """The central directory declares executable.json as almost 4 GiB."""
    data = bytearray(src.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46: at + 46 + name_len]) == PROGRAM.encode():
            struct.pack_into("<I", data, at + 24, 0xFFFFFFF0)
            break
        at = data.find(b"PK\x01\x02", at + 4)
    dst.write_bytes(bytes(data))


def _tamper_program(src: pathlib.Path, dst: pathlib.Path) -> None:
    members = read_members(src)
    members[PROGRAM] = members[PROGRAM].replace(b'"exp"', b'"log"')
    write_members(dst, members, checksums=False)


def _extra_member(src: pathlib.Path, dst: pathlib.Path) -> None:
    members = read_members(src)
    members["payload.py"] = b"import os\n"
    write_members(dst, members)


def _compressed(src: pathlib.Path, dst: pathlib.Path) -> None:
    write_members(dst, read_members(src), compression=zipfile.ZIP_DEFLATED)


def _not_a_zip(src: pathlib.Path, dst: pathlib.Path) -> None:
    dst.write_bytes(b"#!/bin/sh\necho this is not an artifact\n")


def _set(path: tuple, value: object) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _bad_register(doc: dict) -> None:
    doc["functions"][0]["instructions"][0]["dst"] = 10**6


MUTATIONS: dict[str, Callable[[pathlib.Path, pathlib.Path], None]] = {
    "truncated_half": _truncate(0.5),
    "truncated_tail": _truncate(0.97),
    "empty_file": _truncate(0.0),
    "not_a_zip": _not_a_zip,
    "flipped_program_byte": _flip_program_byte,
    "tampered_program": _tamper_program,
    "manifest_wrong_version": _edit_json(MANIFEST, _set(("format_version",), 99), checksums=False),
    "manifest_wrong_format": _edit_json(MANIFEST, _set(("format",), "onnx"), checksums=False),
    "program_wrong_version": _edit_json(PROGRAM, _set(("format_version",), 0)),
    "manifest_absurd_size": _edit_json(MANIFEST, _set(("files", PROGRAM, "size"), 1 << 62), checksums=False),
    "member_absurd_size": _huge_member_size,
    "constant_absurd_shape": _edit_constant(_huge_shape),
    "constant_object_dtype": _edit_constant(_object_dtype),
    "constant_count": _edit_json(PROGRAM, lambda d: d["constants"].append({"shape": [1], "dtype": "float32"})),
    "bad_register": _edit_json(PROGRAM, _bad_register),
    "extra_member": _extra_member,
    "compressed_member": _compressed,
}


# -- fuzzing: the shared Hypothesis settings ----------------------------------
from hetvm.testing.fuzz_settings import FACTOR, LONG, fuzz_settings  # noqa: E402, F401
