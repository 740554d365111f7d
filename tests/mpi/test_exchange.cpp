// Partition, migration and halo exchange on however many ranks the test is launched with,
// checked against a brute-force answer computed from all ranks' particles.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "decomposition/particle_exchange.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

Box unit_box(double extent = 1.0) {
  Box b;
  for (int d = 0; d < 3; ++d) b.lo[d] = 0, b.hi[d] = extent;
  return b;
}

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
int size_of(MPI_Comm comm) {
  int s = 1;
  MPI_Comm_size(comm, &s);
  return s;
}

// Particles given to ranks without regard to position: a clustered half (so RCB matters), a
// uniform half, points on the domain faces, edges and corners, and strays just outside.
std::vector<Vec4> scattered_points(int rank, std::size_t n) {
  std::mt19937 rng(100 + rank);
  std::uniform_real_distribution<float> u(0, 1), cluster(0, 0.3f);
  std::vector<Vec4> p;
  for (std::size_t i = 0; i < n / 2; ++i) p.push_back({cluster(rng), cluster(rng), u(rng), 0});
  for (std::size_t i = n / 2; i < n; ++i) p.push_back({u(rng), u(rng), u(rng), 0});
  p.push_back({0, 0, 0, 0});
  p.push_back({1, 1, 1, 0});
  p.push_back({0.5f, 1, 0, 0});
  p.push_back({-0.01f, 0.5f, 1.01f, 0});
  return p;
}

std::vector<Vec4> all_gather(const std::vector<Vec4>& mine, MPI_Comm comm) {
  const int n = static_cast<int>(mine.size() * 4), size = size_of(comm);
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<Vec4> all((displs.back() + counts.back()) / 4);
  MPI_Allgatherv(mine.data(), n, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT,
                 comm);
  return all;
}

class ExchangeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExchangeTest, MigrationAndHaloMatchBruteForce) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  // Rank 1 starts empty: ranks without particles must work.
  const auto initial = rank == 1 ? std::vector<Vec4>{} : scattered_points(rank, 2000);

  ParticleStore store;
  const Field<Vec4> position = store.add<Vec4>("position");
  DeviceVector<Vec4>& pos = position;
  DeviceVector<std::int64_t>& id = store.add<std::int64_t>("id");
  const Field<float> value_field = store.add<float>("value");
  DeviceVector<float>& value = value_field;
  store.resize(initial.size());
  apron::copy(initial.begin(), initial.end(), pos.begin());
  std::vector<std::int64_t> ids(initial.size());
  std::iota(ids.begin(), ids.end(), std::int64_t{rank} << 32);
  apron::copy(ids.begin(), ids.end(), id.begin());

  const double halo = 0.07;
  const Box domain = unit_box();
  const std::string method = GetParam();
  const Partition partition =
      method == "rcb" ? Partition::rcb(domain, comm, initial) : Partition::cartesian(domain, size);
  Transport transport(comm);
  ParticleExchange exchange(transport);
  exchange.set_partition(partition, halo);
  exchange.migrate(store, pos);

  // Every particle is now on its owner, none lost or duplicated.
  std::vector<Vec4> owned(store.size());
  apron::copy(pos.begin(), pos.end(), owned.begin());
  const Box& own = partition.ownership_boxes()[rank];
  for (const auto& p : owned) ASSERT_TRUE(own.contains(p)) << p.x << " " << p.y << " " << p.z;
  long long local = store.size(), total = 0, expected = initial.size(), expected_total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, comm);
  MPI_Allreduce(&expected, &expected_total, 1, MPI_LONG_LONG, MPI_SUM, comm);
  EXPECT_EQ(total, expected_total);
  if (method == "rcb") {  // balanced to within a histogram bin's worth of particles
    long long most = 0;
    MPI_Allreduce(&local, &most, 1, MPI_LONG_LONG, MPI_MAX, comm);
    EXPECT_LT(most, 1.1 * total / size + 20);
  }

  // Ghosts: exactly the other ranks' particles inside this rank's subdomain grown by the halo.
  const std::size_t n_owned = store.size();
  std::vector<float> values(n_owned);
  for (std::size_t i = 0; i < n_owned; ++i)
    values[i] = owned[i].x + 10 * owned[i].y + 100 * owned[i].z;
  apron::copy(values.begin(), values.end(), value.begin());
  const FieldRef ghost_fields[] = {position};
  const std::size_t first = exchange.send_ghosts(store, pos, ghost_fields);
  EXPECT_EQ(first, n_owned);
  std::vector<Vec4> ghosts(store.size() - first);
  apron::copy(pos.begin() + first, pos.end(), ghosts.begin());
  const auto everyone = all_gather(owned, comm);
  const Box near = own.expanded(halo);
  std::multiset<std::tuple<float, float, float>> expect_ghosts, got_ghosts;
  for (const auto& p : everyone)
    if (near.contains(p) && !own.contains(p)) expect_ghosts.insert({p.x, p.y, p.z});
  for (const auto& p : ghosts) got_ghosts.insert({p.x, p.y, p.z});
  EXPECT_EQ(got_ghosts, expect_ghosts);

  // Shuffle the store as the cell list does, then refresh a ghost field from its owners.
  IndexVector order(store.size());
  std::vector<std::uint32_t> host_order(store.size());
  std::iota(host_order.begin(), host_order.end(), 0u);
  std::shuffle(host_order.begin(), host_order.end(), std::mt19937(rank));
  apron::copy(host_order.begin(), host_order.end(), order.begin());
  store.permute(order);
  exchange.follow_permutation(order);
  const FieldRef update_fields[] = {value_field};
  exchange.update_ghosts(store, update_fields);
  std::vector<Vec4> after(store.size());
  std::vector<float> got(store.size());
  apron::copy(pos.begin(), pos.end(), after.begin());
  apron::copy(value.begin(), value.end(), got.begin());
  for (std::size_t i = 0; i < after.size(); ++i)
    ASSERT_FLOAT_EQ(got[i], after[i].x + 10 * after[i].y + 100 * after[i].z) << i;

  // Dropping the ghosts leaves exactly the owned particles, each with its own value.
  exchange.drop_ghosts(store);
  ASSERT_EQ(store.size(), n_owned);
  std::vector<Vec4> left(n_owned);
  apron::copy(pos.begin(), pos.end(), left.begin());
  apron::copy(value.begin(), value.end(), got.begin());
  std::multiset<std::tuple<float, float, float>> expect_owned, got_owned;
  for (const auto& p : owned) expect_owned.insert({p.x, p.y, p.z});
  for (std::size_t i = 0; i < n_owned; ++i) {
    got_owned.insert({left[i].x, left[i].y, left[i].z});
    ASSERT_FLOAT_EQ(got[i], left[i].x + 10 * left[i].y + 100 * left[i].z) << i;
  }
  EXPECT_EQ(got_owned, expect_owned);
}

INSTANTIATE_TEST_SUITE_P(Methods, ExchangeTest, ::testing::Values("cartesian", "rcb"));

// RCB cuts across the longest side of the points' bounding box, not of the domain: a column of
// points in a long, empty tank is split across its width, as the dam break's water column is.
TEST(Partition, RcbCutsAcrossThePointsLongestSide) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  Box domain = unit_box();
  domain.hi[0] = 4;          // the domain's longest side is x
  std::vector<Vec4> column;  // the points' longest side is y (1.0; z 0.8, x 0.5), all on rank 0
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  if (rank == 0)
    for (int i = 0; i < 4000; ++i) column.push_back({0.5f * u(rng), u(rng), 0.8f * u(rng), 0});
  const Partition partition = Partition::rcb(domain, comm, column);
  const Box& first = partition.subdomain(0);
  EXPECT_EQ(first.lo[0], domain.lo[0]);
  EXPECT_EQ(first.hi[0], domain.hi[0]) << "cut across x, the domain's longest side";
  if (size > 1) {
    EXPECT_LT(first.hi[1], domain.hi[1]) << "not cut across y, the points' longest side";
    EXPECT_NEAR(first.hi[1], 1.0 / size * (size / 2), 0.05);  // rank 0's share of the count
  }
}

TEST(Partition, ProcessGridFollowsTheBoxShape) {
  EXPECT_EQ(process_grid(4, {4, 1, 1}), (std::array<int, 3>{4, 1, 1}));
  EXPECT_EQ(process_grid(4, {1, 1, 1}), (std::array<int, 3>{1, 2, 2}));
  EXPECT_EQ(process_grid(6, {3, 2, 0.1}), (std::array<int, 3>{3, 2, 1}));
  EXPECT_EQ(process_grid(3, {1, 1, 5}), (std::array<int, 3>{1, 1, 3}));
}

TEST(Partition, CartesianTilesTheDomain) {
  for (int ranks : {1, 2, 3, 4, 6, 7}) {
    const auto p = Partition::cartesian(unit_box(2.0), ranks);
    double volume = 0;
    for (const auto& b : p.subdomains()) volume += b.volume();
    EXPECT_NEAR(volume, 8.0, 1e-12) << ranks;
    for (int a = 0; a < ranks; ++a)
      for (int b = a + 1; b < ranks; ++b)
        EXPECT_FALSE(p.subdomain(a).intersects(p.subdomain(b))) << ranks << ": " << a << "," << b;
  }
  EXPECT_THROW(Partition::cartesian(unit_box(), 4, {3, 1, 1}), std::invalid_argument);
}

}  // namespace
}  // namespace apron
