"""The header checksum of an apron checkpoint (format 2), as io/checkpoint.cpp computes it.

Tests use it to forge checkpoints that pass the checksum but hold values out of range, to check
that the range checks refuse them (reseal_dataset: a dataset's own checksum too). `python3 ckpt_digest.py FILE` prints stored and computed."""
import shutil
import struct
import sys

import h5py
import numpy as np

MAGIC = "apron checkpoint"
FORMAT = 2


class Digest:
    def __init__(self):
        self.h = 14695981039346656037

    def bytes(self, data):
        h = self.h
        for b in data:
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        self.h = h
        return self

    def u64(self, v):
        return self.bytes(struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF))

    def i64(self, v):
        return self.u64(int(v))

    def f64(self, v):
        return self.bytes(struct.pack("<d", float(v)))

    def text(self, s):
        data = s.encode() if isinstance(s, str) else bytes(s)
        return self.u64(len(data)).bytes(data)

    def column(self, name, dataset):
        components = dataset.shape[1] if len(dataset.shape) == 2 else 1
        return (self.text(name).text(dataset.dtype.name).i64(components)
                .u64(dataset.shape[0]).u64(int(dataset.attrs["checksum"])))


def text_attr(f, name):
    value = f.attrs[name]
    return value.decode() if isinstance(value, bytes) else str(value)


def digest(f):
    d = Digest()
    d.text(MAGIC).i64(FORMAT)
    d.text(text_attr(f, "workload")).text(text_attr(f, "case"))
    d.text(f["config"][...].tobytes())
    d.i64(f.attrs["step"]).f64(f.attrs["time"]).f64(f.attrs["dt"]).i64(f.attrs["ranks"])
    d.u64(int(f.attrs["seed"])).text(text_attr(f, "build"))
    scalars = sorted(f["state"].attrs.keys())
    d.u64(len(scalars))
    for name in scalars:
        d.text(name).f64(f["state"].attrs[name])
    tables = sorted(f["tables"].keys()) if "tables" in f else []
    d.u64(len(tables))
    for name in tables:
        t = f["tables"][name]
        counts = t["rank_rows"][...]
        d.text(name).u64(int(t.attrs["rows"])).u64(len(counts))
        for c in counts:
            d.i64(int(c))
        columns = sorted(t["columns"].keys())
        d.u64(len(columns))
        for column in columns:
            d.column(column, t["columns"][column])
    arrays = sorted(f["arrays"].keys()) if "arrays" in f else []
    d.u64(len(arrays))
    for name in arrays:
        d.column(name, f["arrays"][name])
    return d.h


M64 = 0xFFFFFFFFFFFFFFFF


def mix64(x):
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & M64
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def row_hash(data, index):
    h = mix64((index + 0x9e3779b97f4a7c15) & M64)
    for k in range(0, len(data), 8):
        h = mix64(h ^ int.from_bytes(data[k:k + 8], "little"))
    return h


def dataset_checksum(dataset):
    """A dataset's checksum as kernels/common/element_hash.hpp computes it: the sum over rows of a
    hash of the row's bytes (little-endian) and its index. Pure Python: for small datasets."""
    rows = np.ascontiguousarray(dataset[...])
    rows = rows.astype(rows.dtype.newbyteorder("<"), copy=False).reshape(len(rows), -1)
    return sum(row_hash(row.tobytes(), i) for i, row in enumerate(rows)) & M64


def reseal_dataset(path, name):
    """Rewrites the checksum of a (forged) dataset, then the header checksum that covers it."""
    with h5py.File(path, "r+") as f:
        f[name].attrs["checksum"] = np.uint64(dataset_checksum(f[name]))
    reseal(path)


def reseal(path):
    """Rewrites the header checksum of a (forged) checkpoint so that it matches again."""
    with h5py.File(path, "r+") as f:
        f.attrs["header_checksum"] = np.uint64(digest(f))


def forge(source, path, change):
    """Copies checkpoint `source` to `path`, applies change(h5py.File) there and reseals it: the
    dataset change returns (its own checksum too), or the header alone when it returns None."""
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        dataset = change(f)
    if dataset:
        reseal_dataset(path, dataset)
    else:
        reseal(path)


if __name__ == "__main__":
    with h5py.File(sys.argv[1], "r") as f:
        print(f"stored {int(f.attrs['header_checksum']):016x} computed {digest(f):016x}")
