"""atheris target: the MLP example's IDX reader (examples/mlp/data.py).

Any bytes must parse or raise its DatasetError -- never another exception,
and never more memory than the cap allows (max_bytes=1 MiB here; a gzip
bomb must stop at the cap). Run by `make test-fuzz` (bounded) and
`make fuzz` (long): python tests/fuzz/fuzz_idx.py [libFuzzer flags] CORPUS...
"""
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "mlp"))
with atheris.instrument_imports(include=["data"]):  # the reader, not numpy
    import data


def one_input(raw: bytes) -> None:
    try:
        data.decode_idx(raw, "fuzz.idx", max_bytes=1 << 20)
    except data.DatasetError:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
