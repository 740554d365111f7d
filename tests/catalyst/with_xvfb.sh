#!/usr/bin/env bash
# with_xvfb.sh COMMAND...: runs COMMAND with DISPLAY on a private Xvfb (for ParaView's
# screenshots; Debian's ParaView renders through GLX only), stopped again afterwards.
# Xvfb picks a free display itself and reports it when it accepts connections (-displayfd):
# `xvfb-run -a` can pick the display of a server that is still shutting down. -noreset: by
# default an X server resets when its last client leaves, and a rank that connects during the
# reset (the other rank's OpenGL probe just closed) makes VTK abort().
set -u
number=$(mktemp)
Xvfb -displayfd 3 -screen 0 1024x768x24 -nolisten tcp -noreset 3>"$number" 2>/dev/null &
server=$!
for _ in $(seq 100); do
  [[ -s $number ]] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [[ ! -s $number ]]; then
  echo "with_xvfb.sh: Xvfb did not start" >&2
  rm -f "$number"
  exit 1
fi
DISPLAY=":$(head -n1 "$number")" "$@"
status=$?
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
rm -f "$number"
exit $status
