#include "config/mesh_shape.hpp"

#include <utility>

#include "io/mesh_reader.hpp"

namespace apron::config {
namespace {

std::string edge_text(const surface::SurfaceTopology& t) {
  return "(the first between vertices " + std::to_string(t.first_bad_edge[0]) + " and " +
         std::to_string(t.first_bad_edge[1]) + ")";
}

// What inside/outside relies on: a closed surface (or an open one where `open` says so), wound
// consistently, with normals out of the volume it encloses.
void check_mesh_shape(MapReader& r, const MeshShape& m, bool may_be_open) {
  const std::string name = "mesh file '" + m.file + "'";
  const surface::SurfaceTopology t = surface::adjacency(*m.surface).topology;
  if (t.nonmanifold_edges > 0)
    r.fail("mesh", name + ": " + std::to_string(t.nonmanifold_edges) +
                       " edges are shared by three or more triangles " + edge_text(t) +
                       "; split the mesh into closed surfaces, one per solid");
  if (t.flipped_edges > 0)
    r.fail("mesh",
           name + ": " + std::to_string(t.flipped_edges) +
               " edges join triangles wound in opposite senses " + edge_text(t) +
               "; orient every triangle the same way (counter-clockwise seen from outside)");
  if (t.boundary_edges > 0 && !m.open)
    r.fail("mesh", name + " is not closed: " + std::to_string(t.boundary_edges) +
                       " edges belong to one triangle only " + edge_text(t) + "; close it" +
                       (may_be_open ? " (or, for a tank without a lid, set open: true)" : ""));
  if (m.open) return;
  const double volume = surface::measure(*m.surface).signed_volume;
  if (volume < 0)
    r.fail("mesh", name + ": its normals point inwards (it encloses " + std::to_string(volume) +
                       " m^3 with outward normals); reverse the order of each triangle's corners");
  if (!(volume > 0)) r.fail("mesh", name + " encloses no volume");
}

}  // namespace

MeshShape read_mesh_shape(MapReader& r, bool may_be_open) {
  MeshShape m;
  m.file = resolve_input_path(r, "mesh", r.get<std::string>("mesh"), "mesh file");
  m.placement.scale = r.positive("scale", 1.0);
  m.placement.rotation_degrees = r.vec3("rotation", std::array<double, 3>{0, 0, 0});
  m.placement.offset = r.vec3("offset", std::array<double, 3>{0, 0, 0});
  if (may_be_open) m.open = r.get<bool>("open", false);
  io::TriangleMesh read;
  try {
    read = io::read_mesh(m.file);
  } catch (const io::MeshReadError& e) {
    r.fail("mesh", e.what());
  }
  m.surface = std::make_shared<const surface::HostSurface>(
      surface::placed({std::move(read.vertices), std::move(read.triangles)}, m.placement));
  const surface::SurfaceMeasures measures = surface::measure(*m.surface);
  for (int d = 0; d < 3; ++d) {
    m.bounds.lo[d] = measures.lo[d];
    m.bounds.hi[d] = measures.hi[d];
  }
  check_mesh_shape(r, m, may_be_open);
  return m;
}

}  // namespace apron::config
