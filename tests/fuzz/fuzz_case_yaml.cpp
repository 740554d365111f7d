// libFuzzer target: the case parser (config::parse_case_text) with --set overrides.
// Input: YAML text, then optionally a NUL byte and one `key.path=value` override per line.
// ConfigError is the expected failure for bad input; any other exception, a crash, a sanitizer
// report or a hang is a finding. Only config/ and the workloads' schemas are compiled in: the
// registry's built-in workloads are defined here with factories that throw, so no solver, device
// code or HDF5 is needed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "cloth/cloth_config.hpp"
#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "flip/flip_config.hpp"
#include "meshdist/meshdist_config.hpp"
#include "planes/planes_config.hpp"
#include "sph/sph_config.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

namespace apron {

std::vector<WorkloadSpec> builtin_workloads() {
  const auto no_solver = [](const WorkloadContext&) -> std::unique_ptr<Workload> {
    throw std::logic_error("fuzz_case_yaml: no solver in the fuzz target");
  };
  return {
      WorkloadSpec{"sph", "SPH (schema only)", sph::sph_schema(), no_solver, {}},
      WorkloadSpec{
          "meshdist", "mesh distance (schema only)", meshdist::meshdist_schema(), no_solver, {}},
      WorkloadSpec{"flip", "FLIP (schema only)", flip::flip_schema(), no_solver, {}},
      WorkloadSpec{
          "planes", "plane detection (schema only)", planes::planes_schema(), no_solver, {}},
      WorkloadSpec{"cloth", "cloth (schema only)", cloth::cloth_schema(), no_solver, {}}};
}

}  // namespace apron

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string text = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::size_t start = nul + 1;
    while (start <= input.size()) {
      std::size_t end = input.find('\n', start);
      if (end == std::string::npos) end = input.size();
      if (end > start) overrides.push_back(input.substr(start, end - start));
      start = end + 1;
    }
  }
  // Relative mesh paths resolve beside the case file: inputs/meshes/... exist there.
  const std::string file = std::string(APRON_SOURCE_DIR) + "/inputs/fuzz_case.yaml";
  try {
    const apron::config::CaseConfig c = apron::config::parse_case_text(file, text, overrides);
    (void)c;
  } catch (const apron::config::ConfigError&) {
    // Refused with a message: the expected outcome for bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_case_yaml: unexpected %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_case_yaml: unexpected exception of unknown type\n");
    std::abort();
  }
  return 0;
}
