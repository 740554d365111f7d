// HaloPlan (gather, gather_into, update, reverse sum), the global reductions and weighted RCB on
// however many ranks the test is launched with, checked against brute-force answers computed
// from every rank's rows (MPI_Allgather).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "decomposition/halo_plan.hpp"
#include "decomposition/partition.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

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

template <class T>
std::vector<T> host(const DeviceVector<T>& v) {
  std::vector<T> h(v.size());
  apron::copy(v.begin(), v.end(), h.begin());
  return h;
}
template <class T>
DeviceVector<T> device(const std::vector<T>& h) {
  return DeviceVector<T>(h.begin(), h.end());
}

std::vector<std::int64_t> all_gather(const std::vector<std::int64_t>& mine, MPI_Comm comm) {
  const int n = static_cast<int>(mine.size()), size = size_of(comm);
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<std::int64_t> all(displs.back() + counts.back());
  MPI_Allgatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T,
                 comm);
  return all;
}

// Rows: rank s holds gids s * 1000 + i; rank 1 holds none (nothing to send), and the last rank
// sends nothing (but receives). Exports are asymmetric: rank 2 never sends to rank 0.
std::size_t rows_on(int rank, int /*size*/) {
  return rank == 1 ? 0 : 40 + 13 * rank;
}
bool exported(std::int64_t gid, int from, int to, int size) {
  if (from == to || from == size - 1 || (from == 2 && to == 0)) return false;
  return (gid * 7 + to * 3 + from) % 4 == 0 || gid % 11 == to;
}
float fvalue(std::int64_t gid) {
  return 0.5f * static_cast<float>(gid);
}
double dvalue(std::int64_t gid) {
  return 1.25 * static_cast<double>(gid) + 0.1;
}
Vec4 vvalue(std::int64_t gid) {
  const float g = static_cast<float>(gid);
  return {g, 2 * g, -g, 4 * g};
}
std::int32_t ivalue(std::int64_t gid) {
  return static_cast<std::int32_t>(gid % 1000) - 7;
}

struct Rows {
  ParticleStore store;
  Field<std::int64_t> gid;
  Field<float> f;
  Field<double> d;
  Field<Vec4> v;
  Field<std::int32_t> i;
  Rows(int rank, int size) {
    gid = store.add<std::int64_t>("gid");
    f = store.add<float>("f");
    d = store.add<double>("d");
    v = store.add<Vec4>("v");
    i = store.add<std::int32_t>("i");
    const std::size_t n = rows_on(rank, size);
    store.resize(n);
    std::vector<std::int64_t> g(n);
    std::iota(g.begin(), g.end(), std::int64_t{rank} * 1000);
    std::vector<float> hf(n);
    std::vector<double> hd(n);
    std::vector<Vec4> hv(n);
    std::vector<std::int32_t> hi(n);
    for (std::size_t k = 0; k < n; ++k)
      hf[k] = fvalue(g[k]), hd[k] = dvalue(g[k]), hv[k] = vvalue(g[k]), hi[k] = ivalue(g[k]);
    apron::copy(g.begin(), g.end(), gid->begin());
    apron::copy(hf.begin(), hf.end(), f->begin());
    apron::copy(hd.begin(), hd.end(), d->begin());
    apron::copy(hv.begin(), hv.end(), v->begin());
    apron::copy(hi.begin(), hi.end(), i->begin());
  }
  std::vector<FieldRef> all() const { return {gid, f, d, v, i}; }
};

// The exports of this rank's rows, in a shuffled order (the plan must group them itself).
void exports_of(int rank, int size, IndexVector& rows, DeviceVector<int>& ranks) {
  std::vector<std::uint32_t> r;
  std::vector<int> to;
  for (std::size_t k = 0; k < rows_on(rank, size); ++k)
    for (int dest = 0; dest < size; ++dest)
      if (exported(rank * 1000 + static_cast<std::int64_t>(k), rank, dest, size))
        r.push_back(static_cast<std::uint32_t>(k)), to.push_back(dest);
  std::vector<std::size_t> perm(r.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(rank + 5));
  std::vector<std::uint32_t> rs(r.size());
  std::vector<int> ts(r.size());
  for (std::size_t k = 0; k < perm.size(); ++k) rs[k] = r[perm[k]], ts[k] = to[perm[k]];
  rows = device(rs);
  ranks = device(ts);
}

class HaloPlanTest : public ::testing::TestWithParam<bool> {};  // peers given, or all-to-all

TEST_P(HaloPlanTest, GatherUpdateReverseSumMatchBruteForce) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  Transport transport(comm);
  HaloPlan plan(transport);
  Rows rows(rank, size);
  IndexVector exports;
  DeviceVector<int> destinations;
  exports_of(rank, size, exports, destinations);
  if (GetParam()) {
    std::vector<int> peers;  // every other rank, listed backwards
    for (int r = size - 1; r >= 0; --r)
      if (r != rank) peers.push_back(r);
    plan.build(exports, destinations, peers);
  } else {
    plan.build(exports, destinations);
  }
  const std::size_t n = rows.store.size();
  EXPECT_EQ(plan.export_total(), exports.size());

  // Brute force: every rank's gids, and which of them come here.
  std::vector<std::int64_t> mine(n);
  apron::copy(rows.gid->begin(), rows.gid->end(), mine.begin());
  const auto everyone = all_gather(mine, comm);
  std::multiset<std::int64_t> expected;
  for (std::int64_t g : everyone)
    if (exported(g, static_cast<int>(g / 1000), rank, size)) expected.insert(g);
  ASSERT_EQ(plan.import_total(), expected.size());

  // Gather: copies appended, every field equal to its owner's.
  const std::size_t first = plan.gather(rows.store, rows.all());
  ASSERT_EQ(first, n);
  ASSERT_EQ(rows.store.size(), n + expected.size());
  {
    const auto g = host(*rows.gid);
    const auto f = host(*rows.f);
    const auto d = host(*rows.d);
    const auto v = host(*rows.v);
    const auto i = host(*rows.i);
    std::multiset<std::int64_t> got(g.begin() + first, g.end());
    EXPECT_EQ(got, expected);
    for (std::size_t k = first; k < g.size(); ++k) {
      ASSERT_EQ(f[k], fvalue(g[k])) << k;
      ASSERT_EQ(d[k], dvalue(g[k])) << k;
      ASSERT_EQ(v[k].y, vvalue(g[k]).y) << k;
      ASSERT_EQ(v[k].w, vvalue(g[k]).w) << k;
      ASSERT_EQ(i[k], ivalue(g[k])) << k;
    }
  }

  // Update: owners change two fields; the copies follow, nothing else moves.
  {
    auto f = host(*rows.f);
    auto d = host(*rows.d);
    const auto g = host(*rows.gid);
    for (std::size_t k = 0; k < n; ++k) f[k] = 3.0f * fvalue(g[k]) + 1, d[k] = -dvalue(g[k]);
    apron::copy(f.begin(), f.end(), rows.f->begin());
    apron::copy(d.begin(), d.end(), rows.d->begin());
    const FieldRef fields[] = {rows.d, rows.f};
    plan.update(rows.store, fields);
    const auto f2 = host(*rows.f);
    const auto d2 = host(*rows.d);
    const auto i2 = host(*rows.i);
    ASSERT_EQ(rows.store.size(), n + expected.size());
    for (std::size_t k = 0; k < g.size(); ++k) {
      ASSERT_EQ(f2[k], 3.0f * fvalue(g[k]) + 1) << k;
      ASSERT_EQ(d2[k], -dvalue(g[k])) << k;
      ASSERT_EQ(i2[k], ivalue(g[k])) << k;
    }
  }

  // Reverse sum: each copy holds a contribution that depends on where it sits; owners start
  // from 1 and must end with 1 + the sum of their copies' contributions (all ranks' copies,
  // gathered). Integer-valued floats: the sums are exact in any order.
  {
    const auto g = host(*rows.gid);
    std::vector<float> f(g.size(), 1.0f);
    std::vector<double> d(g.size(), 1.0);
    std::vector<Vec4> v(g.size(), Vec4{1, 1, 1, 1});
    std::vector<std::int32_t> i(g.size(), 1);
    std::vector<std::int64_t> contributions;  // (gid, contribution) pairs
    for (std::size_t k = first; k < g.size(); ++k) {
      const std::int64_t c = (g[k] % 97) + 100 * rank + static_cast<std::int64_t>(k - first);
      f[k] = static_cast<float>(c);
      d[k] = 0.5 * static_cast<double>(c);
      v[k] = {static_cast<float>(c), 0, static_cast<float>(-c), 2};
      i[k] = static_cast<std::int32_t>(3 * c);
      contributions.push_back(g[k]);
      contributions.push_back(c);
    }
    apron::copy(f.begin(), f.end(), rows.f->begin());
    apron::copy(d.begin(), d.end(), rows.d->begin());
    apron::copy(v.begin(), v.end(), rows.v->begin());
    apron::copy(i.begin(), i.end(), rows.i->begin());
    const FieldRef fields[] = {rows.f, rows.d, rows.v, rows.i};
    plan.reverse(rows.store, fields, Reduction::sum);

    const auto all = all_gather(contributions, comm);
    std::map<std::int64_t, std::int64_t> sum, copies;
    for (std::size_t k = 0; k < all.size(); k += 2) sum[all[k]] += all[k + 1], ++copies[all[k]];
    const auto f2 = host(*rows.f);
    const auto d2 = host(*rows.d);
    const auto v2 = host(*rows.v);
    const auto i2 = host(*rows.i);
    std::size_t touched = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::int64_t s = sum.count(g[k]) ? sum[g[k]] : 0;
      const std::int64_t c = copies.count(g[k]) ? copies[g[k]] : 0;
      touched += c > 0;
      ASSERT_EQ(f2[k], 1.0f + static_cast<float>(s)) << g[k];
      ASSERT_EQ(d2[k], 1.0 + 0.5 * static_cast<double>(s)) << g[k];
      ASSERT_EQ(v2[k].x, 1.0f + static_cast<float>(s)) << g[k];
      ASSERT_EQ(v2[k].z, 1.0f - static_cast<float>(s)) << g[k];
      ASSERT_EQ(v2[k].w, 1.0f + 2.0f * static_cast<float>(c)) << g[k];
      ASSERT_EQ(i2[k], 1 + 3 * s) << g[k];
    }
    // The copies keep their own values.
    for (std::size_t k = first; k < g.size(); ++k) ASSERT_EQ(f2[k], f[k]) << k;
    // Some row somewhere must have been summed into (else the test proves nothing).
    const auto touched_total = global_sum(comm, static_cast<std::int64_t>(touched));
    if (size > 1) {
      EXPECT_GT(touched_total, 0);
    }
  }

  // Reverse min and max, through the begin/finish halves: owners start from 500 and must end
  // with the least (greatest) of that and their copies' contributions; the copies' values sent
  // are taken at begin(), so a copy changed between the halves changes nothing.
  for (const Reduction op : {Reduction::min, Reduction::max}) {
    const auto g = host(*rows.gid);
    std::vector<float> f(g.size(), 500.0f);
    std::vector<Vec4> v(g.size(), Vec4{500, -500, 0, 0});
    std::vector<std::int64_t> contributions;
    for (std::size_t k = first; k < g.size(); ++k) {
      const std::int64_t c = 3 * (g[k] % 300) + 7 * rank + static_cast<std::int64_t>(k - first);
      f[k] = static_cast<float>(c);
      v[k] = {static_cast<float>(c), static_cast<float>(-c), 0, 0};
      contributions.push_back(g[k]);
      contributions.push_back(c);
    }
    apron::copy(f.begin(), f.end(), rows.f->begin());
    apron::copy(v.begin(), v.end(), rows.v->begin());
    const FieldRef fields[] = {rows.f, rows.v};
    plan.reverse_begin(rows.store, fields);
    if (first < g.size()) apron::fill(rows.f->begin() + first, rows.f->end(), 1e9f);
    plan.reverse_finish(rows.store, fields, op);
    const auto all = all_gather(contributions, comm);
    std::map<std::int64_t, std::pair<double, double>> range;  // the copies' least and greatest
    for (std::size_t k = 0; k < all.size(); k += 2) {
      const double c = static_cast<double>(all[k + 1]);
      auto [at, fresh] = range.emplace(all[k], std::pair{c, c});
      at->second = {std::min(at->second.first, c), std::max(at->second.second, c)};
    }
    const auto f2 = host(*rows.f);
    const auto v2 = host(*rows.v);
    const bool min = op == Reduction::min;
    for (std::size_t k = 0; k < n; ++k) {
      double x = 500, y = -500;  // y combines -c: its extreme comes from the other end
      if (const auto at = range.find(g[k]); at != range.end()) {
        const auto [lo, hi] = at->second;
        x = min ? std::min(x, lo) : std::max(x, hi);
        y = min ? std::min(y, -hi) : std::max(y, -lo);
      }
      ASSERT_EQ(f2[k], static_cast<float>(x)) << g[k];
      ASSERT_EQ(v2[k].x, static_cast<float>(x)) << g[k];
      ASSERT_EQ(v2[k].y, static_cast<float>(y)) << g[k];
    }
  }
}

TEST_P(HaloPlanTest, GatherIntoGivenSlotsAndFollowPermutation) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  Transport transport(comm);
  HaloPlan plan(transport);
  Rows rows(rank, size);
  IndexVector exports;
  DeviceVector<int> destinations;
  exports_of(rank, size, exports, destinations);
  if (GetParam()) {
    std::vector<int> peers;
    for (int r = 0; r < size; ++r)
      if (r != rank) peers.push_back(r);
    plan.build(exports, destinations, peers);
  } else {
    plan.build(exports, destinations);
  }
  const std::size_t n = rows.store.size(), imports = plan.import_total();
  // Room for the copies first, every other slot from the end backwards, interleaved with
  // owned rows moved up.
  rows.store.resize(n + imports);
  std::vector<std::uint32_t> slots(imports);
  for (std::size_t k = 0; k < imports; ++k)
    slots[k] = static_cast<std::uint32_t>(n + imports - 1 - k);
  plan.gather_into(rows.store, rows.all(), device(slots));
  auto g = host(*rows.gid);
  auto f = host(*rows.f);
  std::multiset<std::int64_t> got(g.begin() + n, g.end()), expected;
  for (std::int64_t r = 0; r < size; ++r)
    for (std::size_t k = 0; k < rows_on(static_cast<int>(r), size); ++k)
      if (exported(r * 1000 + static_cast<std::int64_t>(k), static_cast<int>(r), rank, size))
        expected.insert(r * 1000 + static_cast<std::int64_t>(k));
  EXPECT_EQ(got, expected);
  for (std::size_t k = 0; k < g.size(); ++k) ASSERT_EQ(f[k], fvalue(g[k])) << k;

  // Shuffle the store, follow, then update: each copy still gets its owner's value.
  std::vector<std::uint32_t> order(rows.store.size());
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(rank));
  const IndexVector dorder = device(order);
  rows.store.permute(dorder);
  plan.follow_permutation(dorder);
  g = host(*rows.gid);
  std::vector<float> owned_f(g.size());
  for (std::size_t k = 0; k < g.size(); ++k) owned_f[k] = fvalue(g[k]) - 2;
  apron::copy(owned_f.begin(), owned_f.end(), rows.f->begin());
  // Poison the copies: update must overwrite every one of them.
  const auto import_slots = host(plan.import_slots());
  for (auto s : import_slots) owned_f[s] = -12345;
  apron::copy(owned_f.begin(), owned_f.end(), rows.f->begin());
  const FieldRef fields[] = {rows.f};
  plan.update(rows.store, fields);
  f = host(*rows.f);
  for (std::size_t k = 0; k < g.size(); ++k) ASSERT_EQ(f[k], fvalue(g[k]) - 2) << k;
}

INSTANTIATE_TEST_SUITE_P(Build, HaloPlanTest, ::testing::Values(false, true),
                         [](const auto& param_info) {
                           return param_info.param ? "GivenPeers" : "AllToAll";
                         });

TEST(Reductions, SumMaxMinArgmax) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  EXPECT_EQ(global_sum(comm, static_cast<double>(rank + 1)), size * (size + 1) / 2.0);
  EXPECT_EQ(global_max(comm, static_cast<double>(rank)), size - 1);
  EXPECT_EQ(global_min(comm, static_cast<double>(rank) - 3), -3);
  EXPECT_EQ(global_sum(comm, std::int64_t{1} << 40), std::int64_t{size} << 40);
  std::vector<double> v{1.0, static_cast<double>(rank), -static_cast<double>(rank)};
  global_sum(comm, v);
  EXPECT_EQ(v[0], size);
  EXPECT_EQ(v[1], size * (size - 1) / 2.0);
  std::vector<double> w{static_cast<double>(rank), -static_cast<double>(rank)};
  global_max(comm, w);
  EXPECT_EQ(w[0], size - 1);
  EXPECT_EQ(w[1], 0);
  std::vector<double> m{static_cast<double>(rank)};
  global_min(comm, m);
  EXPECT_EQ(m[0], 0);
  std::vector<std::int64_t> c{rank, 2};
  global_sum(comm, c);
  EXPECT_EQ(c[0], size * (size - 1) / 2);
  EXPECT_EQ(c[1], 2 * size);

  // Argmax: a unique maximum on the last rank.
  auto a = global_argmax(comm, rank == size - 1 ? 10.0 : 1.0, 100 + rank);
  EXPECT_EQ(a.value, 10.0);
  EXPECT_EQ(a.index, 100 + size - 1);
  EXPECT_EQ(a.rank, size - 1);
  // Ties: every rank offers the same value; the lowest index wins, wherever it is (here on the
  // last rank, so "lowest rank" alone would be wrong).
  a = global_argmax(comm, 5.0, 50 - rank);
  EXPECT_EQ(a.index, 50 - (size - 1));
  EXPECT_EQ(a.rank, size - 1);
  // Same value and index: the lowest rank.
  a = global_argmax(comm, 5.0, 7);
  EXPECT_EQ(a.rank, 0);
  // A rank with nothing (-inf) and NaN never win over a number.
  const double nothing = -std::numeric_limits<double>::infinity();
  a = global_argmax(comm, rank == 0 ? std::nan("") : (rank == 1 ? 2.0 : nothing), rank);
  if (size > 1) {
    EXPECT_EQ(a.value, 2.0);
    EXPECT_EQ(a.rank, 1);
  }
  // Several at once.
  const double vals[2] = {static_cast<double>(rank), -static_cast<double>(rank)};
  const std::int64_t idx[2] = {rank, rank};
  ArgMax out[2];
  global_argmax(comm, vals, idx, out);
  EXPECT_EQ(out[0].rank, size - 1);
  EXPECT_EQ(out[1].rank, 0);
}

TEST(WeightedRcb, SkewedWeightsBalanceWithinFivePercent) {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = rank_of(comm), size = size_of(comm);
  Box domain;
  for (int d = 0; d < 3; ++d) domain.lo[d] = 0, domain.hi[d] = 1;
  std::mt19937 rng(17 + rank);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<Vec4> points;
  std::vector<double> weights;
  for (int k = 0; k < 20000; ++k) {
    const Vec4 p{u(rng), u(rng), u(rng), 0};
    points.push_back(p);
    // Heavy near the x = 0 face: weight from 1 to ~100.
    weights.push_back(1 + 99 * std::pow(1 - p.x, 6));
  }
  const Partition weighted = Partition::rcb(domain, comm, points, weights);
  const Partition plain = Partition::rcb(domain, comm, points);
  std::vector<double> per_rank(size, 0), count_per_rank(size, 0);
  const auto& own = weighted.ownership_boxes();
  for (std::size_t k = 0; k < points.size(); ++k)
    for (int r = 0; r < size; ++r)
      if (own[r].contains(points[k])) {
        per_rank[r] += weights[k];
        break;
      }
  global_sum(comm, per_rank);
  const double total = std::accumulate(per_rank.begin(), per_rank.end(), 0.0);
  for (int r = 0; r < size; ++r)
    EXPECT_NEAR(per_rank[r], total / size, 0.05 * total / size) << "rank " << r;
  // The unweighted overload is the weighted one with unit weights: the same boxes.
  const Partition unit =
      Partition::rcb(domain, comm, points, std::vector<double>(points.size(), 1.0));
  for (int r = 0; r < size; ++r)
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(unit.subdomain(r).lo[d], plain.subdomain(r).lo[d]);
      EXPECT_EQ(unit.subdomain(r).hi[d], plain.subdomain(r).hi[d]);
    }
  // And the skew matters: on 2+ ranks the weighted cut differs from the count cut.
  if (size > 1) {
    EXPECT_NE(weighted.subdomain(0).hi[0], plain.subdomain(0).hi[0]);
  }
}

// Halos take fields by the handles their store made: another store's handle, or an array that
// is no field of the store, is a programming error caught at once.
TEST(FieldHandles, AnotherStoresHandleIsRefused) {
  ParticleStore a, b;
  const Field<float> x = a.add<float>("x");
  b.add<float>("x");
  EXPECT_THROW(b.field(x), std::logic_error);
  EXPECT_EQ(&a.field(x), &a.field(a.ref(*x)));
  DeviceVector<float> loose;
  EXPECT_THROW(a.ref(loose), std::logic_error);
  // A moved store keeps its fields' handles.
  ParticleStore c = std::move(a);
  EXPECT_EQ(c.field(x).name(), "x");
}

}  // namespace
}  // namespace apron
