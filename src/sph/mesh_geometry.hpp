// The case's meshes on the device (tank, solids, fluid volumes), each a surface-query service,
// and what the SPH setup and step ask of them: boundary particles in layers behind each wall,
// fluid lattices kept inside the tank and out of the solids, fluid filling a closed mesh, and the
// per-step guard against particles crossing a wall.
//
// Every rank holds every mesh whole (replicated): the meshes a case bounds its fluid with are
// small beside the particles (a 10^5-triangle STL is a few MB), and a whole mesh needs no halo
// of triangles when particles migrate or the partition is re-balanced.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/vec.hpp"
#include "kernels/sph/mesh_walls.hpp"
#include "kernels/surface/surface_query.hpp"
#include "sph/case_setup.hpp"
#include "sph/sph_config.hpp"

namespace apron::sph {

class MeshGeometry {
 public:
  explicit MeshGeometry(const SphCase& c);

  bool has_walls() const { return !walls_.empty(); }

  // The boundary particles of every resting mesh wall, the same on every rank: lattice points of
  // spacing dx in the mesh's own frame (so a box mesh gets the lattice of a box wall), within
  // `layers` dx behind the surface. Computed once.
  const std::vector<Vec4>& boundary_particles() const;
  // The same for solid mesh k (of the case's solid meshes) at rest, when it moves.
  std::vector<Vec4> moving_boundary_particles(std::size_t k) const;
  // Moves the moving solid meshes to their poses at time t (their guards follow them).
  void move_walls(double t);

  // Fluid lattice points `filter` holds: the box blocks' (generate_fluid) and those of each
  // fluid mesh at least dx/2 inside it, then all of them kept at least dx/2 from every wall on
  // its fluid side. Ids follow the lattices, so they do not depend on the rank count.
  HostParticles fluid_particles(const Box& filter) const;

  // After each integration: no owned particle ends a step behind a wall.
  void keep_off_walls(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                      const DeviceVector<std::uint8_t>& flags) const;
  // Owned particles behind any wall (a diagnostic: zero unless the guard failed).
  std::size_t particles_behind_walls(const DeviceVector<Vec4>& pos,
                                     const DeviceVector<std::uint8_t>& flags) const;

 private:
  struct Wall {
    const MeshShape* shape;
    float fluid_side;  // -1: the fluid is inside (the tank), +1: outside (a solid)
    std::unique_ptr<surface::SurfaceQuery> query;
    const PrescribedMotion* motion = nullptr;  // of a solid that moves
  };

  std::vector<Vec4> wall_band(const Wall& wall) const;

  const SphCase& case_;
  std::vector<Wall> walls_;
  std::vector<std::unique_ptr<surface::SurfaceQuery>> fluid_meshes_;
  mutable std::vector<Vec4> boundary_;
  mutable bool boundary_made_ = false;
};

}  // namespace apron::sph
