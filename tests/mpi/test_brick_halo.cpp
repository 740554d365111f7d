// BrickHalo on however many ranks the test is launched with: every apron voxel of every local
// brick is checked against the function it mirrors (or the background where no brick exists),
// and the reverse sum against a brute-force sum over all bricks, for two topologies (re-plan).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <set>
#include <tuple>

#include "decomposition/brick_halo.hpp"
#include "decomposition/partition.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

constexpr double kVoxel = 0.1;
constexpr int kLo = -2, kHi = 4;  // brick coordinates in [kLo, kHi)^3, some negative

// The sparse brick set of a topology: a deterministic pattern with holes.
bool exists(const BrickCoord& c, int topology) {
  for (int d = 0; d < 3; ++d)
    if (c[d] < kLo || c[d] >= kHi) return false;
  const int h = (c[0] * 7 + c[1] * 13 + c[2] * 29 + 1000) % (topology == 0 ? 3 : 4);
  return h != 0;
}

double phi(const BrickCoord& g) {
  return g[0] + 37.0 * g[1] + 1301.0 * g[2] + 0.5;
}
float contribution(const BrickCoord& g, const BrickCoord& brick) {
  return static_cast<float>(1 + ((brick[0] + 2 * brick[1] + 3 * brick[2] + g[0] + 100) % 5));
}

int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

struct Params {
  int b, a;
};

class BrickHaloTest : public ::testing::TestWithParam<Params> {};

TEST_P(BrickHaloTest, FillEveryApronVoxelAndReverseSum) {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int B = GetParam().b, A = GetParam().a;
  Box domain;
  for (int d = 0; d < 3; ++d) domain.lo[d] = kLo * B * kVoxel, domain.hi[d] = kHi * B * kVoxel;
  const Partition partition = Partition::cartesian(domain, size);
  const auto& boxes = partition.ownership_boxes();
  const auto owner = [&](const BrickCoord& c) {
    // By the brick's origin; the middle of its first voxel, so that round-off cannot matter.
    const Vec4 p{static_cast<float>((c[0] * B + 0.5) * kVoxel),
                 static_cast<float>((c[1] * B + 0.5) * kVoxel),
                 static_cast<float>((c[2] * B + 0.5) * kVoxel), 0};
    return OwnerLookup{boxes.data(), static_cast<int>(boxes.size())}(p);
  };

  Transport transport(comm);
  BrickHalo halo(transport, B, A);
  const double background = -1e9;
  for (int topology = 0; topology < 2; ++topology) {
    std::vector<BrickCoord> bricks;
    for (int z = kLo - 1; z <= kHi; ++z)
      for (int y = kLo - 1; y <= kHi; ++y)
        for (int x = kLo - 1; x <= kHi; ++x)
          if (exists({x, y, z}, topology) && owner({x, y, z}) == rank) bricks.push_back({x, y, z});
    halo.plan(bricks, owner);
    ASSERT_EQ(halo.local_bricks(), bricks.size());
    ParticleStore store;
    const Field<double> phi_field = store.add<double>("phi");
    const Field<float> mass_field = store.add<float>("mass");
    DeviceVector<double>& field = phi_field;
    DeviceVector<float>& mass = mass_field;
    store.resize(halo.total_voxels());

    // Interiors: the function of the global voxel; aprons and remote copies: garbage.
    std::vector<double> h(store.size(), 12345.0);
    for (std::size_t bi = 0; bi < bricks.size(); ++bi)
      for (int k = 0; k < B; ++k)
        for (int j = 0; j < B; ++j)
          for (int i = 0; i < B; ++i)
            h[halo.voxel(bi, i, j, k)] =
                phi({bricks[bi][0] * B + i, bricks[bi][1] * B + j, bricks[bi][2] * B + k});
    apron::copy(h.begin(), h.end(), field.begin());
    const FieldRef fields[] = {phi_field};
    halo.fill(store, fields, background);
    apron::copy(field.begin(), field.end(), h.begin());
    std::size_t checked = 0, from_remote = 0;
    for (std::size_t bi = 0; bi < bricks.size(); ++bi)
      for (int k = -A; k < B + A; ++k)
        for (int j = -A; j < B + A; ++j)
          for (int i = -A; i < B + A; ++i) {
            const BrickCoord g{bricks[bi][0] * B + i, bricks[bi][1] * B + j, bricks[bi][2] * B + k};
            const BrickCoord nb{floor_div(g[0], B), floor_div(g[1], B), floor_div(g[2], B)};
            const double want = exists(nb, topology) ? phi(g) : background;
            ASSERT_EQ(h[halo.voxel(bi, i, j, k)], want)
                << "brick " << bricks[bi][0] << "," << bricks[bi][1] << "," << bricks[bi][2]
                << " voxel " << i << "," << j << "," << k << " topology " << topology;
            ++checked;
            from_remote += exists(nb, topology) && owner(nb) != rank;
          }
    EXPECT_EQ(checked, bricks.size() * halo.voxels_per_brick());
    long long remote_total = static_cast<long long>(from_remote), all_remote = 0;
    MPI_Allreduce(&remote_total, &all_remote, 1, MPI_LONG_LONG, MPI_SUM, comm);
    if (size > 1 && A > 0) {
      EXPECT_GT(all_remote, 0);  // the remote path was exercised
    }

    // Reverse sum: interiors 0, apron voxels a contribution; each interior voxel must end with
    // the sum of the contributions of every other brick's apron that covers it.
    std::vector<float> m(store.size(), 0.0f);
    for (std::size_t bi = 0; bi < bricks.size(); ++bi)
      for (int k = -A; k < B + A; ++k)
        for (int j = -A; j < B + A; ++j)
          for (int i = -A; i < B + A; ++i) {
            const bool interior = i >= 0 && i < B && j >= 0 && j < B && k >= 0 && k < B;
            if (!interior)
              m[halo.voxel(bi, i, j, k)] = contribution(
                  {bricks[bi][0] * B + i, bricks[bi][1] * B + j, bricks[bi][2] * B + k},
                  bricks[bi]);
          }
    apron::copy(m.begin(), m.end(), mass.begin());
    const FieldRef sum_fields[] = {mass_field};
    halo.reverse_sum(store, sum_fields);
    std::vector<float> got(store.size());
    apron::copy(mass.begin(), mass.end(), got.begin());
    double total = 0;
    for (std::size_t bi = 0; bi < bricks.size(); ++bi)
      for (int k = 0; k < B; ++k)
        for (int j = 0; j < B; ++j)
          for (int i = 0; i < B; ++i) {
            const BrickCoord g{bricks[bi][0] * B + i, bricks[bi][1] * B + j, bricks[bi][2] * B + k};
            float want = 0;
            for (int dz = -1; dz <= 1; ++dz)
              for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                  const BrickCoord x{bricks[bi][0] + dx, bricks[bi][1] + dy, bricks[bi][2] + dz};
                  if ((dx || dy || dz) && exists(x, topology) && g[0] >= x[0] * B - A &&
                      g[0] < x[0] * B + B + A && g[1] >= x[1] * B - A && g[1] < x[1] * B + B + A &&
                      g[2] >= x[2] * B - A && g[2] < x[2] * B + B + A)
                    want += contribution(g, x);
                }
            ASSERT_EQ(got[halo.voxel(bi, i, j, k)], want)
                << "brick " << bricks[bi][0] << "," << bricks[bi][1] << "," << bricks[bi][2]
                << " voxel " << i << "," << j << "," << k << " topology " << topology;
            total += want;
          }
    double all_total = 0;
    MPI_Allreduce(&total, &all_total, 1, MPI_DOUBLE, MPI_SUM, comm);
    if (A > 0) {
      EXPECT_GT(all_total, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, BrickHaloTest,
                         ::testing::Values(Params{4, 1}, Params{8, 1}, Params{3, 2}, Params{2, 0}),
                         [](const auto& param_info) {
                           char name[32];
                           std::snprintf(name, sizeof name, "B%dA%d", param_info.param.b,
                                         param_info.param.a);
                           return std::string(name);
                         });

}  // namespace
}  // namespace apron
