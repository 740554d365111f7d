// libFuzzer target: the point-cloud readers (io::read_point_file: PLY, XYZ/CSV, PTS, PCD,
// LAS, and LAZ and E57 where the build links LASzip and libE57Format). Each input is written under
// every extension and read as that format (a file of one format read as another must be refused
// cleanly too), with a memory budget small enough that the reader's pre-allocation check is
// exercised. MeshReadError is the expected failure for bad input; any other exception, a crash, a
// sanitizer report or a hang is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <string>
#include <typeinfo>

#include "fuzz_files.hpp"
#include "io/point_cloud_reader.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& work_dir() {
  return apron::fuzz::work_dir("fuzz_point_cloud_reader");
}

void read_one(const fs::path& path, const std::uint8_t* data, std::size_t size) {
  apron::fuzz::write_input(path, data, size);
  try {
    // 256 MiB: the check refuses what could not be read within it.
    const apron::io::PointCloud cloud = apron::io::read_point_file(path, std::size_t{256} << 20);
    // What a reader returns must be usable: points finite and within float range.
    for (const auto& p : cloud.points)
      for (double c : p)
        if (!std::isfinite(c) || std::fabs(c) > std::numeric_limits<float>::max()) {
          std::fprintf(stderr, "fuzz_point_cloud_reader: %s: a point is not finite\n",
                       path.c_str());
          std::abort();
        }
    if (!cloud.normals.empty() && cloud.normals.size() != cloud.points.size()) {
      std::fprintf(stderr, "fuzz_point_cloud_reader: %s: normals and points differ in count\n",
                   path.c_str());
      std::abort();
    }
  } catch (const apron::io::MeshReadError&) {
    // Refused with a message: the expected outcome for bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_point_cloud_reader: %s: unexpected %s: %s\n", path.c_str(),
                 typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_point_cloud_reader: %s: unexpected exception\n", path.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const char* ext : {".ply", ".xyz", ".pts", ".pcd", ".las", ".laz", ".e57"})
    read_one(work_dir() / (std::string("input") + ext), data, size);
  return 0;
}
