#!/usr/bin/env bash
# litter.sh APRON CASE: what runs that end badly leave behind, on the small cloth drape.
#  - `--restart latest` removes an unfinished checkpoint's .tmp and the MPI-IO lock files a killed
#    write leaves beside it;
#  - a restart that fails at its first output leaves the earlier run's series index (.xmf) as it
#    was, byte for byte;
#  - a run that fails (a blow-up) leaves no diagnostics.csv.tmp, and its rows in diagnostics.csv.
set -u
apron=$1
case_file=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check CONDITION-STATUS WHAT
  if [[ $1 -eq 0 ]]; then echo "ok    $2"; else echo "FAIL  $2"; failures=$((failures + 1)); fi
}
run() {  # run OUT_DIR ARGS...: exit status, output in OUT_DIR.log
  local out=$1
  shift
  OMP_NUM_THREADS=1 timeout 60 "$apron" run "$case_file" --set "output.dir=$out" "$@" \
      > "$out.log" 2>&1
}

out=$work/drape
run "$out" --set time.max_steps=4 --set output.diagnostics_every=1 --set checkpoint.at_end=true
check $? "the first run ends with exit status 0"
ckpt=$out/checkpoints
touch "$ckpt/checkpoint_000009.h5.tmp" "$ckpt/checkpoint_000009.h5.tmp-1052377089-21064.lock"
cp "$out/cloth.xmf" "$work/cloth.xmf.before"

# The restart's outputs cannot be written: a folder where each one's .tmp file would go.
for step in 5 6; do mkdir -p "$(printf '%s/cloth_%06d.h5.tmp' "$out" $step)"; done
run "$out" --restart latest --set time.max_steps=6 --set output.every=1e-9
status=$?
check $((status == 1 ? 0 : 1)) "the restart that cannot write its output fails (exit status $status)"
cmp -s "$out/cloth.xmf" "$work/cloth.xmf.before"
check $? "the failed restart left cloth.xmf as the first run wrote it"
leftovers=$(find "$ckpt" -name '*.tmp' -o -name '*.lock')
check $([[ -z $leftovers ]]; echo $?) "no checkpoint .tmp or .lock left: '$leftovers'"
[[ ! -e $out/diagnostics.csv.tmp ]]
check $? "the failed restart left no diagnostics.csv.tmp"
grep -q "^4," "$out/diagnostics.csv"
check $? "diagnostics.csv still holds the first run's rows"

blow=$work/blow_up
run "$blow" "--set=cloth.grid.size=[1e60, 1e60, 0]"
status=$?
check $((status == 1 ? 0 : 1)) "the sheet of 1e60 m fails (exit status $status)"
[[ ! -e $blow/diagnostics.csv.tmp && -s $blow/diagnostics.csv ]]
check $? "the failed run's rows are in diagnostics.csv, no .tmp left"
if ((failures)); then
  for log in "$work"/*.log; do echo "== $log"; tail -5 "$log"; done
fi
exit $((failures > 0))
