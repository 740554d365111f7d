#include "runtime/openmp_wait.hpp"

#include <unistd.h>

#include <cstdlib>

namespace apron {

void default_openmp_waiting([[maybe_unused]] char** argv) {
#if !defined(APRON_DEVICE_CUDA)
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  // The marker tells the restarted process (and `apron info`) that the value is apron's.
  setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 1);
  setenv("APRON_DEFAULT_SPINCOUNT", "1", 1);
  execv("/proc/self/exe", argv);
  // No restart (no /proc, say): libgomp's own default stays in force.
  unsetenv("GOMP_SPINCOUNT");
  unsetenv("APRON_DEFAULT_SPINCOUNT");
#endif
}

const char* openmp_waiting_source() {
#if defined(APRON_DEVICE_CUDA)
  return "not used (CUDA backend)";
#else
  if (std::getenv("APRON_DEFAULT_SPINCOUNT") && std::getenv("GOMP_SPINCOUNT"))
    return "GOMP_SPINCOUNT (apron's default; set OMP_WAIT_POLICY or GOMP_SPINCOUNT to choose)";
  if (std::getenv("OMP_WAIT_POLICY")) return "OMP_WAIT_POLICY (the user's)";
  if (std::getenv("GOMP_SPINCOUNT")) return "GOMP_SPINCOUNT (the user's)";
  return "libgomp's default";
#endif
}

}  // namespace apron
