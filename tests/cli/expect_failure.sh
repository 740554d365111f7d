#!/usr/bin/env bash
# expect_failure.sh STATUS REGEX COMMAND...: runs COMMAND, passes if it exits with STATUS and its
# output matches REGEX (extended), and no process is left hanging (the test has a timeout).
set -u
want_status=$1 pattern=$2
shift 2
output=$("$@" 2>&1)
status=$?
echo "$output"
if [[ $status -ne $want_status ]]; then
  echo "expected exit status $want_status, got $status"
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "output does not match: $pattern"
  exit 1
fi
