// SPH against walls given as triangle meshes (a tank or solids from STL/OBJ/PLY/OFF), through the
// surface-query service: the per-step guard that keeps fluid particles on the fluid side of each
// wall, and the count of particles behind one (a diagnostic that must stay zero).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/surface/surface_query.hpp"

namespace apron::sph {

// One wall: the mesh and which side of it holds the fluid (-1: inside, a tank; +1: outside, a
// solid).
struct MeshWall {
  surface::SurfaceView surface;
  float fluid_side;
};

// The ghost particles' pressure keeps the fluid off the walls; a particle that a step still
// carried through one (within `reach` of the surface) is put back on the surface, `gap` toward
// the fluid, and loses its velocity into the wall (an inelastic wall, as at the faces of a box
// tank). Open edges of a mesh (a tank's rim) bound nothing. Owned particles only.
void keep_off_wall(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                   const DeviceVector<std::uint8_t>& flags, const MeshWall& wall, float reach,
                   float gap);

// mark[i] = 1 where points[i] lies behind the wall by more than 0 and at most `thickness`, its
// nearest part of the wall not an open edge (the band that boundary particles fill), else 0.
void mark_wall_band(const DeviceVector<Vec4>& points, const MeshWall& wall, float thickness,
                    DeviceVector<std::uint8_t>& mark);

// mark[i] = 0 where points[i] is not at least `clearance` from the wall on its fluid side (kept
// as it is elsewhere): what fluid lattices keep.
void clear_unless_fluid_side(const DeviceVector<Vec4>& points, const MeshWall& wall,
                             float clearance, DeviceVector<std::uint8_t>& mark);

// Owned particles on the wall side of the surface (anywhere, not only near it).
std::size_t count_behind_wall(const DeviceVector<Vec4>& pos,
                              const DeviceVector<std::uint8_t>& flags, const MeshWall& wall);

}  // namespace apron::sph
