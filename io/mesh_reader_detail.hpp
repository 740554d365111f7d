// What the mesh readers share (mesh_reader.cpp: OBJ, PLY, OFF; stl_reader.cpp: STL): reading the
// file, naming a place in it, splitting words, and MeshBuilder, which holds every check a mesh's
// vertices and faces must pass, so each format applies the same ones. Not part of the io API.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "io/mesh_reader.hpp"

namespace apron::io::detail {

std::string read_whole_file(const std::filesystem::path& file);
std::string line_place(const std::filesystem::path& file, std::size_t line);
std::string byte_place(const std::filesystem::path& file, std::size_t offset);
std::vector<std::string_view> split_words(std::string_view line);

template <class T>
bool parse_number(std::string_view word, T& out) {
  const char* end = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(word.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// A vertex the device can compute with: finite, and within float range.
bool coordinates_ok(double x, double y, double z);
// The error for a vertex that is not; `what` names it ("vertex 7", "facet 3, corner 2").
[[noreturn]] void throw_bad_coordinates(double x, double y, double z, const std::string& place,
                                        const std::string& what);

// Collects vertices and polygons, checking each against what a mesh must be.
class MeshBuilder {
 public:
  MeshBuilder(std::filesystem::path file, const MeshReadOptions& options);

  void add_vertex(double x, double y, double z, const std::string& place);
  // Indices are 0-based; they must name vertices read so far (or, with `vertex_total`, the
  // vertices the file declares).
  void add_polygon(const std::vector<long long>& indices, const std::string& place,
                   std::size_t vertex_total);
  // One triangle whose indices name vertices already added (STL: made by welding, not read).
  void add_facet(std::uint32_t a, std::uint32_t b, std::uint32_t c);

  std::size_t vertex_count() const { return mesh_.vertices.size(); }
  std::size_t triangle_count() const { return mesh_.triangles.size(); }

  // The mesh, or an error when no triangle is left.
  TriangleMesh finish();

 private:
  void add_triangle(std::uint32_t a, std::uint32_t b, std::uint32_t c);
  bool zero_area(std::uint32_t a, std::uint32_t b, std::uint32_t c) const;

  std::filesystem::path file_;
  MeshReadOptions options_;
  TriangleMesh mesh_;
};

}  // namespace apron::io::detail
