// MeshHalo on a 20 x 20 quad grid (each quad two triangles) cut by a Partition over however many
// ranks the test is launched with: the ghosts are exactly the non-owned corners of the local
// triangles, gather copies a vertex function exactly, and the reverse sum of per-triangle
// contributions equals the one-rank sums computed over the whole mesh (to 1e-12 relative in
// double, 1e-5 in float: the order of the additions differs).
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <cmath>
#include <set>

#include "decomposition/mesh_halo.hpp"
#include "decomposition/partition.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

constexpr int kQuads = 20, kSide = kQuads + 1;

Vec4 position(std::int64_t gid) {
  const float i = static_cast<float>(gid % kSide), j = static_cast<float>(gid / kSide);
  // A slight warp so that RCB cuts do not follow the lattice lines.
  return {i + 0.3f * std::sin(0.7f * j), j + 0.2f * std::cos(0.9f * i), 0.5f, 0};
}
double vertex_value(std::int64_t gid) {
  return std::sin(0.1 * static_cast<double>(gid)) + 0.001 * static_cast<double>(gid);
}
std::vector<std::array<std::int64_t, 3>> all_triangles() {
  std::vector<std::array<std::int64_t, 3>> t;
  for (int j = 0; j < kQuads; ++j)
    for (int i = 0; i < kQuads; ++i) {
      const std::int64_t a = j * kSide + i, b = a + 1, c = a + kSide, d = c + 1;
      t.push_back({a, b, d});
      t.push_back({a, d, c});
    }
  return t;
}
// A per-triangle contribution to one of its corners (a stand-in for a force).
double contribution(const std::array<std::int64_t, 3>& t, int corner) {
  const double s = static_cast<double>(t[0] + 3 * t[1] + 7 * t[2]);
  return std::cos(0.01 * s) * (1.0 + 0.1 * corner);
}

class MeshHaloTest : public ::testing::TestWithParam<bool> {};  // RCB or cartesian

TEST_P(MeshHaloTest, GatherAndReverseSumMatchOneRank) {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Box domain;
  domain.lo[0] = domain.lo[1] = -1, domain.hi[0] = domain.hi[1] = kSide + 1;
  domain.lo[2] = 0, domain.hi[2] = 1;
  std::vector<Vec4> everything;
  for (std::int64_t g = 0; g < kSide * kSide; ++g) everything.push_back(position(g));
  // Every rank passes all vertices to RCB only on rank 0 (the others none): same boxes anyway.
  const Partition partition =
      GetParam()
          ? Partition::rcb(domain, comm,
                           rank == 0 ? std::span<const Vec4>(everything) : std::span<const Vec4>())
          : Partition::cartesian(domain, size);
  const auto& boxes = partition.ownership_boxes();
  const auto owner = [&](std::int64_t g) {
    return OwnerLookup{boxes.data(), static_cast<int>(boxes.size())}(position(g));
  };

  std::vector<std::int64_t> owned;
  for (std::int64_t g = 0; g < kSide * kSide; ++g)
    if (owner(g) == rank) owned.push_back(g);
  std::vector<std::int64_t> tri;
  std::vector<int> corner_owner;
  std::vector<std::array<std::int64_t, 3>> mine;
  std::set<std::int64_t> expected_ghosts;
  for (const auto& t : all_triangles()) {
    if (owner(t[0]) != rank && owner(t[1]) != rank && owner(t[2]) != rank) continue;
    mine.push_back(t);
    for (auto g : t) {
      tri.push_back(g);
      corner_owner.push_back(owner(g));
      if (owner(g) != rank) expected_ghosts.insert(g);
    }
  }
  Transport transport(comm);
  MeshHalo halo(transport);
  halo.build(owned, tri, corner_owner);
  ASSERT_EQ(halo.owned_count(), owned.size());
  ASSERT_EQ(halo.ghost_count(), expected_ghosts.size());
  const auto& ids = halo.global_ids();
  EXPECT_EQ(std::set<std::int64_t>(ids.begin() + owned.size(), ids.end()), expected_ghosts);
  for (std::size_t r = 0; r < ids.size(); ++r) ASSERT_EQ(halo.local_index(ids[r]), (long)r);
  EXPECT_EQ(halo.local_index(-5), -1);
  for (std::size_t c = 0; c < tri.size(); ++c) ASSERT_EQ(ids[halo.local_triangles()[c]], tri[c]);
  long long ghosts = static_cast<long long>(halo.ghost_count()), all_ghosts = 0;
  MPI_Allreduce(&ghosts, &all_ghosts, 1, MPI_LONG_LONG, MPI_SUM, comm);
  if (size > 1) {
    EXPECT_GT(all_ghosts, 0);
  }
  // Every triangle is computed by exactly one rank.
  long long computed = 0, all_computed = 0;
  for (auto c : halo.computes_triangle()) computed += c;
  MPI_Allreduce(&computed, &all_computed, 1, MPI_LONG_LONG, MPI_SUM, comm);
  EXPECT_EQ(all_computed, 2 * kQuads * kQuads);

  ParticleStore store;
  const Field<double> value = store.add<double>("value"), force = store.add<double>("force");
  const Field<Vec4> pos = store.add<Vec4>("position"), force4 = store.add<Vec4>("force4");
  store.resize(halo.vertex_count());
  std::vector<double> v(store.size(), -999.0);
  std::vector<Vec4> p(store.size(), Vec4{-9, -9, -9, -9});
  for (std::size_t r = 0; r < owned.size(); ++r)
    v[r] = vertex_value(ids[r]), p[r] = position(ids[r]);
  apron::copy(v.begin(), v.end(), value->begin());
  apron::copy(p.begin(), p.end(), pos->begin());
  // In halves, as a solver overlaps it with interior work.
  const FieldRef fields[] = {value, pos};
  halo.gather_begin(store, fields);
  halo.gather_finish(store, fields);
  apron::copy(value->begin(), value->end(), v.begin());
  apron::copy(pos->begin(), pos->end(), p.begin());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    ASSERT_EQ(v[r], vertex_value(ids[r])) << ids[r];
    ASSERT_EQ(p[r].x, position(ids[r]).x) << ids[r];
    ASSERT_EQ(p[r].y, position(ids[r]).y) << ids[r];
  }

  // Forces: zero everywhere, each computed triangle adds to its three corners (ghosts too),
  // then the ghosts' sums go to their owners.
  std::vector<double> f(store.size(), 0.0);
  std::vector<Vec4> f4(store.size(), Vec4{0, 0, 0, 0});
  for (std::size_t t = 0; t < mine.size(); ++t) {
    if (!halo.computes_triangle()[t]) continue;
    for (int c = 0; c < 3; ++c) {
      const auto row = halo.local_triangles()[3 * t + c];
      const double x = contribution(mine[t], c);
      f[row] += x;
      f4[row].x += static_cast<float>(x);
      f4[row].w += 1;
    }
  }
  apron::copy(f.begin(), f.end(), force->begin());
  apron::copy(f4.begin(), f4.end(), force4->begin());
  const FieldRef sum_fields[] = {force, force4};
  halo.reverse(store, sum_fields, Reduction::sum);
  apron::copy(force->begin(), force->end(), f.begin());
  apron::copy(force4->begin(), force4->end(), f4.begin());

  // One rank's answer: every triangle of the mesh, summed per vertex.
  std::vector<double> reference(kSide * kSide, 0.0), incident(kSide * kSide, 0.0);
  for (const auto& t : all_triangles())
    for (int c = 0; c < 3; ++c) reference[t[c]] += contribution(t, c), incident[t[c]] += 1;
  for (std::size_t r = 0; r < owned.size(); ++r) {
    const double want = reference[ids[r]];
    ASSERT_NEAR(f[r], want, 1e-12 * (1 + std::abs(want))) << ids[r];
    ASSERT_NEAR(f4[r].x, want, 1e-5 * (1 + std::abs(want))) << ids[r];
    ASSERT_EQ(f4[r].w, incident[ids[r]]) << ids[r];  // exact: counts of incident triangles
  }
}

INSTANTIATE_TEST_SUITE_P(Partitions, MeshHaloTest, ::testing::Values(true, false),
                         [](const auto& param_info) {
                           return param_info.param ? "Rcb" : "Cartesian";
                         });

}  // namespace
}  // namespace apron
