#include "flip/flip_config.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "config/mesh_shape.hpp"
#include "config/yaml_reader.hpp"

namespace apron::flip {
namespace {

using config::box_inside;
using config::box_text;
using config::MapReader;
using config::read_box;

PressureConfig read_pressure(MapReader r) {
  PressureConfig c;
  // float32 voxels: below ~1e-6 the true residual stalls at its round-off floor.
  c.tolerance = r.in_range("tolerance", 1e-6, 0.1, c.tolerance);
  c.max_iterations = r.get<int>("max_iterations", c.max_iterations);
  if (c.max_iterations < 1 || c.max_iterations > 100000)
    r.fail("max_iterations", "must be between 1 and 100000");
  c.preconditioner = r.choice("preconditioner", {"none", "jacobi", "mgpcg"}, c.preconditioner);
  c.check_every = r.get<int>("check_every", c.check_every);
  if (c.check_every < 1 || c.check_every > 1000)
    r.fail("check_every", "must be between 1 and 1000");
  r.finish();
  return c;
}

FlipConfig read_flip(MapReader r) {
  FlipConfig c;
  c.voxel_size = r.positive("voxel_size");
  c.brick_size = r.get<int>("brick_size", c.brick_size);
  if (c.brick_size < 4 || c.brick_size > 32 || (c.brick_size & (c.brick_size - 1)))
    r.fail("brick_size", "must be a power of two from 4 to 32 (the paper uses 8)");
  c.particles_per_voxel = r.get<int>("particles_per_voxel", c.particles_per_voxel);
  if (c.particles_per_voxel != 1 && c.particles_per_voxel != 8 && c.particles_per_voxel != 27)
    r.fail("particles_per_voxel", "must be 1, 8 or 27 (a jittered n^3 lattice in each voxel)");
  c.flip_ratio = r.in_range("flip_ratio", 0, 1, c.flip_ratio);
  c.cfl = r.in_range("cfl", 0.01, 1, c.cfl);
  c.max_dt = r.positive("max_dt", c.max_dt);
  c.density = r.positive("density", c.density);
  c.gravity = r.vec3("gravity", c.gravity);
  c.wall_friction = r.in_range("wall_friction", 0, 2, c.wall_friction);
  const long seed = r.get<long>("seed", 1);
  if (seed < 0) r.fail("seed", "must be 0 or positive");
  c.seed = static_cast<std::uint64_t>(seed);
  c.pressure = read_pressure(r.child("pressure"));
  r.finish();
  return c;
}

// The voxel count along each axis, in float64 before anything is allocated; the voxel size must
// divide the domain (its faces are the tank's walls).
void check_grid(const Box& domain, const FlipConfig& f, MapReader& root) {
  double voxels = 1;
  for (int d = 0; d < 3; ++d) {
    const double n = domain.extent(d) / f.voxel_size;
    if (!(n >= 1)) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "voxel_size %g is larger than the domain along axis %d; make it smaller than "
                    "%g",
                    f.voxel_size, d, domain.extent(d));
      root.fail("flip", text);
    }
    if (std::abs(n - std::round(n)) > 1e-6 * n) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "voxel_size %g does not divide the domain's extent %g along axis %d; use "
                    "%.9g (%g voxels)",
                    f.voxel_size, domain.extent(d), d, domain.extent(d) / std::round(n),
                    std::round(n));
      root.fail("flip", text);
    }
    voxels *= std::round(n);
  }
  // Every rank holds a table of 4 + 1 bytes per brick of the domain (owner, flags) and the
  // pool's slot table: 2^26 bricks (the domain of 2048^3 voxels in 8^3 bricks) keep it under
  // 1 GiB.
  const double bricks = voxels / std::pow(f.brick_size, 3);
  if (!(bricks <= 67108864.0)) {
    char text[240];
    std::snprintf(text, sizeof text,
                  "voxel_size %g gives %.3g voxels in the domain, %.3g bricks of %d^3 (at most "
                  "2^26); increase voxel_size or brick_size, or shrink the domain",
                  f.voxel_size, voxels, bricks, f.brick_size);
    root.fail("flip", text);
  }
}

void check_blocks(const config::CaseConfig& shared, const FlipCase& c, MapReader& root) {
  for (std::size_t i = 0; i < c.fluid_blocks.size(); ++i) {
    const Box& b = c.fluid_blocks[i];
    if (!box_inside(b, shared.domain, 1e-9))
      root.fail("fluid", "block " + std::to_string(i) + " " + box_text(b) +
                             " is not inside the domain " + box_text(shared.domain));
    for (int d = 0; d < 3; ++d)
      if (b.extent(d) < c.flip.voxel_size)
        root.fail("fluid", "block " + std::to_string(i) + " is thinner than flip.voxel_size " +
                               "along axis " + std::to_string(d) + " (it would hold no voxel)");
    for (std::size_t k = 0; k < c.solids.size(); ++k)
      if (b.intersects(c.solids[k]))
        root.fail("solids", "solid " + std::to_string(k) + " " + box_text(c.solids[k]) +
                                " overlaps fluid block " + std::to_string(i) +
                                "; fluid cannot start inside a solid");
  }
}

}  // namespace

std::shared_ptr<const FlipCase> read_flip_case(const config::CaseConfig& shared, MapReader& root) {
  auto c = std::make_shared<FlipCase>();
  c->flip = read_flip(root.child("flip"));
  for (auto& block : root.list("fluid")) {
    c->fluid_blocks.push_back(read_box(block));
    block.finish();
  }
  if (c->fluid_blocks.empty()) root.fail("fluid", "at least one fluid block {lo, hi} is required");
  for (auto& solid : root.list("solids")) {
    if (solid.has("mesh")) {
      c->solid_meshes.push_back(config::read_mesh_shape(solid, false));
    } else {
      c->solids.push_back(read_box(solid));
    }
    solid.finish();
  }
  check_grid(shared.domain, c->flip, root);
  check_blocks(shared, *c, root);
  return c;
}

config::WorkloadSchema flip_schema() {
  return {config::kTimeStepping, [](const config::CaseConfig& c, MapReader& root) {
            return std::shared_ptr<const config::WorkloadSettings>(read_flip_case(c, root));
          }};
}

}  // namespace apron::flip
