#!/usr/bin/env bash
# ctest jobs_scaling_local: jobs/scaling in local mode runs a strong and a weak study of the dam
# break on 1, 2 and 4 ranks (mpirun --oversubscribe, one OpenMP thread each, a few steps); the CSV
# and plots are checked against the run reports; a second run of the same command skips every run.
# usage: local_study.sh PYTHON APRON_EXE SOURCE_DIR WORK_DIR
set -euo pipefail
python=$1 apron=$2 src=$3 work=$4
rm -rf "$work"
export OMP_NUM_THREADS=1
study=("$python" "$src/jobs/scaling" "$src/inputs/dam_break.yaml" --ranks 1 2 4 --steps 8
       --out "$work" --apron "$apron" --mpirun "mpirun --oversubscribe")
"${study[@]}"
"$python" "$src/tests/jobs/check_study.py" "$work" --ranks 1 2 4 --steps 8

echo "--- again: every run must be skipped"
stamp=$(stat -c %Y.%N "$work"/runs/*/run_report.json | md5sum)
"${study[@]}" | tee "$work/second.log"
skipped=$(grep -c "finished before, skipped" "$work/second.log" || true)
[[ $skipped == 6 ]] || { echo "FAIL: the second run skipped $skipped of 6 runs"; exit 1; }
[[ $(stat -c %Y.%N "$work"/runs/*/run_report.json | md5sum) == "$stamp" ]] \
  || { echo "FAIL: the second run rewrote run reports"; exit 1; }
"$python" "$src/tests/jobs/check_study.py" "$work" --ranks 1 2 4 --steps 8

echo "--- a changed argument runs that series again"
"${study[@]}" --series strong --set output.diagnostics_every=4 | tee "$work/third.log"
again=$(grep -c "arguments changed" "$work/third.log" || true)
[[ $again == 3 ]] || { echo "FAIL: $again of 3 changed runs were run again"; exit 1; }
echo "local_study: PASS"
