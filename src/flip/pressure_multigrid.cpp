#include "flip/pressure_multigrid.hpp"

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "kernels/common/algorithms.hpp"
#include "kernels/flip/multigrid.hpp"

namespace apron::flip {
namespace {

// Damped Jacobi, two sweeps down and two up (McAdams et al. 2010); an even count ends each
// smoothing in the buffer it started from.
constexpr float kOmega = 2.0f / 3.0f;
constexpr int kSweeps = 2;
// The last level is a single cell whose neighbours all lie outside the domain (solid): it has
// no equation and its correction is 0 whatever the sweeps; two keep the code path uniform.
constexpr int kBottomSweeps = 2;

// Element-wise MPI_Allreduce of a device array, staged through the host.
template <class T>
void all_reduce(DeviceVector<T>& values, std::vector<T>& host, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm) {
  host.resize(values.size());
  apron::copy(values.begin(), values.end(), host.begin());
  MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.size()), type, op, comm);
  apron::copy(host.begin(), host.end(), values.begin());
}

}  // namespace

struct PressureMultigrid::Level {
  SlotGeometry geometry;  // origin: `origin` below, or the fine level's
  DeviceVector<int> origin;
  std::unique_ptr<BrickHalo> halo;
  ParticleStore cells;  // per stored cell:
  Field<float> x = cells.add<float>("x"), swap = cells.add<float>("swap"),
               residual = cells.add<float>("residual"), own_rhs = cells.add<float>("rhs");
  Field<std::int32_t> type = cells.add<std::int32_t>("type");
  DeviceVector<std::int32_t> own_stencil;
  const std::int32_t* stencil = nullptr;  // own_stencil's, or the fine level's
  const float* rhs = nullptr;             // own_rhs, or the fine level's residual

  Level(Transport& transport, const BrickGrid& grid) {
    geometry.grid = grid;
    halo = std::make_unique<BrickHalo>(transport, grid.b, BrickGrid::kApron);
  }
  // Other ranks' copies of a field (the kernels read across brick faces through the neighbour
  // table: no apron to fill).
  void refresh(FieldRef field) { halo->refresh(cells, std::span<const FieldRef>(&field, 1)); }
  LevelGeometry with_neighbours() const { return {geometry, halo->neighbour_table()}; }
  // After the halo's plan: storage for its slots. Grown only, as the solver's voxels: a resize
  // that regains rows fills them and synchronises.
  void resize_cells() {
    if (cells.size() < halo->total_voxels()) cells.resize(halo->total_voxels());
  }
  // A coarse level's own slot tables: its stencil's room and the slots' first cells (the finest
  // level takes both from the solver at setup()).
  void set_slots(const std::vector<BrickCoord>& bricks) {
    const std::size_t interior = bricks.size() * geometry.grid.interior_per_brick();
    if (own_stencil.size() < interior) resize_per_particle(own_stencil, interior);
    stencil = raw(own_stencil);
    std::vector<int> first;
    for (const auto& b : bricks)
      for (int d = 0; d < 3; ++d) first.push_back(b[d] * geometry.grid.b);
    upload(origin, first);
    geometry.origin = raw(origin);
    geometry.slots = bricks.size();
    rhs = raw(*own_rhs);
  }
};

namespace {

// The grid of the level below: half the cells per brick edge, the same bricks.
BrickGrid coarser(const BrickGrid& g) {
  BrickGrid c = g;
  c.b = g.b / 2;
  c.dx = 2 * g.dx;
  for (int d = 0; d < 3; ++d) c.voxels[d] = (g.voxels[d] + 1) / 2;
  return c;
}

// Cells per brick edge of the dense hierarchies: 8 keeps the padding past the domain and the
// apron under 2x the cells.
constexpr int kDenseBrick = 8;

// Every brick of a dense grid, in key order (its slot is its key).
std::vector<BrickCoord> all_bricks(const BrickGrid& g) {
  std::vector<BrickCoord> bricks;
  for (int z = 0; z < g.bricks[2]; ++z)
    for (int y = 0; y < g.bricks[1]; ++y)
      for (int x = 0; x < g.bricks[0]; ++x) bricks.push_back({x, y, z});
  return bricks;
}

}  // namespace

PressureMultigrid::PressureMultigrid(Transport& transport, const BrickGrid& fine)
    : transport_(transport), self_(MPI_COMM_SELF) {
  MPI_Comm_size(transport.comm(), &ranks_);
  Hierarchy& sparse = hierarchies_.emplace_back();
  for (BrickGrid g = fine;; g = coarser(g)) {
    sparse.emplace_back(transport_, g);
    if (g.b == 1) break;
  }
  // Dense hierarchies, each over the cells of the one before's last level (one per brick),
  // until a last level is a single cell.
  BrickGrid cells = sparse.back().geometry.grid;
  while (cells.bricks[0] * cells.bricks[1] * cells.bricks[2] > 1) {
    BrickGrid g;
    g.dx = cells.dx * static_cast<float>(cells.b);
    const int widest = std::max({cells.bricks[0], cells.bricks[1], cells.bricks[2]});
    g.b = std::min(kDenseBrick, static_cast<int>(std::bit_ceil(static_cast<unsigned>(widest))));
    for (int d = 0; d < 3; ++d) {
      g.origin[d] = fine.origin[d];
      g.voxels[d] = cells.bricks[d];
      g.bricks[d] = (g.voxels[d] + g.b - 1) / g.b;
    }
    const auto bricks = all_bricks(g);
    Hierarchy& dense = hierarchies_.emplace_back();
    for (BrickGrid l = g;; l = coarser(l)) {
      Level& level = dense.emplace_back(self_, l);
      if (dense.size() == 1)
        level.halo->plan(bricks, [](const BrickCoord&) { return 0; });
      else
        level.halo->plan_like(*dense.front().halo);
      level.resize_cells();
      level.set_slots(bricks);
      if (l.b == 1) break;
    }
    if (hierarchies_.size() > 2) set_handover(hierarchies_.size() - 2, all_bricks(cells));
    cells = dense.back().geometry.grid;
  }
  // NCCL sets up a collective's links at its first call (~0.1 s): here, in the first plan,
  // rather than in the first step's pressure solve. The cells hold zeros.
  if (ranks_ > 1 && hierarchies_.size() > 1) {
    auto& rhs = *hierarchies_[1].front().own_rhs;
    transport_.sum_in_place(raw(rhs), rhs.size());
  }
}

PressureMultigrid::~PressureMultigrid() = default;

void PressureMultigrid::plan(const BrickHalo& fine_halo) {
  const auto& bricks = fine_halo.local_coords();
  Hierarchy& levels = hierarchies_.front();
  for (std::size_t l = 0; l < levels.size(); ++l) {
    levels[l].halo->plan_like(fine_halo);
    levels[l].resize_cells();
    if (l > 0) levels[l].set_slots(bricks);
  }
  if (hierarchies_.size() > 1) set_handover(0, bricks);
}

// Rows of hierarchy h's last level (one cell per brick; `bricks` in slot order) and of the same
// cells in hierarchy h + 1's first (dense: slot = brick key).
void PressureMultigrid::set_handover(std::size_t h, const std::vector<BrickCoord>& bricks) {
  const BrickGrid& last = hierarchies_[h].back().geometry.grid;
  const BrickGrid& next = hierarchies_[h + 1].front().geometry.grid;
  std::vector<std::uint32_t> from, to;
  for (std::size_t s = 0; s < bricks.size(); ++s) {
    from.push_back(static_cast<std::uint32_t>(last.row(s, 0, 0, 0)));
    const BrickCoord& c = bricks[s];
    const std::size_t slot = next.brick_key(c[0], c[1], c[2]);
    to.push_back(
        static_cast<std::uint32_t>(next.row(slot, c[0] % next.b, c[1] % next.b, c[2] % next.b)));
  }
  if (handovers_.size() <= h) handovers_.resize(h + 1);
  upload(handovers_[h].from_rows, from);
  upload(handovers_[h].to_rows, to);
}

// Types and stencils of every level after the first, each coarsened from the one before.
void PressureMultigrid::coarsen(Hierarchy& levels) {
  for (std::size_t l = 1; l < levels.size(); ++l) {
    Level& level = levels[l];
    coarsen_cell_types(levels[l - 1].geometry, raw(*levels[l - 1].type), level.geometry,
                       raw(*level.type));
    level.refresh(level.type);
    level_stencil(level.with_neighbours(), raw(*level.type), raw(level.own_stencil));
  }
}

void PressureMultigrid::setup(const SlotGeometry& g, const std::int32_t* stencil) {
  Level& fine = hierarchies_.front().front();
  fine.geometry = g;
  fine.stencil = stencil;
  fine_cell_types(g, stencil, raw(*fine.type));
  coarsen(hierarchies_.front());
  for (std::size_t h = 1; h < hierarchies_.size(); ++h) {
    Level& first = hierarchies_[h].front();
    auto& types = *first.type;
    clear(types);  // kCellAir: no brick there
    const Handover& in = handovers_[h - 1];
    copy_rows(in.from_rows.size(), raw(in.from_rows), raw(*hierarchies_[h - 1].back().type),
              raw(in.to_rows), raw(types));
    // One rank holds each brick, the others kCellAir (0): the maximum is the holder's type.
    if (h == 1 && ranks_ > 1) all_reduce(types, host_types_, MPI_INT, MPI_MAX, transport_.comm());
    level_stencil(first.with_neighbours(), raw(*first.type), raw(first.own_stencil));
    coarsen(hierarchies_[h]);
  }
}

double PressureMultigrid::apply(const float* r, float* z) {
  Level& fine = hierarchies_.front().front();
  fine.rhs = r;
  v_cycle(0, 0, z);
  return interior_dot(fine.geometry, r, z);
}

// Level l of hierarchy h: its correction for its rhs into `out` (its x, or z at the top).
void PressureMultigrid::v_cycle(std::size_t h, std::size_t l, float* out) {
  Hierarchy& levels = hierarchies_[h];
  Level& level = levels[l];
  if (l + 1 == levels.size()) {
    if (h + 1 < hierarchies_.size())
      hand_over(h, out);
    else
      smooth_from_zero(level, kBottomSweeps);  // a single cell: out is its x
    return;
  }
  Level& below = levels[l + 1];
  float* x = raw(*level.x);
  smooth_from_zero(level, kSweeps);
  level.refresh(level.x);
  level_residual(level.with_neighbours(), level.stencil, level.rhs, x, raw(*level.residual));
  level.refresh(level.residual);
  restrict_residual(level.with_neighbours(), raw(*level.residual), below.geometry, below.stencil,
                    raw(*below.own_rhs));
  v_cycle(h, l + 1, raw(*below.x));
  below.refresh(below.x);
  prolong_add(below.with_neighbours(), raw(*below.x), level.geometry, level.stencil, x);
  smooth(level, kSweeps, out);
}

// `sweeps` (even) Jacobi sweeps from x = 0; the result is in x.
void PressureMultigrid::smooth_from_zero(Level& level, int sweeps) {
  float *x = raw(*level.x), *swap = raw(*level.swap);
  const LevelGeometry l = level.with_neighbours();
  jacobi_sweep(l, level.stencil, kOmega, level.rhs, nullptr, swap);
  for (int s = 1; s < sweeps; ++s) {
    const bool into_x = s % 2 == 1;
    level.refresh(into_x ? level.swap : level.x);
    jacobi_sweep(l, level.stencil, kOmega, level.rhs, into_x ? swap : x, into_x ? x : swap);
  }
}

// `sweeps` (even) Jacobi sweeps from x, the last one into out (x, or a buffer outside the level:
// the last sweep reads the level's own buffer).
void PressureMultigrid::smooth(Level& level, int sweeps, float* out) {
  float *x = raw(*level.x), *swap = raw(*level.swap);
  const LevelGeometry l = level.with_neighbours();
  for (int s = 0; s < sweeps; ++s) {
    const bool from_x = s % 2 == 0;
    level.refresh(from_x ? level.x : level.swap);
    float* into = s + 1 == sweeps ? out : (from_x ? swap : x);
    jacobi_sweep(l, level.stencil, kOmega, level.rhs, from_x ? x : swap, into);
  }
}

// The bottom of hierarchy h: its cells (one per brick) go to hierarchy h + 1 (from every rank,
// after the per-rank one), which solves for them (every rank alike), and come back into out.
void PressureMultigrid::hand_over(std::size_t h, float* out) {
  Level& first = hierarchies_[h + 1].front();
  const Handover& in = handovers_[h];
  auto& rhs = *first.own_rhs;
  clear(rhs);
  copy_rows(in.from_rows.size(), raw(in.from_rows), hierarchies_[h].back().rhs, raw(in.to_rows),
            raw(rhs));
  if (h == 0 && ranks_ > 1) transport_.sum_in_place(raw(rhs), rhs.size());
  v_cycle(h + 1, 0, raw(*first.x));
  copy_rows(in.from_rows.size(), raw(in.to_rows), raw(*first.x), raw(in.from_rows), out);
}

// The last level of each hierarchy and the first of the next are one grid.
int PressureMultigrid::levels() const {
  int count = 1;
  for (const Hierarchy& h : hierarchies_) count += static_cast<int>(h.size()) - 1;
  return count;
}

std::size_t PressureMultigrid::device_bytes() const {
  std::size_t bytes = 0;
  for (const Handover& in : handovers_)
    bytes += (in.from_rows.capacity() + in.to_rows.capacity()) * sizeof(std::uint32_t);
  for (const Hierarchy& levels : hierarchies_)
    for (const Level& level : levels)
      bytes += level.cells.device_bytes() + level.halo->device_bytes() +
               level.own_stencil.capacity() * sizeof(std::int32_t);
  return bytes;
}

}  // namespace apron::flip
