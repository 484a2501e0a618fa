"""The IDX format of MNIST and its relatives (big-endian header, then raw values).

Header: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions,
then one 4-byte big-endian size per dimension.
"""
from __future__ import annotations

import struct

import numpy as np

UBYTE = 0x08


def parse_idx(data: bytes) -> np.ndarray:
    """The uint8 array stored in IDX bytes; ValueError naming what is malformed."""
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != UBYTE:
        raise ValueError("not an unsigned-byte IDX file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError("IDX header is truncated")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    if len(data) - header != int(np.prod(shape)):
        raise ValueError(f"IDX body has {len(data) - header} bytes, shape {shape} needs "
                         f"{int(np.prod(shape))}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def to_idx(array: np.ndarray) -> bytes:
    """IDX bytes of a uint8 array (what the official files contain)."""
    if array.dtype != np.uint8:
        raise ValueError(f"IDX writer takes uint8 arrays, got {array.dtype}")
    header = bytes([0, 0, UBYTE, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array).tobytes()
