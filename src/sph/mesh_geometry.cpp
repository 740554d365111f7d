#include "sph/mesh_geometry.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/common/algorithms.hpp"
#include "runtime/runtime.hpp"

namespace apron::sph {
namespace {

// Lattice candidates go to the device in chunks of this many points (64 MiB of positions).
constexpr std::size_t kChunk = std::size_t(1) << 22;
// Lattice points lie dx/2 from the walls of the boxes they fill; float round-off of the distance
// must not drop them.
constexpr double kClearanceSlack = 1e-3;

// Cells of two spacings at most: the per-step guard asks for every particle within a spacing of a
// wall, and far from the walls finds its cell empty.
std::unique_ptr<surface::SurfaceQuery> service_of(const MeshShape& shape, double dx) {
  auto query = std::make_unique<surface::SurfaceQuery>();
  surface::GridOptions options;
  options.max_cell_edge = 2 * dx;
  query->build(*shape.surface, options);
  query->classify_cells();  // the fluid lattice's far points then need no search
  return query;
}

// Calls visit(begin, chunk) for consecutive chunks of the points from `first` on, on the device.
template <class F>
void for_each_chunk(const std::vector<Vec4>& points, std::size_t first, F visit) {
  for (std::size_t begin = first; begin < points.size(); begin += kChunk) {
    const std::size_t n = std::min(kChunk, points.size() - begin);
    const DeviceVector<Vec4> chunk(points.begin() + begin, points.begin() + begin + n);
    visit(begin, chunk);
  }
}

// Warns where a closed mesh is thinner than dx: a ray from just inside each triangle's centroid,
// against its normal, that leaves through the far side within dx. Boundary particles (or fluid
// lattice points) a spacing apart cannot resolve such a feature.
void warn_if_thinner_than(const MeshShape& shape, const surface::SurfaceQuery& query, double dx,
                          const std::string& what) {
  const auto& v = shape.surface->vertices;
  const auto& tris = shape.surface->triangles;
  std::vector<Vec4> origins(tris.size()), directions(tris.size());
  for (std::size_t t = 0; t < tris.size(); ++t) {
    const auto &a = v[tris[t][0]], &b = v[tris[t][1]], &c = v[tris[t][2]];
    double n[3] = {(b[1] - a[1]) * (c[2] - a[2]) - (b[2] - a[2]) * (c[1] - a[1]),
                   (b[2] - a[2]) * (c[0] - a[0]) - (b[0] - a[0]) * (c[2] - a[2]),
                   (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])};
    const double length = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (!(length > 0)) continue;  // zero area: a ray along nothing, which hits nothing
    Vec4 o, d;
    float* po = &o.x;
    float* pd = &d.x;
    for (int k = 0; k < 3; ++k) {
      pd[k] = static_cast<float>(-n[k] / length);
      po[k] = static_cast<float>((a[k] + b[k] + c[k]) / 3 - 1e-4 * dx * n[k] / length);
    }
    o.w = d.w = 0;
    origins[t] = o;
    directions[t] = d;
  }
  const DeviceVector<Vec4> device_origins(origins.begin(), origins.end());
  const DeviceVector<Vec4> device_directions(directions.begin(), directions.end());
  DeviceVector<surface::RayHit> hits(tris.size());
  query.ray_hits(device_origins, device_directions, static_cast<float>(dx),
                 DeviceSpan<surface::RayHit>(raw(hits), hits.size()));
  const std::vector<surface::RayHit> host = to_host(hits);
  std::size_t thinnest = host.size();
  for (std::size_t t = 0; t < host.size(); ++t)
    if (host[t].triangle >= 0 && (thinnest == host.size() || host[t].t < host[thinnest].t))
      thinnest = t;
  if (thinnest == host.size()) return;
  const Vec4& at = origins[thinnest];
  Log::warn(
      "%s mesh '%s' is %.3g m thick near (%.6g, %.6g, %.6g), less than sph.spacing = %g: "
      "its particles cannot resolve it; lower sph.spacing or thicken the mesh there",
      what.c_str(), shape.file.c_str(), host[thinnest].t, at.x, at.y, at.z, dx);
}

// keep[i] = 0 for the points from `first` on that are not `clearance` on the wall's fluid side
// (clear_unless_fluid_side, chunk by chunk).
void keep_fluid_side(const std::vector<Vec4>& points, std::size_t first, const MeshWall& wall,
                     float clearance, std::vector<std::uint8_t>& keep) {
  for_each_chunk(points, first, [&](std::size_t begin, const DeviceVector<Vec4>& chunk) {
    DeviceVector<std::uint8_t> mark(keep.begin() + begin, keep.begin() + begin + chunk.size());
    clear_unless_fluid_side(chunk, wall, clearance, mark);
    apron::copy(mark.begin(), mark.end(), keep.begin() + begin);
  });
}

}  // namespace

MeshGeometry::MeshGeometry(const SphCase& c) : case_(c) {
  if (c.boundary.tank_mesh)
    walls_.push_back(
        {&*c.boundary.tank_mesh, -1.0f, service_of(*c.boundary.tank_mesh, c.sph.spacing)});
  for (std::size_t k = 0; k < c.boundary.solid_meshes.size(); ++k) {
    const MeshShape& s = c.boundary.solid_meshes[k];
    const PrescribedMotion& motion = c.boundary.mesh_motions[k];
    walls_.push_back({&s, 1.0f, service_of(s, c.sph.spacing), motion.moves() ? &motion : nullptr});
  }
  for (const MeshShape& s : c.fluid_meshes) fluid_meshes_.push_back(service_of(s, c.sph.spacing));
  const std::size_t first_solid = c.boundary.tank_mesh ? 1 : 0;
  for (std::size_t k = first_solid; k < walls_.size(); ++k)
    warn_if_thinner_than(*walls_[k].shape, *walls_[k].query, c.sph.spacing,
                         "solid mesh " + std::to_string(k - first_solid));
  for (std::size_t k = 0; k < fluid_meshes_.size(); ++k)
    warn_if_thinner_than(c.fluid_meshes[k], *fluid_meshes_[k], c.sph.spacing,
                         "fluid mesh " + std::to_string(k));
}

// The lattice of spacing dx over the mesh's bounds in its own (unrotated) frame, grown by the
// wall thickness, mapped to the case's frame; the points in the band behind the wall.
std::vector<Vec4> MeshGeometry::wall_band(const Wall& wall) const {
  const double dx = case_.sph.spacing, thickness = case_.boundary.layers * dx;
  const surface::Placement& place = wall.shape->placement;
  const std::array<double, 9> r = place.rotation();
  auto to_local = [&](const std::array<double, 3>& x) {  // R^T (x - offset)
    std::array<double, 3> q{};
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k) q[i] += r[3 * k + i] * (x[k] - place.offset[k]);
    return q;
  };
  Box local;
  for (int d = 0; d < 3; ++d) local.lo[d] = HUGE_VAL, local.hi[d] = -HUGE_VAL;
  for (const auto& v : wall.shape->surface->vertices) {
    const auto q = to_local(v);
    for (int d = 0; d < 3; ++d) {
      local.lo[d] = std::min(local.lo[d], q[d]);
      local.hi[d] = std::max(local.hi[d], q[d]);
    }
  }
  HostParticles lattice;
  const Box grown = local.expanded(thickness);
  append_lattice(grown, dx, grown, 0, lattice);
  surface::Placement unscaled = place;
  unscaled.scale = 1;  // the mesh's own frame is already scaled
  for (Vec4& p : lattice.pos) {
    const auto x = unscaled.apply({p.x, p.y, p.z});
    p = {static_cast<float>(x[0]), static_cast<float>(x[1]), static_cast<float>(x[2]), 0};
  }
  std::vector<Vec4> band;
  const MeshWall device_wall{wall.query->view(), wall.fluid_side};
  DeviceVector<std::uint8_t> mark;
  for_each_chunk(lattice.pos, 0, [&](std::size_t first, const DeviceVector<Vec4>& chunk) {
    mark_wall_band(chunk, device_wall, static_cast<float>(thickness), mark);
    const std::vector<std::uint8_t> keep = to_host(mark);
    for (std::size_t i = 0; i < keep.size(); ++i)
      if (keep[i]) band.push_back(lattice.pos[first + i]);
  });
  return band;
}

const std::vector<Vec4>& MeshGeometry::boundary_particles() const {
  if (!boundary_made_) {
    for (const Wall& wall : walls_) {
      if (wall.motion) continue;
      const std::vector<Vec4> band = wall_band(wall);
      boundary_.insert(boundary_.end(), band.begin(), band.end());
    }
    boundary_made_ = true;
  }
  return boundary_;
}

std::vector<Vec4> MeshGeometry::moving_boundary_particles(std::size_t k) const {
  const std::size_t first_solid = case_.boundary.tank_mesh ? 1 : 0;
  return wall_band(walls_[first_solid + k]);
}

void MeshGeometry::move_walls(double t) {
  for (Wall& wall : walls_) {
    if (!wall.motion) continue;
    const RigidPose pose = wall.motion->at(t);
    const auto& rest = wall.shape->surface->vertices;
    std::vector<Vec4> moved(rest.size());
    for (std::size_t i = 0; i < rest.size(); ++i) {
      const auto x = pose.apply(rest[i]);
      moved[i] = {static_cast<float>(x[0]), static_cast<float>(x[1]), static_cast<float>(x[2]), 0};
    }
    const DeviceVector<Vec4> device(moved.begin(), moved.end());
    wall.query->refit(device);
  }
}

HostParticles MeshGeometry::fluid_particles(const Box& filter) const {
  const double dx = case_.sph.spacing;
  const auto clearance = static_cast<float>(0.5 * dx * (1 - kClearanceSlack));
  HostParticles candidates = generate_fluid(case_, filter);
  std::int64_t first_id = block_lattice_size(case_);
  std::vector<std::uint8_t> keep(candidates.pos.size(), 1);
  for (std::size_t k = 0; k < fluid_meshes_.size(); ++k) {
    const Box& bounds = case_.fluid_meshes[k].bounds;
    const std::size_t before = candidates.pos.size();
    append_lattice(bounds, dx, filter, first_id, candidates);
    first_id += lattice_size(bounds, dx);
    keep.resize(candidates.pos.size(), 1);
    // Inside the mesh by dx/2 at least: its outside is a wall of clearance dx/2 for these points.
    keep_fluid_side(candidates.pos, before, {fluid_meshes_[k]->view(), -1.0f}, clearance, keep);
  }
  for (const Wall& wall : walls_)
    keep_fluid_side(candidates.pos, 0, {wall.query->view(), wall.fluid_side}, clearance, keep);
  HostParticles out;
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) {
      out.pos.push_back(candidates.pos[i]);
      out.id.push_back(candidates.id[i]);
    }
  return out;
}

void MeshGeometry::keep_off_walls(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                                  const DeviceVector<std::uint8_t>& flags) const {
  // A step moves a particle by at most cfl h < dx: one spacing finds every crossing. Put back a
  // hundredth of a spacing off the surface, so the next step does not find it on the wall.
  const auto dx = static_cast<float>(case_.sph.spacing);
  for (const Wall& wall : walls_)
    keep_off_wall(pos, vel, flags, {wall.query->view(), wall.fluid_side}, dx, 0.01f * dx);
}

std::size_t MeshGeometry::particles_behind_walls(const DeviceVector<Vec4>& pos,
                                                 const DeviceVector<std::uint8_t>& flags) const {
  std::size_t n = 0;
  for (const Wall& wall : walls_)
    n += count_behind_wall(pos, flags, {wall.query->view(), wall.fluid_side});
  return n;
}

}  // namespace apron::sph
