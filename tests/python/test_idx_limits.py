"""The MLP example's IDX reader under hostile input: too many dimensions,
gzip bombs, sizes past the limit. Each is its DatasetError, and memory stays
bounded by what the header declares (checked with tracemalloc)."""
import gzip
import struct
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "mlp"))
import data  # noqa: E402


def header(code, dims):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)


def zeros_member(n):
    """One gzip member of n zero bytes (made in chunks: cheap to build)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 20)
    out = [c.compress(chunk) for _ in range(n >> 20)]
    out.append(c.compress(bytes(n & ((1 << 20) - 1))))
    out.append(c.flush())
    return b"".join(out)


def bomb(head, total):
    """A gzip file that expands to `head` + `total` zero bytes; members of
    64 MiB of zeros repeated (gzip concatenates members)."""
    member = zeros_member(64 << 20)
    return gzip.compress(head) + member * (total // (64 << 20))


def peak_mib(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / (1 << 20)


@pytest.mark.parametrize("ndim", [33, 65, 255])
def test_too_many_dims_is_a_dataset_error(tmp_path, ndim):
    p = tmp_path / "many.idx"
    p.write_bytes(header(0x08, [1] * ndim) + b"\x07")
    with pytest.raises(data.DatasetError, match=f"{ndim} dimensions; at most 32"):
        data.read_idx(str(p))
    p.write_bytes(gzip.compress(header(0x08, [1] * ndim) + b"\x07"))
    with pytest.raises(data.DatasetError, match=f"{ndim} dimensions"):
        data.read_idx(str(p))


def test_gzip_bomb_with_a_small_header_stops_early(tmp_path):
    """2 GiB of zeros behind a header that declares 784 KB: inflated only as
    far as the header says, then "trailing bytes"."""
    p = tmp_path / "bomb.gz"
    blob = bomb(header(0x08, [1000, 28, 28]), 2 << 30)
    assert len(blob) < (4 << 20)
    p.write_bytes(blob)
    with pytest.raises(data.DatasetError, match="has trailing bytes"):
        data.read_idx(str(p))
    assert peak_mib(lambda: pytest.raises(data.DatasetError, data.read_idx, str(p))) < 64


def test_gzip_bomb_declaring_too_much_is_refused_before_inflating(tmp_path):
    p = tmp_path / "big.gz"
    p.write_bytes(gzip.compress(header(0x0E, [1 << 20, 1 << 20]) + bytes(4096)))
    with pytest.raises(data.DatasetError, match="more than the .* bytes this reader accepts"):
        data.read_idx(str(p))
    # within max_bytes but more than the compressed size could ever hold
    p.write_bytes(gzip.compress(header(0x08, [500 << 20]) + bytes(4096)))
    with pytest.raises(data.DatasetError, match="more than .* compressed bytes can hold"):
        data.read_idx(str(p))
    assert peak_mib(lambda: pytest.raises(data.DatasetError, data.read_idx, str(p))) < 16


def test_max_bytes_bounds_raw_and_gzip(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(header(0x08, [4096]) + bytes(4096))
    assert data.read_idx(str(p)).shape == (4096,)
    with pytest.raises(data.DatasetError, match="max_bytes"):
        data.read_idx(str(p), max_bytes=1000)
    p.write_bytes(gzip.compress(header(0x08, [4096]) + bytes(4096)))
    with pytest.raises(data.DatasetError, match="max_bytes"):
        data.read_idx(str(p), max_bytes=1000)


def test_multi_member_and_padded_gzip_still_read(tmp_path):
    body = header(0x08, [6]) + bytes(range(6))
    p = tmp_path / "m.gz"
    p.write_bytes(gzip.compress(body[:5]) + gzip.compress(body[5:]) + bytes(8))
    assert data.read_idx(str(p)).tolist() == list(range(6))
    p.write_bytes(gzip.compress(body) + b"junk")
    with pytest.raises(data.DatasetError, match="trailing garbage"):
        data.read_idx(str(p))
