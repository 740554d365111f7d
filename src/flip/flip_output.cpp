// FLIP's diagnostics, visual series and blocks, and its part of the run report.
#include "flip/flip_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "config/yaml_reader.hpp"
#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/checksum.hpp"
#include "kernels/common/element_hash.hpp"
#include "kernels/common/primitives.hpp"
#include "runtime/json.hpp"

namespace apron::flip {

// ---- diagnostics and output --------------------------------------------------------------------

Diagnostics FlipSolver::diagnostics() const {
  const auto sums = particle_sums(pos_, vel_, particles_.size());
  double totals[] = {sums.speed2, static_cast<double>(pool_.size())};
  global_sum(ranks_.comm, std::span<double>(totals));
  double maxima[] = {sums.max_speed, sums.max_x};
  global_max(ranks_.comm, std::span<double>(maxima));
  Diagnostics d;
  d.step = clock_.step;
  d.time = clock_.time;
  d.particles = global_sum(ranks_.comm, static_cast<std::int64_t>(particles_.size()));
  d.kinetic = 0.5 * particle_mass_ * totals[0];
  d.fluid_voxels = projection_.fluid_voxels;
  d.volume = static_cast<double>(d.fluid_voxels) * std::pow(case_.flip.voxel_size, 3);
  d.bricks = static_cast<std::int64_t>(totals[1]);
  d.cg_iterations = projection_.iterations;
  d.cg_residual = projection_.residual;
  d.max_speed = maxima[0];
  d.surge_front = d.particles ? maxima[1] - config_.domain.lo[0] : 0;
  return d;
}

void FlipSolver::log_summary() const {
  Log::info("flip: %lld particles, %d x %d x %d voxels of %g m in bricks of %d^3, %d rank(s)",
            static_cast<long long>(global_particles_), grid_.voxels[0], grid_.voxels[1],
            grid_.voxels[2], grid_.dx, grid_.b, ranks_.size);
}

std::vector<double> FlipSolver::diagnostics_row() {
  const Diagnostics d = diagnostics();
  return {static_cast<double>(d.particles),
          d.kinetic,
          static_cast<double>(d.fluid_voxels),
          d.volume,
          static_cast<double>(d.bricks),
          static_cast<double>(d.cg_iterations),
          d.cg_residual,
          d.max_speed,
          d.surge_front};
}

std::vector<io::VisualBlock> FlipSolver::visual_blocks() {
  return {particle_block(), brick_block()};
}

io::VisualBlock FlipSolver::particle_block() {
  const Snapshot s = snapshot();
  stage_pos_.clear(), stage_vel_.clear();
  for (std::size_t p = 0; p < s.pos.size(); ++p) {
    stage_pos_.insert(stage_pos_.end(), {s.pos[p].x, s.pos[p].y, s.pos[p].z});
    stage_vel_.insert(stage_vel_.end(), {s.vel[p].x, s.vel[p].y, s.vel[p].z});
  }
  stage_id_ = s.id;
  stage_rank_.assign(s.id.size(), ranks_.rank);
  io::VisualBlock particles;
  particles.channel = "particles";
  particles.kind = io::VisualBlock::Kind::points;
  particles.points = s.id.size();
  particles.point_fields = {{"position", io::Dtype::f32, 3, stage_pos_.data()},
                            {"velocity", io::Dtype::f32, 3, stage_vel_.data()},
                            {"id", io::Dtype::i64, 1, stage_id_.data()},
                            {"rank", io::Dtype::i32, 1, stage_rank_.data()}};
  return particles;
}

// The bricks as one image piece per rank: the rank's box (cut on brick planes, so the pieces tile
// the domain as ParaView's image reader needs), cell data; cells outside every brick have marker
// -1.
io::VisualBlock FlipSolver::brick_block() {
  io::VisualBlock block;
  block.channel = "bricks";
  block.kind = io::VisualBlock::Kind::image;
  block.origin = {config_.domain.lo[0], config_.domain.lo[1], config_.domain.lo[2]};
  block.spacing = {grid_.dx, grid_.dx, grid_.dx};
  block.whole_extent = {0, grid_.voxels[0], 0, grid_.voxels[1], 0, grid_.voxels[2]};
  const auto values = voxel_values();
  const Box& box = exchange_.partition().subdomain(ranks_.rank);
  std::array<int, 3> lo, hi;  // voxels [lo, hi)
  for (int d = 0; d < 3; ++d) {
    const auto voxel = [&](double x) {
      return static_cast<int>(std::clamp(std::round((x - config_.domain.lo[d]) / grid_.dx), 0.0,
                                         static_cast<double>(grid_.voxels[d])));
    };
    lo[d] = voxel(box.lo[d]), hi[d] = std::max(lo[d], voxel(box.hi[d]));
  }
  for (int d = 0; d < 3; ++d) block.extent[2 * d] = lo[d], block.extent[2 * d + 1] = hi[d];
  const std::array<std::size_t, 3> n{static_cast<std::size_t>(hi[0] - lo[0]),
                                     static_cast<std::size_t>(hi[1] - lo[1]),
                                     static_cast<std::size_t>(hi[2] - lo[2])};
  block.cells = n[0] * n[1] * n[2];
  stage_cell_velocity_.assign(3 * block.cells, 0.0f);
  stage_cell_pressure_.assign(block.cells, 0.0f);
  stage_cell_marker_.assign(block.cells, -1);
  for (const auto& v : values) {
    // Bricks on the domain's far faces reach past it (a domain need not be whole bricks).
    bool inside = true;
    for (int d = 0; d < 3; ++d) inside = inside && v.voxel[d] >= lo[d] && v.voxel[d] < hi[d];
    if (!inside) continue;
    const std::size_t c =
        (static_cast<std::size_t>(v.voxel[2] - lo[2]) * n[1] + (v.voxel[1] - lo[1])) * n[0] +
        (v.voxel[0] - lo[0]);
    stage_cell_velocity_[3 * c] = v.velocity.x;
    stage_cell_velocity_[3 * c + 1] = v.velocity.y;
    stage_cell_velocity_[3 * c + 2] = v.velocity.z;
    stage_cell_pressure_[c] = v.pressure;
    stage_cell_marker_[c] = v.marker;
  }
  block.cell_fields = {{"velocity", io::Dtype::f32, 3, stage_cell_velocity_.data()},
                       {"pressure", io::Dtype::f32, 1, stage_cell_pressure_.data()},
                       {"marker", io::Dtype::i32, 1, stage_cell_marker_.data()}};
  return block;
}

// The particles, and the bricks' interiors as cell data: velocity at voxel centres (the mean of
// the two faces per axis), pressure [Pa], divergence after the projection [1/s] and the marker.
void FlipSolver::write_series() {
  const io::VisualBlock particles = particle_block();
  series(0).write(clock_.step, clock_.time,
                  io::PointSetPart{particles.points, particles.point_fields});
  const auto values = voxel_values();
  std::vector<io::ImageBrick> bricks;
  const double dx = grid_.dx;
  for (std::size_t s = 0; s < pool_.size(); ++s) {
    int c[3];
    grid_.brick_coords(pool_.keys()[s], c);
    io::ImageBrick b;
    for (int d = 0; d < 3; ++d) b.origin[d] = config_.domain.lo[d] + c[d] * grid_.b * dx;
    b.spacing = {dx, dx, dx};
    b.dims = {grid_.b, grid_.b, grid_.b};
    bricks.push_back(b);
  }
  std::vector<float> velocity, pressure, divergence;
  std::vector<std::int32_t> marker;
  for (const auto& v : values) {
    velocity.insert(velocity.end(), {v.velocity.x, v.velocity.y, v.velocity.z});
    pressure.push_back(v.pressure);
    divergence.push_back(v.divergence);
    marker.push_back(v.marker);
  }
  const io::HostField fields[] = {{"velocity", io::Dtype::f32, 3, velocity.data()},
                                  {"pressure", io::Dtype::f32, 1, pressure.data()},
                                  {"divergence", io::Dtype::f32, 1, divergence.data()},
                                  {"marker", io::Dtype::i32, 1, marker.data()}};
  series(1).write(clock_.step, clock_.time, io::BrickSetPart{bricks, fields, true});
}

FlipSolver::Snapshot FlipSolver::snapshot() const {
  const std::size_t n = particles_.size();
  return {to_host(pos_, n), to_host(vel_, n), to_host(id_, n)};
}

// Per interior voxel of every local slot, slot after slot, x fastest (the brick series' order).
std::vector<FlipSolver::VoxelValues> FlipSolver::voxel_values() const {
  const auto& vel_dev = *velocity_;
  const auto& marker_dev = *marker_;
  const auto& pressure_dev = *pressure_;
  const std::size_t rows = pool_.size() * grid_.stored_per_brick();
  if (voxels_.size() < rows) return {};
  const auto vel = to_host(vel_dev, rows);
  const auto marker = to_host(marker_dev, rows);
  const auto pressure = to_host(pressure_dev, rows);
  const double to_pascal = dt_ > 0 ? case_.flip.density * case_.flip.voxel_size / dt_ : 0;
  std::vector<VoxelValues> out;
  out.reserve(pool_.size() * grid_.interior_per_brick());
  const int b = grid_.b;
  for (std::size_t s = 0; s < pool_.size(); ++s) {
    int c[3];
    grid_.brick_coords(pool_.keys()[s], c);
    for (int k = 0; k < b; ++k)
      for (int j = 0; j < b; ++j)
        for (int i = 0; i < b; ++i) {
          const std::size_t row = grid_.row(s, i, j, k);
          const Vec4 u = vel[row];
          const Vec4 ux = vel[grid_.row(s, i + 1, j, k)], uy = vel[grid_.row(s, i, j + 1, k)],
                     uz = vel[grid_.row(s, i, j, k + 1)];
          VoxelValues v;
          v.voxel = {c[0] * b + i, c[1] * b + j, c[2] * b + k};
          v.velocity = {0.5f * (u.x + ux.x), 0.5f * (u.y + uy.y), 0.5f * (u.z + uz.z), 0};
          v.marker = marker[row];
          v.pressure = static_cast<float>(to_pascal * pressure[row]);
          v.divergence =
              marker[row] == kFluid ? (ux.x - u.x + uy.y - u.y + uz.z - u.z) / grid_.dx : 0.0f;
          out.push_back(v);
        }
  }
  return out;
}

void FlipSolver::report_fields(Json& json) const {
  std::int64_t peak = static_cast<std::int64_t>(pool_.peak());
  double bytes = static_cast<double>(particles_.device_bytes() + voxels_.device_bytes() +
                                     halo_.device_bytes() + exchange_.device_bytes() +
                                     (multigrid_ ? multigrid_->device_bytes() : 0));
  const double per_particle =
      global_max(ranks_.comm, particles_.size() ? bytes / particles_.size() : 0.0);
  const double max_peak = global_max(ranks_.comm, static_cast<double>(peak));
  const double bricks = global_sum(ranks_.comm, static_cast<double>(pool_.size()));
  json.value("particles", static_cast<long long>(global_particles_));
  json.value("voxel_size", case_.flip.voxel_size);
  json.value("brick_size", grid_.b);
  json.value("bricks", static_cast<long long>(bricks));
  json.value("brick_pool_peak", max_peak);  // the most bricks one rank held at once
  json.value("replans", static_cast<long long>(replans_));
  json.value("rebalances", static_cast<long long>(rebalances_));
  json.value("cg_iterations", projection_.iterations);
  json.value("cg_residual", projection_.residual);
  json.value("device_bytes_per_particle", per_particle);
  const TransportStats& halo = transport_.stats();
  // This rank's (rank 0's) exchanges: brick aprons, the multigrid's, and particle migration.
  json.begin_object("halo");
  json.value("transport", transport_.name());
  json.value("messages", static_cast<long long>(halo.messages));
  json.value("bytes_sent", static_cast<double>(halo.bytes_sent));
  json.value("host_seconds", halo.seconds);
  json.end_object();
}

}  // namespace apron::flip
