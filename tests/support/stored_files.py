"""Files as a search for a leaked string must read them: a stored rollout's artifacts are a zstd frame, whose
bytes would hide any string in them."""

from __future__ import annotations

from pathlib import Path

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def plain_bytes(path: Path) -> bytes:
    """The file's content: a zstd frame decompressed, any other file as it is."""
    raw = path.read_bytes()
    return zstandard.ZstdDecompressor().decompress(raw) if raw.startswith(ZSTD_MAGIC) else raw
