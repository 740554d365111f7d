#!/usr/bin/env python3
"""check_info.py BACKEND COMMAND...: `apron info` (COMMAND) exits 0, names the backend, and prints
text only (and, for the kokkos backend, Kokkos' version and spaces): no NUL byte (Open MPI's library version length counts its NUL, which apron printed in
the MPI line; issue 19) and no other control character but newlines and tabs."""
import re
import subprocess
import sys


def main(backend, command):
    done = subprocess.run(command, capture_output=True, timeout=60)
    out = done.stdout
    sys.stdout.write(out.decode(errors="replace"))
    failures = []
    if done.returncode != 0:
        failures.append(f"exit status {done.returncode}")
    if not re.search(rb"^backend: +" + re.escape(backend.encode()) + rb"$", out, re.M):
        failures.append(f"no line 'backend: {backend}'")
    if backend == "kokkos" and not re.search(
            rb"^Kokkos: +4\.\d+\.\d+, execution space \w+ \(concurrency \d+\), memory space \w+$",
            out, re.M):
        failures.append("no line 'Kokkos: <version>, execution space ..., memory space ...'")
    bad = sorted({b for b in out if b < 32 and b not in (9, 10)} | ({127} & set(out)))
    if bad:
        at = min(out.index(bytes([b])) for b in bad)
        failures.append(f"control bytes {bad} in the output (the first at byte {at}: "
                        f"{out[max(0, at - 30):at + 10]!r})")
    for f in failures:
        print("FAIL  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
