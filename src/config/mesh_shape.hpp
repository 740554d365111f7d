// A triangle mesh a case places ({mesh: file, scale, rotation, offset}), read, placed and checked
// when the case is read: SPH's tank, solids and fluid volumes, FLIP's solids. Geometry, not
// physics: what a workload does with the surface is its own (walls of particles, solid voxels).
#pragma once

#include <memory>
#include <string>

#include "config/yaml_reader.hpp"
#include "kernels/common/box.hpp"
#include "kernels/surface/host_surface.hpp"

namespace apron::config {

// Closed unless `open` (a tank without a lid): its open edges bound nothing.
struct MeshShape {
  std::string file;
  surface::Placement placement;
  bool open = false;
  std::shared_ptr<const surface::HostSurface> surface;  // in the case's frame
  Box bounds;                                           // of `surface`
};

// Reads {mesh: file, scale, rotation: [degrees about x, y, z], offset} (and `open` where
// may_be_open) from r, reads the file and places it. Fails through r.fail() on the key `mesh`,
// naming the file, when it cannot be read or cannot bound a volume: edges shared by three or
// more triangles, triangles wound in opposite senses, open edges (unless `open`: the count and
// the first open edge's vertices), normals pointing inwards or no volume enclosed.
MeshShape read_mesh_shape(MapReader& r, bool may_be_open);

}  // namespace apron::config
