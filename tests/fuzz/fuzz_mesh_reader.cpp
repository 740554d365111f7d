// libFuzzer target: the mesh readers (io::read_obj, read_ply, read_off, read_stl). The readers take
// a path, so each input is written to a temporary file and read by all four (a file of one format
// read as another must be refused cleanly too). MeshReadError is the expected failure for bad
// input; any other exception, a crash, a sanitizer report or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include "fuzz_files.hpp"
#include "io/mesh_reader.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& work_dir() {
  return apron::fuzz::work_dir("fuzz_mesh_reader");
}

template <class Read>
void read_one(const char* format, const fs::path& path, Read read) {
  try {
    const apron::io::TriangleMesh mesh = read(path);
    // What a reader returns must be usable: every triangle's indices name a vertex.
    for (const auto& t : mesh.triangles)
      for (const auto i : t)
        if (i >= mesh.vertices.size()) {
          std::fprintf(stderr, "fuzz_mesh_reader: %s: vertex index %u of %zu vertices\n", format,
                       static_cast<unsigned>(i), mesh.vertices.size());
          std::abort();
        }
    // STL's welding and solids: the counts add up, and the solids cover the triangles in order.
    if (mesh.vertices_read - mesh.welded_vertices != mesh.vertices.size()) {
      std::fprintf(stderr, "fuzz_mesh_reader: %s: %zu vertices read, %zu welded, %zu left\n",
                   format, mesh.vertices_read, mesh.welded_vertices, mesh.vertices.size());
      std::abort();
    }
    std::size_t next = 0;
    for (const auto& solid : mesh.solids) {
      if (solid.first != next) {
        std::fprintf(stderr, "fuzz_mesh_reader: %s: solid '%s' begins at %zu, not %zu\n", format,
                     solid.name.c_str(), solid.first, next);
        std::abort();
      }
      next += solid.count;
    }
    if (!mesh.solids.empty() && next != mesh.triangles.size()) {
      std::fprintf(stderr, "fuzz_mesh_reader: %s: the solids hold %zu of %zu triangles\n", format,
                   next, mesh.triangles.size());
      std::abort();
    }
  } catch (const apron::io::MeshReadError&) {
    // Refused with a message: the expected outcome for bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_mesh_reader: %s: unexpected %s: %s\n", format, typeid(e).name(),
                 e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_mesh_reader: %s: unexpected exception of unknown type\n", format);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path obj = work_dir() / "input.obj";
  const fs::path ply = work_dir() / "input.ply";
  const fs::path off = work_dir() / "input.off";
  const fs::path stl = work_dir() / "input.stl";
  apron::fuzz::write_input(obj, data, size);
  apron::fuzz::write_input(ply, data, size);
  apron::fuzz::write_input(off, data, size);
  apron::fuzz::write_input(stl, data, size);
  read_one("obj", obj, [](const fs::path& p) { return apron::io::read_obj(p); });
  read_one("ply", ply, [](const fs::path& p) { return apron::io::read_ply(p); });
  read_one("off", off, [](const fs::path& p) { return apron::io::read_off(p); });
  read_one("stl", stl, [](const fs::path& p) { return apron::io::read_stl(p); });
  return 0;
}
