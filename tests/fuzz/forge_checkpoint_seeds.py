#!/usr/bin/env python3
"""forge_checkpoint_seeds.py [CORPUS]: forged checkpoints for fuzz_checkpoint's seed corpus
(default tests/fuzz/corpus/fuzz_checkpoint), made from its checkpoint_np2.h5 with the header
checksum (and a changed dataset's own checksum) resealed, so that they pass every checksum and
only the range checks refuse them (issue 19): a negative step, a NaN in the partition, a rank's
row count of 2^62. Blind mutation of HDF5 rarely gets this far; CI replays these seeds."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "checkpoint"))
import ckpt_digest  # noqa: E402


def step_negative(f):
    f.attrs["step"] = np.int64(-5)


def partition_nan(f):
    f["arrays/partition"][0, 2] = np.nan
    return "arrays/partition"


def rank_rows_huge(f):
    f["tables/particles/rank_rows"][...] = [2**62, 5]


def main(corpus):
    source = os.path.join(corpus, "checkpoint_np2.h5")
    for forge in (step_negative, partition_nan, rank_rows_huge):
        path = os.path.join(corpus, f"forged_{forge.__name__}.h5")
        ckpt_digest.forge(source, path, forge)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "fuzz_checkpoint"))
