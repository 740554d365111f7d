#include "flip/pressure_multigrid.hpp"

#include <mpi.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include <thrust/copy.h>

#include "kernels/flip/multigrid.hpp"

namespace apron::flip {
namespace {

// Damped Jacobi, two sweeps down and two up (McAdams et al. 2010); an even count ends each
// smoothing in the buffer it started from.
constexpr float kOmega = 2.0f / 3.0f;
constexpr int kSweeps = 2;
// The single cell at the bottom: 16 sweeps leave (1/3)^16 of its error.
constexpr int kBottomSweeps = 16;

const std::string kX[] = {"x"}, kSwap[] = {"swap"}, kResidual[] = {"residual"}, kType[] = {"type"};

// Element-wise MPI_Allreduce of a device array, staged through the host.
template <class T>
void all_reduce(DeviceVector<T>& values, std::vector<T>& host, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm) {
  host.resize(values.size());
  thrust::copy(values.begin(), values.end(), host.begin());
  MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.size()), type, op, comm);
  thrust::copy(host.begin(), host.end(), values.begin());
}

}  // namespace

struct PressureMultigrid::Level {
  SlotGeometry geometry;  // origin: `origin` below, or the fine level's
  DeviceVector<int> origin;
  std::unique_ptr<BrickHalo> halo;
  ParticleStore cells;  // x, swap, residual, rhs, type per stored cell
  DeviceVector<std::int32_t> own_stencil;
  const std::int32_t* stencil = nullptr;  // own_stencil's, or the fine level's
  const float* rhs = nullptr;             // "rhs", or the fine level's residual

  Level(Transport& transport, const BrickGrid& grid) {
    geometry.grid = grid;
    halo = std::make_unique<BrickHalo>(transport, grid.b, BrickGrid::kApron);
    for (const char* name : {"x", "swap", "residual", "rhs"}) cells.add<float>(name);
    cells.add<std::int32_t>("type");
  }
  float* values(const std::string& name) {
    return raw(static_cast<TypedField<float>&>(cells.field(name)).data);
  }
  std::int32_t* types() {
    return raw(static_cast<TypedField<std::int32_t>&>(cells.field("type")).data);
  }
  void fill(std::span<const std::string> names) { halo->fill(cells, names, 0.0f); }
  // After the halo's plan: storage for its slots, and the slots' first cells.
  void resize(const std::vector<BrickCoord>& bricks) {
    cells.resize(halo->total_voxels());
    own_stencil.resize(static_cast<std::size_t>(bricks.size()) *
                       geometry.grid.interior_per_brick());
    stencil = raw(own_stencil);
    std::vector<int> first;
    for (const auto& b : bricks)
      for (int d = 0; d < 3; ++d) first.push_back(b[d] * geometry.grid.b);
    origin = DeviceVector<int>(first.begin(), first.end());
    geometry.origin = raw(origin);
    geometry.slots = bricks.size();
    rhs = values("rhs");
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

}  // namespace

PressureMultigrid::PressureMultigrid(Transport& transport, const BrickGrid& fine)
    : transport_(transport), self_(MPI_COMM_SELF) {
  MPI_Comm_size(transport.comm(), &ranks_);
  for (BrickGrid g = fine;; g = coarser(g)) {
    sparse_.emplace_back(transport_, g);
    if (g.b == 1) break;
  }
  // One brick over all the fine bricks, one cell each.
  BrickGrid dense;
  dense.dx = fine.dx * static_cast<float>(fine.b);
  for (int d = 0; d < 3; ++d) {
    dense.origin[d] = fine.origin[d];
    dense.voxels[d] = fine.bricks[d];
  }
  dense.b = static_cast<int>(std::bit_ceil(
      static_cast<unsigned>(std::max({fine.bricks[0], fine.bricks[1], fine.bricks[2]}))));
  const std::vector<BrickCoord> one = {{0, 0, 0}};
  for (BrickGrid g = dense;; g = coarser(g)) {
    Level& level = dense_.emplace_back(self_, g);
    if (dense_.size() == 1)
      level.halo->plan(one, [](const BrickCoord&) { return 0; });
    else
      level.halo->plan_like(*dense_.front().halo);
    level.resize(one);
    if (g.b == 1) break;
  }
}

PressureMultigrid::~PressureMultigrid() = default;

void PressureMultigrid::plan(const BrickHalo& fine_halo) {
  const auto& bricks = fine_halo.local_coords();
  for (Level& level : sparse_) {
    level.halo->plan_like(fine_halo);
    level.resize(bricks);
  }
  // Each local brick's cell at the last per-rank level, and in the dense brick.
  const BrickGrid& last = sparse_.back().geometry.grid;
  const BrickGrid& dense = dense_.front().geometry.grid;
  std::vector<std::uint32_t> from, to;
  for (std::size_t s = 0; s < bricks.size(); ++s) {
    from.push_back(static_cast<std::uint32_t>(last.row(s, 0, 0, 0)));
    to.push_back(
        static_cast<std::uint32_t>(dense.row(0, bricks[s][0], bricks[s][1], bricks[s][2])));
  }
  sparse_rows_ = DeviceVector<std::uint32_t>(from.begin(), from.end());
  dense_rows_ = DeviceVector<std::uint32_t>(to.begin(), to.end());
}

// Types and stencils of levels from + 1 on, coarsened from level `from`'s types.
void PressureMultigrid::coarsen(std::vector<Level>& levels, std::size_t from) {
  for (std::size_t l = from + 1; l < levels.size(); ++l) {
    Level& level = levels[l];
    coarsen_cell_types(levels[l - 1].geometry, levels[l - 1].types(), level.geometry,
                       level.types());
    level.halo->fill(level.cells, kType, std::int32_t{kCellAir});
    level_stencil(level.geometry, level.types(), raw(level.own_stencil));
  }
}

void PressureMultigrid::setup(const SlotGeometry& g, const std::int32_t* stencil) {
  Level& fine = sparse_.front();
  fine.geometry = g;
  fine.stencil = stencil;
  fine_cell_types(g, stencil, fine.types());
  coarsen(sparse_, 0);
  set_dense_types();
  coarsen(dense_, 0);
}

// The first dense level's types: each rank's bricks' (air where no brick is, on any rank).
void PressureMultigrid::set_dense_types() {
  Level& dense = dense_.front();
  auto& types = static_cast<TypedField<std::int32_t>&>(dense.cells.field("type")).data;
  clear(types);  // kCellAir
  copy_rows(sparse_rows_.size(), raw(sparse_rows_), sparse_.back().types(), raw(dense_rows_),
            raw(types));
  // One rank holds each brick, the others kCellAir (0): the maximum is the holder's type.
  if (ranks_ > 1) all_reduce(types, host_types_, MPI_INT, MPI_MAX, transport_.comm());
  dense.halo->fill(dense.cells, kType, std::int32_t{kCellAir});
  level_stencil(dense.geometry, dense.types(), raw(dense.own_stencil));
}

double PressureMultigrid::apply(const float* r, float* z) {
  Level& fine = sparse_.front();
  fine.rhs = r;
  v_cycle(sparse_, 0, z);
  return interior_dot(fine.geometry, r, z);
}

// Level l's correction for its rhs into `out` (its x, or z at the top), recursively.
void PressureMultigrid::v_cycle(std::vector<Level>& levels, std::size_t l, float* out) {
  Level& level = levels[l];
  if (l + 1 == levels.size()) {
    if (&levels == &sparse_)
      solve_dense(out);
    else
      smooth_from_zero(level, kBottomSweeps);  // a single cell: out is its x
    return;
  }
  Level& below = levels[l + 1];
  float* x = level.values("x");
  smooth_from_zero(level, kSweeps);
  level.fill(kX);
  level_residual(level.geometry, level.stencil, level.rhs, x, level.values("residual"));
  level.fill(kResidual);
  restrict_residual(level.geometry, level.values("residual"), below.geometry, below.stencil,
                    below.values("rhs"));
  v_cycle(levels, l + 1, below.values("x"));
  below.fill(kX);
  prolong_add(below.geometry, below.values("x"), level.geometry, level.stencil, x);
  smooth(level, kSweeps, out);
}

// `sweeps` (even) Jacobi sweeps from x = 0; the result is in x.
void PressureMultigrid::smooth_from_zero(Level& level, int sweeps) {
  float *x = level.values("x"), *swap = level.values("swap");
  jacobi_sweep(level.geometry, level.stencil, kOmega, level.rhs, nullptr, swap);
  for (int s = 1; s < sweeps; ++s) {
    const bool into_x = s % 2 == 1;
    level.fill(into_x ? kSwap : kX);
    jacobi_sweep(level.geometry, level.stencil, kOmega, level.rhs, into_x ? swap : x,
                 into_x ? x : swap);
  }
}

// `sweeps` (even) Jacobi sweeps from x, the last one into out (x, or a buffer outside the level:
// the last sweep reads the level's own buffer).
void PressureMultigrid::smooth(Level& level, int sweeps, float* out) {
  float *x = level.values("x"), *swap = level.values("swap");
  for (int s = 0; s < sweeps; ++s) {
    const bool from_x = s % 2 == 0;
    level.fill(from_x ? kX : kSwap);
    float* into = s + 1 == sweeps ? out : (from_x ? swap : x);
    jacobi_sweep(level.geometry, level.stencil, kOmega, level.rhs, from_x ? x : swap, into);
  }
}

// The bottom of the per-rank levels: their one cell per brick, gathered from all ranks into the
// dense brick, solved there by every rank alike, and this rank's bricks' cells taken back.
void PressureMultigrid::solve_dense(float* out) {
  Level& top = dense_.front();
  auto& rhs = static_cast<TypedField<float>&>(top.cells.field("rhs")).data;
  clear(rhs);
  copy_rows(sparse_rows_.size(), raw(sparse_rows_), sparse_.back().rhs, raw(dense_rows_), raw(rhs));
  if (ranks_ > 1) all_reduce(rhs, host_values_, MPI_FLOAT, MPI_SUM, transport_.comm());
  v_cycle(dense_, 0, top.values("x"));
  copy_rows(sparse_rows_.size(), raw(dense_rows_), top.values("x"), raw(sparse_rows_), out);
}

// The per-rank levels' last (one cell per brick) and the dense brick's first are one grid.
int PressureMultigrid::levels() const {
  return static_cast<int>(sparse_.size() + dense_.size()) - 1;
}

std::size_t PressureMultigrid::device_bytes() const {
  std::size_t bytes = (sparse_rows_.capacity() + dense_rows_.capacity()) * sizeof(std::uint32_t);
  for (const auto* levels : {&sparse_, &dense_})
    for (const Level& level : *levels)
      bytes += level.cells.device_bytes() + level.halo->device_bytes() +
               level.own_stencil.capacity() * sizeof(std::int32_t);
  return bytes;
}

}  // namespace apron::flip
