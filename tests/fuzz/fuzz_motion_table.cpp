// libFuzzer target: the motion table of a moving solid (`motion: {type: table, file: ...}`). Each
// input is written to a file and read through read_motion, as a case would read it. ConfigError is
// the expected failure for bad input; what is accepted must be usable: rows strictly increasing in
// time, and every pose the table gives (before, between and after its rows) finite.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "engine/prescribed_motion.hpp"
#include "fuzz_files.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& work_dir() {
  return apron::fuzz::work_dir("fuzz_motion_table");
}

[[noreturn]] void finding(const char* what, double value) {
  std::fprintf(stderr, "fuzz_motion_table: %s (%g)\n", what, value);
  std::abort();
}

void check_usable(const apron::PrescribedMotion& m) {
  if (m.rows.size() < 2)
    finding("a table of fewer than 2 rows was accepted", double(m.rows.size()));
  for (std::size_t i = 1; i < m.rows.size(); ++i)
    if (!(m.rows[i][0] > m.rows[i - 1][0])) finding("time does not increase at row", double(i));
  const double t0 = m.rows.front()[0], t1 = m.rows.back()[0];
  for (double t : {t0 - 1, t0, 0.5 * (t0 + t1), t1, t1 + 1}) {
    const apron::RigidPose pose = m.at(t);
    for (double v : pose.translation)
      if (!std::isfinite(v)) finding("a non-finite translation at t", t);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path table = work_dir() / "motion.txt";
  apron::fuzz::write_input(table, data, size);
  YAML::Node solid;
  solid["motion"]["type"] = "table";
  solid["motion"]["file"] = table.string();
  try {
    apron::config::MapReader r(solid, (work_dir() / "case.yaml").string(), "");
    check_usable(apron::read_motion(r));
  } catch (const apron::config::ConfigError&) {
    // Refused with a message: the expected outcome for bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_motion_table: unexpected %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
