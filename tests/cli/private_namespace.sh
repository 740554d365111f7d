# Sourced first, with the script's arguments, by the tests that mount a private tmpfs:
#   source "$(dirname "$0")/private_namespace.sh" "$@"
# re-runs the calling script in a private mount namespace (root or user namespaces), so that its
# mounts are seen by nothing else, or exits 77 (skipped) where there is none.
if [[ ${APRON_IN_NAMESPACE:-} != 1 ]]; then
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "no private mount namespace here (unshare -m): skipped"
    exit 77
  fi
  APRON_IN_NAMESPACE=1 exec unshare -m --propagation private "$0" "$@"
fi
