"""Length-prefixed msgpack frames over pipes, read with real wall-clock deadlines.

Blocking reads under ``select`` rather than async I/O on purpose: the campaign may run on trio's
MockClock, where awaiting a pipe counts as idle and lets virtual time jump (docs/stack-pitfalls.md).
"""

from __future__ import annotations

import os
import select
import struct
import time

import msgspec
from kernel_scientist.evaluator._wire import AnyFrame

_HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 2**20
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyFrame)


class FrameTimeout(Exception):
    pass


class ChannelClosed(Exception):
    pass


def write_frame(fd: int, frame: AnyFrame) -> None:
    blob = _encoder.encode(frame)
    data = _HEADER.pack(len(blob)) + blob
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise FrameTimeout()
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise ChannelClosed()
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None) -> AnyFrame:
    """Read one frame; ``deadline`` is a ``time.monotonic()`` instant, None waits forever.

    A timeout in the middle of a frame leaves the channel unusable; callers then restart it."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > MAX_FRAME:
        raise ChannelClosed(f"frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
    return _decoder.decode(_read_exact(fd, size, deadline))
