// The pressure multigrid (src/flip/pressure_multigrid.hpp) against a dense CPU V-cycle written
// here from the method's rules (cell types, trilinear transfers, damped Jacobi), on a grid with a
// missing brick, a solid box, voxels past the domain's far face and an air pocket, on however
// many ranks the test runs; and the V-cycle as conjugate gradient needs it: symmetric and
// positive definite.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "decomposition/brick_halo.hpp"
#include "flip/pressure_multigrid.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/element_hash.hpp"
#include "kernels/flip/multigrid.hpp"
#include "kernels/flip/voxel_stencil.hpp"

namespace apron::flip {
namespace {

constexpr int kVoxels[3] = {24, 14, 16};             // y ends inside the last row of bricks
constexpr int kSolidBox[6] = {10, 0, 0, 14, 14, 4};  // voxel ranges [lo, hi)
constexpr double kOmega = 2.0 / 3.0;

using Cell = std::array<int, 3>;

// No brick over voxels [16, 24) x [8, 16) x [8, 16).
bool brick_exists(const BrickCoord& b, int brick_size) {
  return !(b[0] * brick_size >= 16 && b[1] * brick_size >= 8 && b[2] * brick_size >= 8);
}
bool in_solid_box(const Cell& v) {
  for (int d = 0; d < 3; ++d)
    if (v[d] < kSolidBox[d] || v[d] >= kSolidBox[d + 3]) return false;
  return true;
}

// ---- the reference: a dense V-cycle ------------------------------------------------------------

struct RefLevel {
  Cell n;
  std::vector<int> type;
  bool inside(const Cell& c) const {
    return c[0] >= 0 && c[1] >= 0 && c[2] >= 0 && c[0] < n[0] && c[1] < n[1] && c[2] < n[2];
  }
  std::size_t at(const Cell& c) const {
    return (static_cast<std::size_t>(c[2]) * n[1] + c[1]) * n[0] + c[0];
  }
  int type_at(const Cell& c) const { return inside(c) ? type[at(c)] : kCellSolid; }
  double value(const std::vector<double>& v, const Cell& c) const {
    return inside(c) ? v[at(c)] : 0.0;
  }
  std::size_t size() const { return type.size(); }
  template <class F>
  void each(F f) const {
    for (int k = 0; k < n[2]; ++k)
      for (int j = 0; j < n[1]; ++j)
        for (int i = 0; i < n[0]; ++i) f(Cell{i, j, k});
  }
  // Diagonal (non-solid neighbours) and (A x) at a fluid cell.
  int diag(const Cell& c) const {
    int d = 0;
    for (int q = 0; q < 6; ++q) d += type_at(step(c, q)) != kCellSolid;
    return d;
  }
  double apply(const std::vector<double>& x, const Cell& c) const {
    double sum = diag(c) * x[at(c)];
    for (int q = 0; q < 6; ++q)
      if (type_at(step(c, q)) == kCellFluid) sum -= x[at(step(c, q))];
    return sum;
  }
  static Cell step(Cell c, int q) {
    c[q / 2] += q % 2 ? 1 : -1;
    return c;
  }
};

RefLevel coarsened(const RefLevel& fine) {
  RefLevel c;
  for (int d = 0; d < 3; ++d) c.n[d] = (fine.n[d] + 1) / 2;
  c.type.resize(static_cast<std::size_t>(c.n[0]) * c.n[1] * c.n[2]);
  c.each([&](const Cell& p) {
    bool air = false, fluid = false;
    for (int q = 0; q < 8; ++q) {
      const int t =
          fine.type_at({2 * p[0] + (q & 1), 2 * p[1] + ((q >> 1) & 1), 2 * p[2] + (q >> 2)});
      air = air || t == kCellAir;
      fluid = fluid || t == kCellFluid;
    }
    c.type[c.at(p)] = air ? kCellAir : (fluid ? kCellFluid : kCellSolid);
  });
  return c;
}

std::vector<double> sweep(const RefLevel& L, const std::vector<double>& b,
                          const std::vector<double>& x) {
  std::vector<double> out(L.size(), 0.0);
  L.each([&](const Cell& c) {
    if (L.type[L.at(c)] != kCellFluid || L.diag(c) == 0) return;
    out[L.at(c)] = x[L.at(c)] + kOmega * (b[L.at(c)] - L.apply(x, c)) / L.diag(c);
  });
  return out;
}

double weight(int offset) {  // fine cell 2c - 1 + offset in coarse cell c, per axis
  return offset == 0 || offset == 3 ? 0.25 : 0.75;
}

std::vector<double> v_cycle(const std::vector<RefLevel>& levels, std::size_t l,
                            const std::vector<double>& b) {
  const RefLevel& L = levels[l];
  std::vector<double> x(L.size(), 0.0);
  const int sweeps = 2;  // also at the bottom (a single cell walled in: 0)
  for (int s = 0; s < sweeps; ++s) x = sweep(L, b, x);
  if (l + 1 == levels.size()) return x;
  const RefLevel& C = levels[l + 1];
  std::vector<double> r(L.size(), 0.0), bc(C.size(), 0.0);
  L.each([&](const Cell& c) {
    if (L.type[L.at(c)] == kCellFluid) r[L.at(c)] = b[L.at(c)] - L.apply(x, c);
  });
  C.each([&](const Cell& c) {
    if (C.type[C.at(c)] != kCellFluid) return;
    double sum = 0;
    for (int q = 0; q < 64; ++q) {
      const int o[3] = {q % 4, (q / 4) % 4, q / 16};
      sum += weight(o[0]) * weight(o[1]) * weight(o[2]) *
             L.value(r, {2 * c[0] - 1 + o[0], 2 * c[1] - 1 + o[1], 2 * c[2] - 1 + o[2]});
    }
    bc[C.at(c)] = 0.5 * sum;
  });
  const auto xc = v_cycle(levels, l + 1, bc);
  L.each([&](const Cell& f) {
    if (L.type[L.at(f)] != kCellFluid) return;
    for (int q = 0; q < 8; ++q) {
      double w = 1;
      Cell c;
      for (int d = 0; d < 3; ++d) {
        const bool neighbour = (q >> d) & 1;
        c[d] = f[d] / 2 + (neighbour ? (f[d] % 2 ? 1 : -1) : 0);
        w *= neighbour ? 0.25 : 0.75;
      }
      x[L.at(f)] += w * C.value(xc, c);
    }
  });
  for (int s = 0; s < 2; ++s) x = sweep(L, b, x);
  return x;
}

// ---- the case ----------------------------------------------------------------------------------

// Fluid below z = 11 in existing bricks, outside the solid box, but for an air pocket.
int fine_type(const Cell& v, int brick_size) {
  if (in_solid_box(v)) return kCellSolid;
  if (!brick_exists({v[0] / brick_size, v[1] / brick_size, v[2] / brick_size}, brick_size))
    return kCellAir;
  const bool pocket = v[0] >= 3 && v[0] < 6 && v[1] >= 4 && v[1] < 7 && v[2] >= 5 && v[2] < 7;
  return v[2] < 11 && !pocket ? kCellFluid : kCellAir;
}

// A deterministic right-hand side at the fluid cells, the same on every rank.
double rhs_at(const Cell& v, std::uint64_t seed) {
  const std::uint64_t h =
      mix64(seed ^ ((static_cast<std::uint64_t>(v[2]) * 64 + v[1]) * 64 + v[0]));
  return static_cast<double>(h >> 11) * 0x1.0p-53 - 0.5;
}

// A grid of bricks of `brick` voxels, the ranks owning slabs of them along x.
class MultigridCase {
 public:
  explicit MultigridCase(int brick_size)
      : brick(brick_size), transport_(MPI_COMM_WORLD), halo_(transport_, brick, BrickGrid::kApron) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    for (int d = 0; d < 3; ++d) {
      grid_.voxels[d] = kVoxels[d];
      grid_.bricks[d] = (kVoxels[d] + brick - 1) / brick;
    }
    grid_.b = brick;
    const auto owner = [&](const BrickCoord& b) {
      return std::clamp(b[0], 0, grid_.bricks[0] - 1) * size_ / grid_.bricks[0];
    };
    for (int z = 0; z < grid_.bricks[2]; ++z)
      for (int y = 0; y < grid_.bricks[1]; ++y)
        for (int x = 0; x < grid_.bricks[0]; ++x)
          if (brick_exists({x, y, z}, brick) && owner({x, y, z}) == rank_)
            bricks_.push_back({x, y, z});
    halo_.plan(bricks_, owner);
    std::vector<int> origin;
    for (const auto& b : bricks_)
      for (int d = 0; d < 3; ++d) origin.push_back(b[d] * brick);
    origin_ = DeviceVector<int>(origin.begin(), origin.end());
    boxes_ = DeviceVector<int>(std::begin(kSolidBox), std::end(kSolidBox));
    geometry_.grid = grid_;
    geometry_.origin = raw(origin_);
    geometry_.solid = SolidVoxels{raw(boxes_), 1};
    geometry_.slots = bricks_.size();
    stencil_ = DeviceVector<std::int32_t>(fine_stencil());
    multigrid_ = std::make_unique<PressureMultigrid>(transport_, grid_);
    multigrid_->plan(halo_);
    multigrid_->setup(geometry_, raw(stencil_));
  }

  // Each local interior voxel's global coordinates, in interior index order.
  template <class F>
  void each_local(F f) const {
    std::size_t t = 0;
    for (std::size_t s = 0; s < bricks_.size(); ++s)
      for (int k = 0; k < brick; ++k)
        for (int j = 0; j < brick; ++j)
          for (int i = 0; i < brick; ++i, ++t)
            f(t, grid_.row(s, i, j, k),
              Cell{bricks_[s][0] * brick + i, bricks_[s][1] * brick + j,
                   bricks_[s][2] * brick + k});
  }

  // The fine stencil as pressure_system() encodes it (see voxel_stencil.hpp).
  std::vector<std::int32_t> fine_stencil() const {
    std::vector<std::int32_t> stencil(bricks_.size() * grid_.interior_per_brick(), 0);
    const RefLevel L = reference_levels().front();
    each_local([&](std::size_t t, std::size_t, const Cell& v) {
      if (!L.inside(v) || L.type[L.at(v)] != kCellFluid) return;
      int bits = detail::kSelfFluid;
      for (int q = 0; q < 6; ++q)
        if (L.type_at(RefLevel::step(v, q)) == kCellFluid) bits |= 1 << q;
      stencil[t] = bits | (L.diag(v) << detail::kDiagShift);
    });
    return stencil;
  }

  std::vector<RefLevel> reference_levels() const {
    RefLevel L;
    for (int d = 0; d < 3; ++d) L.n[d] = kVoxels[d];
    L.type.resize(static_cast<std::size_t>(L.n[0]) * L.n[1] * L.n[2]);
    L.each([&](const Cell& v) { L.type[L.at(v)] = fine_type(v, brick); });
    std::vector<RefLevel> levels = {L};
    while (levels.back().size() > 1) levels.push_back(coarsened(levels.back()));
    return levels;
  }

  // z = M r for the right-hand side of `seed`, on the device; local values by interior index.
  std::vector<float> apply(std::uint64_t seed, double* rz) {
    const std::size_t stored = halo_.total_voxels();
    std::vector<float> r(stored, 0.0f);
    each_local([&](std::size_t, std::size_t row, const Cell& v) {
      if (fine_type(v, brick) == kCellFluid && in_domain(v))
        r[row] = static_cast<float>(rhs_at(v, seed));
    });
    DeviceVector<float> r_dev(r.begin(), r.end()), z_dev(stored, 0.0f);
    double local = multigrid_->apply(raw(r_dev), raw(z_dev));
    MPI_Allreduce(&local, rz, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    std::vector<float> z(stored);
    apron::copy(z_dev.begin(), z_dev.end(), z.begin());
    return z;
  }

  static bool in_domain(const Cell& v) {
    return v[0] < kVoxels[0] && v[1] < kVoxels[1] && v[2] < kVoxels[2];
  }
  int levels() const { return multigrid_->levels(); }

  const int brick;

 private:
  int rank_ = 0, size_ = 1;
  BrickGrid grid_;
  Transport transport_;
  BrickHalo halo_;
  std::vector<BrickCoord> bricks_;
  DeviceVector<int> origin_, boxes_;
  SlotGeometry geometry_;
  DeviceVector<std::int32_t> stencil_;
  std::unique_ptr<PressureMultigrid> multigrid_;
};

// Bricks of 8: one dense hierarchy below the per-rank one (24 x 14 x 16 voxels, 3 x 2 x 2 cells
// at one per brick, in one dense brick); of 2: two (12 x 7 x 8 cells in 2 x 1 x 1 dense bricks,
// then those 2 cells in one).
class PressureMultigridTest : public ::testing::TestWithParam<int> {};

TEST_P(PressureMultigridTest, OneVCycleEqualsADenseReference) {
  MultigridCase c(GetParam());
  const auto levels = c.reference_levels();
  EXPECT_EQ(c.levels(), static_cast<int>(levels.size()));  // 24x14x16 ... 1x1x1: 6
  const RefLevel& L = levels.front();
  std::vector<double> b(L.size(), 0.0);
  L.each([&](const Cell& v) {
    if (L.type[L.at(v)] == kCellFluid) b[L.at(v)] = rhs_at(v, 1);
  });
  const auto expected = v_cycle(levels, 0, b);
  double rz = 0;
  const auto z = c.apply(1, &rz);
  double worst = 0, scale = 0;
  std::size_t compared = 0;
  c.each_local([&](std::size_t, std::size_t row, const Cell& v) {
    if (!MultigridCase::in_domain(v)) return;
    scale = std::max(scale, std::abs(expected[L.at(v)]));
    worst = std::max(worst, std::abs(z[row] - expected[L.at(v)]));
    ++compared;
  });
  ASSERT_GT(compared, 0u);
  ASSERT_GT(scale, 0.01);
  EXPECT_LT(worst, 1e-5 * scale) << "float32 V-cycle against float64";
}

// CG needs M symmetric positive definite: r1 . M r2 = r2 . M r1, and r . M r > 0.
TEST_P(PressureMultigridTest, VCycleIsSymmetricPositiveDefinite) {
  MultigridCase c(GetParam());
  double r1z1 = 0, r2z2 = 0;
  const auto z1 = c.apply(11, &r1z1), z2 = c.apply(12, &r2z2);
  double cross[2] = {0, 0};  // r1 . z2, r2 . z1
  c.each_local([&](std::size_t, std::size_t row, const Cell& v) {
    if (fine_type(v, c.brick) != kCellFluid || !MultigridCase::in_domain(v)) return;
    cross[0] += rhs_at(v, 11) * z2[row];
    cross[1] += rhs_at(v, 12) * z1[row];
  });
  MPI_Allreduce(MPI_IN_PLACE, cross, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(r1z1, 0);
  EXPECT_GT(r2z2, 0);
  EXPECT_NEAR(cross[0], cross[1], 1e-5 * std::sqrt(r1z1 * r2z2));
}

INSTANTIATE_TEST_SUITE_P(BrickSizes, PressureMultigridTest, ::testing::Values(8, 2));

}  // namespace
}  // namespace apron::flip
