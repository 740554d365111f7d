"""What the SPH checks read of a run's outputs."""
import os
import re


def series_files(run):
    """The particle files the run's particles.xmf lists (a folder may hold an earlier run's)."""
    with open(os.path.join(run, "particles.xmf")) as f:
        names = sorted(set(re.findall(r"particles_\d+\.h5", f.read())))
    return [os.path.join(run, n) for n in names]
