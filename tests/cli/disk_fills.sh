#!/usr/bin/env bash
# disk_fills.sh APRON CASE SHIM MPIEXEC...: issue 19's "a disk that fills during a write", on
# cue: SHIM (enospc_shim.cpp, preloaded) fails the writes to one file with ENOSPC on chosen ranks,
# from a chosen byte on. The 2-rank dam break must then end with exit status 1 and a message
# naming the file, within the ctest timeout (no rank left waiting in a collective call), leave
# nothing under the failed file's final name nor beside it, and keep the earlier outputs whole.
set -u
apron=$1
case_file=$2
shim=$3
shift 3
mpiexec=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() {
  echo "$1"
  status=1
}
# run NAME FILE RANKS AFTER: RANKS is 0, 1 or both (the ranks whose writes to FILE fail).
run() {
  local name=$1 file=$2 ranks=$3 after=$4
  local dir=$work/$name
  local args=(run "$case_file" --set time.max_steps=30 --set "output.dir=$dir"
              --set checkpoint.every_steps=10)
  # (An AddressSanitizer build wants its runtime first among the preloaded libraries.)
  local faulty=(env LD_PRELOAD="$shim" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
                APRON_TEST_ENOSPC_PATH="$file.tmp"
                APRON_TEST_ENOSPC_AFTER="$after" "$apron" "${args[@]}")
  local plain=("$apron" "${args[@]}")
  local first=("${plain[@]}") second=("${plain[@]}")
  [[ $ranks == 0 || $ranks == both ]] && first=("${faulty[@]}")
  [[ $ranks == 1 || $ranks == both ]] && second=("${faulty[@]}")
  output=$(OMP_NUM_THREADS=1 timeout 60 "${mpiexec[@]}" -n 1 "${first[@]}" : -n 1 "${second[@]}" 2>&1)
  got=$?
  if [[ $got -ne 1 ]]; then
    echo "$output" | tail -15
    fail "$name: expected exit status 1, got $got (124: a hang)"
  elif ! grep -q "apron: error: .*$file.tmp" <<<"$output"; then
    echo "$output" | tail -15
    fail "$name: the message does not name $file.tmp"
  fi
  leftovers=$(find "$dir" -name "$file*")
  [[ -z $leftovers ]] || fail "$name: left behind: $leftovers"
}
expect_whole() {  # expect_whole NAME FILE: an earlier output still verifies
  if "$apron" inspect --verify "$work/$1/$2" > /dev/null 2>&1; then
    echo "$1: $2 verifies"
  else
    fail "$1: $2 no longer verifies"
  fi
}

# A checkpoint (each rank writes its rows with POSIX I/O on a thread).
run checkpoint_both checkpoints/checkpoint_000000020.h5 both 65536
run checkpoint_rank1 checkpoints/checkpoint_000000020.h5 1 0
for name in checkpoint_both checkpoint_rank1; do
  expect_whole $name checkpoints/checkpoint_000000010.h5
  expect_whole $name particles_000000.h5
done
# A particle file (parallel HDF5, collective MPI-IO writes): one rank's part fails, or both.
run particles_rank0 particles_000030.h5 0 0
run particles_rank1 particles_000030.h5 1 50000
run particles_both particles_000030.h5 both 50000
for name in particles_rank0 particles_rank1 particles_both; do
  expect_whole $name particles_000000.h5
  expect_whole $name checkpoints/checkpoint_000000020.h5
done
[[ $status -eq 0 ]] && echo "every failed write ended the run with exit status 1, nothing left behind"
exit $status
