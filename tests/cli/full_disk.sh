#!/usr/bin/env bash
# full_disk.sh APRON CASE MPIEXEC...: issue 19's "disk already full at the start". On a 2 MB tmpfs
# filled to the last byte, a 2-rank run must fail with exit status 1 and "the disk is full" for
# its first particle file and for its first checkpoint, not hang in mismatched collective calls
# (the ctest timeout catches a hang). Needs a private mount namespace (root or user namespaces):
# exits 77 (skipped) where there is none.
set -u
source "$(dirname "$0")/private_namespace.sh" "$@"
apron=$1
case_file=$2
shift 2
mpiexec=("$@")
disk=$(mktemp -d)
if ! mount -t tmpfs -o size=2m tmpfs "$disk"; then
  echo "cannot mount a tmpfs: skipped"
  exit 77
fi
dd if=/dev/zero of="$disk/fill" bs=64k 2>/dev/null  # until the disk is full
status=0
check() {  # check NAME ARGS...: the run fails with status 1 and names the full disk
  local name=$1
  shift
  output=$(OMP_NUM_THREADS=1 "${mpiexec[@]}" -n 2 "$apron" run "$case_file" --set time.max_steps=20 \
           --set "output.dir=$disk/$name" "$@" 2>&1)
  local got=$?
  if [[ $got -eq 1 ]] && grep -q "the disk is full: 0 MB free" <<<"$output"; then
    echo "$name: exit 1, the disk is full (as expected)"
  else
    echo "$output" | tail -20
    echo "$name: expected exit 1 and 'the disk is full', got $got"
    status=1
  fi
}
check particles
check checkpoint --set output.every=0 --set checkpoint.every_steps=10
umount "$disk"
rmdir "$disk"
exit $status
