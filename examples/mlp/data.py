"""MNIST-format (IDX) data for the MLP tutorial, with no dependency but numpy.

The IDX format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"):

    bytes 0-1   0x00 0x00
    byte  2     element type: 0x08 uint8, 0x09 int8, 0x0B int16,
                0x0C int32, 0x0D float32, 0x0E float64
    byte  3     number of dimensions
    then        one big-endian uint32 per dimension
    then        the data, big-endian, row-major

Files may be gzip-compressed (recognised by the gzip magic 1f 8b, whatever
the file is called) or raw. Every file is checked: the magic, the element
type, the dimensions and that the data is exactly as long as they say. A
problem is raised as DatasetError naming the file and what is wrong.

By default the data comes from Debian's ``dataset-fashion-mnist`` package
(/usr/share/datasets/fashion-mnist); ``--data-dir DIR`` points at any other
directory holding the four MNIST-format files (real MNIST, for example).
"""
from __future__ import annotations

import argparse
import os
import zlib

import numpy as np

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
APT_HINT = "sudo apt-get install dataset-fashion-mnist"

# IDX element type code -> (numpy big-endian dtype, name)
_IDX_TYPES = {
    0x08: (np.dtype(">u1"), "uint8"),
    0x09: (np.dtype(">i1"), "int8"),
    0x0B: (np.dtype(">i2"), "int16"),
    0x0C: (np.dtype(">i4"), "int32"),
    0x0D: (np.dtype(">f4"), "float32"),
    0x0E: (np.dtype(">f8"), "float64"),
}

# split -> (images stem, labels stem). Each stem is looked up as given, with
# .gz, and with the '.' spelling the original MNIST site used for the
# uncompressed files (train-images.idx3-ubyte).
_STEMS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class DatasetError(Exception):
    """A missing or malformed data file; the message says what to do."""


#: Largest IDX payload read (Fashion-MNIST's training images are 47 MB).
MAX_IDX_BYTES = 1 << 30
#: numpy 1.x arrays have at most 32 dims (numpy 2: 64); IDX allows 255.
MAX_IDX_DIMS = 32
# DEFLATE cannot expand data by more than ~1032:1, so a gzip file of n
# bytes that claims more than this much content is truncated or lying.
_DEFLATE_MAX_RATIO = 1032
_GZIP_MAGIC = b"\x1f\x8b"


def _corrupt_gzip(path: str, why) -> DatasetError:
    return DatasetError(
        f"{path}: corrupt gzip data ({why}); the file is damaged or truncated — "
        f"reinstall it (e.g. `sudo apt-get install --reinstall dataset-fashion-mnist`) "
        f"or download it again")


def _inflate(path: str, raw: bytes, limit: int) -> bytes:
    """The first `limit` bytes (at most) of gzip data, all members, streamed:
    memory never exceeds `limit` whatever the data expands to (a gzip bomb
    stops here)."""
    out = bytearray()
    data = raw
    try:
        while data and len(out) < limit:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(data, limit - len(out))
            while not d.eof and d.unconsumed_tail and len(out) < limit:
                out += d.decompress(d.unconsumed_tail, limit - len(out))
            if len(out) >= limit:
                break
            if not d.eof:
                raise _corrupt_gzip(path, "compressed file ended before the end-of-stream marker")
            data = d.unused_data
            if data and data[:2] != _GZIP_MAGIC:
                if data.strip(b"\0"):
                    raise _corrupt_gzip(path, "trailing garbage after the compressed data")
                break  # zero padding, as gzip tolerates
    except zlib.error as e:
        raise _corrupt_gzip(path, e) from None
    return bytes(out)  # each decompress call was capped at what `limit` left


def _header(data: bytes, path: str):
    """Check an IDX header; returns (numpy dtype, type name, dims, header
    length, total length the header declares)."""
    if len(data) < 4:
        raise DatasetError(f"{path}: not an IDX file: only {len(data)} bytes, "
                           f"shorter than the 4-byte header")
    if data[0] != 0 or data[1] != 0:
        raise DatasetError(f"{path}: not an IDX file: bad magic number "
                           f"0x{data[:4].hex()} (expected 0x0000TTNN: two zero bytes, "
                           f"a type byte and a dimension count)")
    code, ndim = data[2], data[3]
    if code not in _IDX_TYPES:
        raise DatasetError(f"{path}: unknown IDX element type 0x{code:02x} "
                           f"(known: {', '.join(f'0x{c:02x}' for c in _IDX_TYPES)})")
    if ndim == 0:
        raise DatasetError(f"{path}: IDX header says 0 dimensions")
    if ndim > MAX_IDX_DIMS:
        raise DatasetError(f"{path}: IDX header says {ndim} dimensions; at most "
                           f"{MAX_IDX_DIMS} are supported")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{path}: truncated IDX header: {ndim} dimensions need "
                           f"{header} bytes, file has {len(data)}")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype, tname = _IDX_TYPES[code]
    count, span = 1, dtype.itemsize
    for d in dims:
        count *= d
        span *= max(d, 1)  # numpy refuses shapes it could not address, even empty ones
    if span >= 1 << 63:
        raise DatasetError(f"{path}: IDX header says {tname} {list(dims)}: too large to address")
    return dtype, tname, dims, header, header + count * dtype.itemsize


def parse_idx(data: bytes, path: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an IDX file (already decompressed) into an array
    in native byte order. Raises DatasetError on any inconsistency."""
    dtype, tname, dims, header, want = _header(data, path)
    if len(data) != want:
        what = "truncated" if len(data) < want else "has trailing bytes"
        raise DatasetError(f"{path}: {what}: header says {tname} {list(dims)} = "
                           f"{want} bytes, file has {len(data)}")
    count = (want - header) // dtype.itemsize
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def _too_large(path: str, what: str, limit: int) -> DatasetError:
    return DatasetError(f"{path}: {what}, more than the {limit} bytes this reader accepts (max_bytes)")


def decode_idx(raw: bytes, path: str = "<bytes>", max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """Parse an IDX file's bytes, gzip-compressed or raw (told apart by the
    gzip magic). Compressed data is expanded only as far as the header
    says, and never past `max_bytes`."""
    if raw[:2] != _GZIP_MAGIC:
        if len(raw) > max_bytes:
            raise _too_large(path, f"{len(raw)} bytes", max_bytes)
        return parse_idx(raw, path)
    head = _inflate(path, raw, 4 + 4 * 255)
    _, tname, dims, _, want = _header(head, path)
    if want > max_bytes:
        raise _too_large(path, f"header says {tname} {list(dims)} = {want} bytes", max_bytes)
    if want > len(raw) * _DEFLATE_MAX_RATIO + 4096:
        raise DatasetError(f"{path}: truncated: header says {tname} {list(dims)} = {want} bytes, "
                           f"more than {len(raw)} compressed bytes can hold")
    return parse_idx(_inflate(path, raw, want + 1), path)


def read_idx(path: str, max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """Read an IDX file, gzip-compressed or raw (told apart by content)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise _too_large(path, f"{size} bytes", max_bytes)
            raw = f.read()
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e.strerror or e}") from None
    return decode_idx(raw, path, max_bytes)


def _candidates(data_dir: str, stem: str):
    dotted = stem.replace("-idx", ".idx", 1)
    for name in (stem + ".gz", stem, dotted, dotted + ".gz"):
        yield os.path.join(data_dir, name)


def _find(data_dir: str, stem: str) -> str:
    for p in _candidates(data_dir, stem):
        if os.path.isfile(p):
            return p
    hint = (f"install Debian's Fashion-MNIST with `{APT_HINT}`"
            if os.path.abspath(data_dir) == DEFAULT_DATA_DIR
            else f"put the MNIST-format files there, or install Fashion-MNIST with "
                 f"`{APT_HINT}` and drop --data-dir")
    raise DatasetError(f"{data_dir}: missing {stem}.gz (or {stem}); {hint}")


def load_split(data_dir: str = DEFAULT_DATA_DIR, split: str = "train"):
    """Load one split ('train' or 'test') from an MNIST-format directory.

    Returns (images, labels): uint8 arrays of shape [N, 28, 28] and [N],
    labels in 0..9. Raises DatasetError if anything is missing or wrong.
    """
    if split not in _STEMS:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    if not os.path.isdir(data_dir):
        if os.path.abspath(data_dir) == DEFAULT_DATA_DIR:
            raise DatasetError(f"Fashion-MNIST not found: {data_dir} does not exist. "
                               f"Install it with `{APT_HINT}`, or pass --data-dir DIR "
                               f"for another MNIST-format data set")
        raise DatasetError(f"--data-dir {data_dir}: no such directory")
    img_stem, lbl_stem = _STEMS[split]
    img_path, lbl_path = _find(data_dir, img_stem), _find(data_dir, lbl_stem)
    images, labels = read_idx(img_path), read_idx(lbl_path)
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
        raise DatasetError(f"{img_path}: expected uint8 images [N, 28, 28], "
                           f"found {images.dtype} {list(images.shape)}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise DatasetError(f"{lbl_path}: expected uint8 labels [N], "
                           f"found {labels.dtype} {list(labels.shape)}")
    if labels.shape[0] != images.shape[0]:
        raise DatasetError(f"{lbl_path}: {labels.shape[0]} labels but {img_path} "
                           f"has {images.shape[0]} images")
    if labels.size and int(labels.max()) > 9:
        raise DatasetError(f"{lbl_path}: label {int(labels.max())} out of range 0..9")
    return images, labels


class Batches:
    """Fixed-order batches of (x [B, 784] float32 in [0, 1], y [B] int64), like
    the seeds' DataLoader(dataset, batch_size=32) over ToTensor(): no
    shuffling, the last batch may be smaller. Tensors are converted once, so
    the training loop measures the model, not the loader."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch_size: int = 32):
        import torch
        self.x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)
        self.y = torch.from_numpy(labels.astype(np.int64))
        self.batch_size = batch_size

    def __len__(self):
        return (len(self.y) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        b = self.batch_size
        for i in range(0, len(self.y), b):
            yield self.x[i:i + b], self.y[i:i + b]


def batches(data_dir: str = DEFAULT_DATA_DIR, split: str = "train", batch_size: int = 32,
            limit: int | None = None) -> Batches:
    """Load a split and wrap it as Batches; `limit` keeps the first N samples."""
    images, labels = load_split(data_dir, split)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    return Batches(images, labels, batch_size)


def add_data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help="directory with the MNIST-format IDX files, gzip or raw "
                             f"(default: {DEFAULT_DATA_DIR}, from `{APT_HINT}`)")


if __name__ == "__main__":  # python data.py [--data-dir DIR]: check a data set
    ap = argparse.ArgumentParser(description="check an MNIST-format data directory")
    add_data_args(ap)
    args = ap.parse_args()
    try:
        for split in ("train", "test"):
            try:
                im, lb = load_split(args.data_dir, split)
            except DatasetError as e:
                if split == "train" and "missing" in str(e):
                    print(f"{split}: {e}")
                    continue
                raise
            print(f"{split}: {im.shape[0]} images {im.shape[1]}x{im.shape[2]}, "
                  f"labels {np.bincount(lb, minlength=10).tolist()}")
    except DatasetError as e:
        raise SystemExit(f"error: {e}")
