#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [TARGET[=SECONDS]...]: builds the `fuzz` preset (clang-14,
# libFuzzer, ASan + UBSan) and runs each fuzz target (default: all five) for SECONDS (default 60)
# from its seed corpus (tests/fuzz/corpus/<target>/); TARGET=0 only replays the seeds. Prints the
# executions per target; exits non-zero when any target found something: a crash, a sanitizer
# report, an unexpected exception type, a leak, an input slower than 10 s or using more than
# 2 GiB. Findings are saved as build-fuzz/findings/<target>/* (emptied when that target next
# runs: copy what you keep); reproduce one with `build-fuzz/tests/fuzz/<target> FILE`, from the
# repository root. New coverage-increasing inputs go to build-fuzz/corpus/<target>/, never into
# the repository; to keep some, `<target> -merge=1 tests/fuzz/corpus/<target> build-fuzz/corpus/<target>`.
# Environment: APRON_JOBS (build parallelism and targets run at once, default 2), APRON_FUZZ_ARGS (more libFuzzer flags,
# e.g. "-jobs=4 -workers=4" or "-only_ascii=1").
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_case_yaml fuzz_mesh_reader fuzz_checkpoint fuzz_point_cloud_reader fuzz_motion_table)

cmake --preset fuzz >/dev/null || exit 1
cmake --build --preset fuzz -j "${APRON_JOBS:-2}" >&2 || exit 1

# LeakSanitizer stays on; tests/fuzz/lsan.supp names the libraries (MPI, HDF5) whose
# allocations-until-exit it must not report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

# fuzz_one TARGET[=SECONDS]: runs one target and writes its summary (and, where it found
# something, the end of its log) to build-fuzz/summary-<target>.txt; exit status 1 on findings.
fuzz_one() {
  local spec=$1
  local target=${spec%%=*}
  local time_s=$seconds
  [[ $spec == *=* ]] && time_s=${spec#*=}
  local seeds=tests/fuzz/corpus/$target
  local work=build-fuzz/corpus/$target
  local findings=build-fuzz/findings/$target
  local log=build-fuzz/fuzz-$target.log
  local out=build-fuzz/summary-$target.txt
  rm -rf "$findings"  # this run's findings only
  mkdir -p "$work" "$findings"
  local flags=()
  [[ -f tests/fuzz/$target.dict ]] && flags+=(-dict=tests/fuzz/$target.dict)
  # Text inputs stay small (larger seeds are cut to this, which is fine for parsers); HDF5 seeds
  # must stay whole.
  [[ $target != fuzz_checkpoint ]] && flags+=(-max_len=8192)
  local asan=$ASAN_OPTIONS
  # fuzz_checkpoint calls MPI_Init: LeakSanitizer's tracer then crashes at exit now and then
  # (seen in a clean CI run: "Tracer caught signal 11" after every input had passed), as in the
  # asan stage; leaks are checked by the other targets.
  [[ $target == fuzz_checkpoint ]] && asan+=:detect_leaks=0
  local corpora=("$work" "$seeds")
  if [[ $time_s == 0 ]]; then
    echo "apron: replaying the seeds of $target (log: $log)"
    flags+=(-runs=0)
    corpora=("$seeds")
  else
    echo "apron: fuzzing $target for ${time_s} s (log: $log)"
    flags+=(-max_total_time="$time_s")
  fi
  local started=$SECONDS
  # shellcheck disable=SC2086
  ASAN_OPTIONS=$asan build-fuzz/tests/fuzz/$target -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "${flags[@]}" ${APRON_FUZZ_ARGS:-} \
    "${corpora[@]}" >"$log" 2>&1
  local rc=$?
  local execs found
  execs=$(grep -h 'stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2 + 0}')
  found=$(find "$findings" -type f | sort)
  echo "$target: ${execs} executions in $((SECONDS - started)) s, exit status $rc" >"$out"
  if [[ $rc -ne 0 || -n $found ]]; then
    echo "    FINDINGS:" >>"$out"
    for f in $found; do echo "    $f" >>"$out"; done
    echo "---- $target: the end of its log ----" >>"$out"
    grep -E -A30 '^==[0-9]+==|SUMMARY|fuzz_[a-z_]+: unexpected|ALARM|out-of-memory' "$log" \
      | head -60 >>"$out"
    return 1
  fi
}

# Each target is one process on one core: APRON_JOBS of them run at once. A target's status is
# its summary file's (a summary missing means it never finished).
for spec in "${targets[@]}"; do
  rm -f "build-fuzz/summary-${spec%%=*}.txt"
  while (($(jobs -rp | wc -l) >= ${APRON_JOBS:-2})); do wait -n; done
  fuzz_one "$spec" &
done
wait
status=0
echo "apron: fuzzing summary"
for spec in "${targets[@]}"; do
  summary=build-fuzz/summary-${spec%%=*}.txt
  if [[ ! -f $summary ]]; then
    echo "${spec%%=*}: no summary: the target did not finish"
    status=1
  else
    cat "$summary"
    grep -q "FINDINGS:" "$summary" && status=1
  fi
done
exit $status
