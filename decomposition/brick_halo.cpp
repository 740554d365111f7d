#include "decomposition/brick_halo.hpp"

#include "kernels/common/algorithms.hpp"
#include "kernels/common/vec.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace apron {
namespace {

BrickCoord plus(const BrickCoord& a, const BrickCoord& o) {
  return {a[0] + o[0], a[1] + o[1], a[2] + o[2]};
}

// Bit (x + 1) + 3 (y + 1) + 9 (z + 1) of a direction mask: the neighbour table's order.
std::uint32_t direction_bit(const BrickCoord& o) {
  return std::uint32_t{1} << ((o[0] + 1) + 3 * (o[1] + 1) + 9 * (o[2] + 1));
}

// The 26 directions to neighbouring bricks.
std::vector<BrickCoord> directions() {
  std::vector<BrickCoord> d;
  for (int z = -1; z <= 1; ++z)
    for (int y = -1; y <= 1; ++y)
      for (int x = -1; x <= 1; ++x)
        if (x || y || z) d.push_back({x, y, z});
  return d;
}

// Sends per-rank lists of brick coordinates (3 ints each) to every rank; returns the lists
// received, concatenated by source rank ascending, and how many came from each rank.
std::vector<BrickCoord> all_to_all(const std::vector<std::vector<BrickCoord>>& out, MPI_Comm comm,
                                   std::vector<int>& from_count) {
  const int n = static_cast<int>(out.size());
  std::vector<int> send_counts(n), recv_counts(n), send_displs(n), recv_displs(n);
  std::vector<int> send;
  for (int r = 0; r < n; ++r) {
    send_counts[r] = static_cast<int>(3 * out[r].size());
    for (const auto& c : out[r]) send.insert(send.end(), c.begin(), c.end());
  }
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
  std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_displs.begin(), 0);
  std::vector<int> recv(recv_displs.back() + recv_counts.back());
  MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_INT, recv.data(),
                recv_counts.data(), recv_displs.data(), MPI_INT, comm);
  from_count.resize(n);
  for (int r = 0; r < n; ++r) from_count[r] = recv_counts[r] / 3;
  std::vector<BrickCoord> coords(recv.size() / 3);
  for (std::size_t k = 0; k < coords.size(); ++k)
    coords[k] = {recv[3 * k], recv[3 * k + 1], recv[3 * k + 2]};
  return coords;
}

// Slots by brick coordinate over the local bricks' bounding box grown by one brick, which holds
// every brick a plan looks up (local ones, and remote ones: neighbours of local ones): a dense
// table, as std::map lookups (27 per brick) cost milliseconds per plan at thousands of bricks.
class SlotIndex {
 public:
  explicit SlotIndex(const std::vector<BrickCoord>& bricks) {
    if (bricks.empty()) return;
    BrickCoord hi = bricks.front();
    lo_ = hi;
    for (const auto& b : bricks)
      for (int d = 0; d < 3; ++d) lo_[d] = std::min(lo_[d], b[d]), hi[d] = std::max(hi[d], b[d]);
    for (int d = 0; d < 3; ++d) {
      lo_[d] -= 1;
      dims_[d] = hi[d] + 2 - lo_[d];
    }
    slots_.assign(static_cast<std::size_t>(dims_[0]) * dims_[1] * dims_[2], -1);
  }
  // The slot at b, or -1.
  std::int32_t find(const BrickCoord& b) const {
    const std::size_t at = offset(b);
    return at == kNone ? -1 : slots_[at];
  }
  // The slots around local brick b (which lies a brick inside the box's faces), in the 27
  // directions' order: no bounds to check.
  void neighbours(const BrickCoord& b, std::int32_t out[27]) const {
    const std::ptrdiff_t centre = static_cast<std::ptrdiff_t>(offset(b));
    const std::ptrdiff_t row = dims_[0], plane = static_cast<std::ptrdiff_t>(dims_[0]) * dims_[1];
    for (int d = 0; d < 27; ++d)
      out[d] = slots_[static_cast<std::size_t>(centre + (d % 3 - 1) + ((d / 3) % 3 - 1) * row +
                                               (d / 9 - 1) * plane)];
  }
  // False where b already has a slot; b must lie in the box.
  bool insert(const BrickCoord& b, std::uint32_t slot) {
    const std::size_t at = offset(b);
    if (at == kNone) throw std::logic_error("BrickHalo::plan: a brick outside the lookup box");
    if (slots_[at] >= 0) return false;
    slots_[at] = static_cast<std::int32_t>(slot);
    return true;
  }

 private:
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t offset(const BrickCoord& b) const {
    std::size_t at = 0;
    for (int d = 2; d >= 0; --d) {
      const int x = b[d] - lo_[d];
      if (x < 0 || x >= dims_[d]) return kNone;
      at = at * static_cast<std::size_t>(dims_[d]) + static_cast<std::size_t>(x);
    }
    return at;
  }
  BrickCoord lo_{0, 0, 0}, dims_{0, 0, 0};
  std::vector<std::int32_t> slots_;
};

template <class T>
DeviceVector<T> to_device(const std::vector<T>& h) {
  return DeviceVector<T>(h.begin(), h.end());
}

APRON_HD inline int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

struct ApronGeometry : BrickLayout {
  std::size_t local;               // local slots (the others are remote copies)
  const std::int32_t* neighbours;  // 27 per slot
};

// Every apron voxel of every local slot: the neighbour's interior voxel it mirrors, or the
// background where no brick is.
template <class T>
struct FillApron {
  ApronGeometry g;
  T* data;
  T background;
  APRON_HD void operator()(std::size_t t) const {
    std::size_t slot;
    int v[3], o[3], w[3];
    g.voxel_of(t, slot, v);
    for (int d = 0; d < 3; ++d) {
      o[d] = floor_div(v[d], g.b);
      w[d] = v[d] - o[d] * g.b;
    }
    if (!o[0] && !o[1] && !o[2]) return;  // interior
    const int n = g.neighbours[27 * slot + (o[0] + 1) + 3 * (o[1] + 1) + 9 * (o[2] + 1)];
    data[t] = n < 0 ? background : data[g.row(static_cast<std::size_t>(n), w[0], w[1], w[2])];
  }
};

template <class T>
APRON_HD inline void add_to(T& a, const T& b) {
  a += b;
}
APRON_HD inline void add_to(Vec4& a, const Vec4& b) {
  a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
}
APRON_HD inline void add_to(Vector3<double>& a, const Vector3<double>& b) {
  a.x += b.x, a.y += b.y, a.z += b.z;
}

// Every interior voxel of every slot (local and remote copies) gathers the apron voxels of the
// local slots that mirror it: one pass, no atomics (each voxel writes only itself).
template <class T>
struct SumAprons {
  ApronGeometry g;
  T* data;
  APRON_HD void operator()(std::size_t t) const {
    const std::size_t per = static_cast<std::size_t>(g.b) * g.b * g.b;
    const std::size_t slot = t / per;
    const auto r = static_cast<int>(t - slot * per);
    const int v[3] = {r % g.b, (r / g.b) % g.b, r / (g.b * g.b)};
    T sum{};
    bool any = false;
    for (int q = 0; q < 27; ++q) {
      const int o[3] = {q % 3 - 1, (q / 3) % 3 - 1, q / 9 - 1};
      if (!o[0] && !o[1] && !o[2]) continue;
      int p[3];
      bool within = true;
      for (int d = 0; d < 3; ++d) {
        p[d] = v[d] + o[d] * g.b;  // this voxel in the coordinates of the brick at -o
        within = within && p[d] >= -g.a && p[d] < g.b + g.a;
      }
      if (!within) continue;
      const int y = g.neighbours[27 * slot + (1 - o[0]) + 3 * (1 - o[1]) + 9 * (1 - o[2])];
      if (y < 0 || static_cast<std::size_t>(y) >= g.local) continue;
      add_to(sum, data[g.row(static_cast<std::size_t>(y), p[0], p[1], p[2])]);
      any = true;
    }
    if (any) add_to(data[g.row(slot, v[0], v[1], v[2])], sum);
  }
};

// Calls f(T*) with the field's data for its element type (any of APRON_FIELD_TYPES).
template <class F>
void with_type(ParticleField& field, F f) {
#define APRON_TRY_FIELD(T) \
  if (auto* x = dynamic_cast<TypedField<T>*>(&field)) return f(raw(x->data));
  APRON_FIELD_TYPES(APRON_TRY_FIELD)
#undef APRON_TRY_FIELD
  throw std::logic_error("BrickHalo: field '" + field.name() + "' is of no field type");
}

}  // namespace

BrickHalo::BrickHalo(Transport& transport, int brick_size, int apron)
    : b_(brick_size), a_(apron), layout_{brick_size, apron}, halo_(transport) {
  if (b_ < 1 || a_ < 0 || a_ > b_)
    throw std::invalid_argument("BrickHalo: need brick size >= 1 and 0 <= apron <= brick size");
  voxels_ = layout_.stored_per_brick();
  // Offset o of a direction reaches coordinate v when o is 0 or v lies within a_ of that side.
  const auto reach = [&](int v, int o) { return o == 0 || (o < 0 ? v < a_ : v >= b_ - a_); };
  const auto dirs = directions();
  reached_by_.assign(static_cast<std::size_t>(b_) * b_ * b_, 0);
  for (int k = 0, v = 0; k < b_; ++k)
    for (int j = 0; j < b_; ++j)
      for (int i = 0; i < b_; ++i, ++v)
        for (const auto& o : dirs)
          if (reach(i, o[0]) && reach(j, o[1]) && reach(k, o[2]))
            reached_by_[v] |= direction_bit(o);
}

void BrickHalo::plan(std::span<const BrickCoord> bricks,
                     const std::function<int(const BrickCoord&)>& owner) {
  MPI_Comm comm = halo_.transport_comm();
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  local_.assign(bricks.begin(), bricks.end());
  SlotIndex index(local_);
  for (std::size_t i = 0; i < local_.size(); ++i) {
    if (owner(local_[i]) != rank)
      throw std::invalid_argument(
          "BrickHalo::plan: a brick is not owned by the rank that holds it");
    if (!index.insert(local_[i], static_cast<std::uint32_t>(i)))
      throw std::invalid_argument("BrickHalo::plan: a brick is listed twice");
  }
  const auto dirs = directions();

  // 1. Tell the owner of every remote neighbour position which local bricks border it (alone,
  // a rank has none: 26 owner lookups per brick saved).
  std::vector<std::set<BrickCoord>> announce(nranks);
  if (nranks > 1)
    for (const auto& b : local_)
      for (const auto& o : dirs) {
        const int q = owner(plus(b, o));
        if (q != rank) announce[q].insert(b);
      }
  std::vector<std::vector<BrickCoord>> out(nranks);
  for (int r = 0; r < nranks; ++r) out[r].assign(announce[r].begin(), announce[r].end());
  std::vector<int> from_count;
  const auto announced = all_to_all(out, comm, from_count);

  // 2. Each local brick next to an announced one goes to the announcer, once: the part of its
  // interior that the announcer's bricks reach, from the directions they lie in.
  std::vector<std::vector<BrickCoord>> needed(nranks);
  export_slots_.clear();
  export_ranks_.clear();
  export_directions_.clear();
  for (int p = 0, at = 0; p < nranks; at += from_count[p], ++p) {
    std::map<BrickCoord, std::uint32_t> mine;  // brick -> directions of p's bricks around it
    for (int k = at; k < at + from_count[p]; ++k)
      for (const auto& o : dirs) {
        const auto y = plus(announced[k], o);
        if (index.find(y) >= 0) mine[y] |= direction_bit({-o[0], -o[1], -o[2]});
      }
    for (const auto& [y, towards] : mine) {
      needed[p].push_back(y);
      export_slots_.push_back(static_cast<std::uint32_t>(index.find(y)));
      export_ranks_.push_back(p);
      export_directions_.push_back(towards);
    }
  }
  // The receivers learn which bricks they get, in the plan's order (peers ascending, then the
  // sender's order), and find the same directions: those of their own bricks around each.
  remote_ = all_to_all(needed, comm, from_count);
  for (std::size_t r = 0; r < remote_.size(); ++r)
    index.insert(remote_[r], static_cast<std::uint32_t>(local_.size() + r));
  remote_directions_.assign(remote_.size(), 0);
  for (std::size_t r = 0; r < remote_.size(); ++r)
    for (const auto& o : dirs) {
      const std::int32_t y = index.find(plus(remote_[r], o));
      if (y >= 0 && static_cast<std::size_t>(y) < local_.size())
        remote_directions_[r] |= direction_bit(o);
    }
  build_halo();

  // 3. Each slot's neighbours, by direction (-1: no brick there): all the apron kernels need.
  // 27 lookups per brick on the host, the voxels on the device: replanning thousands of bricks
  // every step of a moving fluid stays cheap.
  const std::size_t all_slots = local_.size() + remote_.size();
  std::vector<std::int32_t> neighbours(27 * all_slots);
  for (std::size_t s = 0; s < local_.size(); ++s) index.neighbours(local_[s], &neighbours[27 * s]);
  for (std::size_t s = local_.size(); s < all_slots; ++s)
    for (int d = 0; d < 27; ++d)
      neighbours[27 * s + d] = index.find(
          plus(remote_[s - local_.size()], BrickCoord{d % 3 - 1, (d / 3) % 3 - 1, d / 9 - 1}));
  upload(neighbours_, neighbours);
}

// The voxel rows that travel: of each exported brick and of each remote copy, the interior
// voxels within the apron width of a face, edge or corner towards the receiver's bricks (all
// that FillApron and SumAprons touch, and all the multigrid kernels read across a brick face),
// listed in the same order on both ends. A brick of 8^3 with a rank beyond one face sends 64 of
// its 512 voxels.
void BrickHalo::build_halo() {
  std::vector<std::uint32_t> rows;
  std::vector<int> destinations;
  for (std::size_t e = 0; e < export_slots_.size(); ++e)
    for_each_reached_voxel(export_directions_[e], [&](int i, int j, int k) {
      rows.push_back(static_cast<std::uint32_t>(voxel(export_slots_[e], i, j, k)));
      destinations.push_back(export_ranks_[e]);
    });
  halo_.build(to_device(rows), to_device(destinations));
  std::vector<std::uint32_t> slots;
  slots.reserve(halo_.import_total());
  for (std::size_t r = 0; r < remote_.size(); ++r)
    for_each_reached_voxel(remote_directions_[r], [&](int i, int j, int k) {
      slots.push_back(static_cast<std::uint32_t>(voxel(local_.size() + r, i, j, k)));
    });
  if (halo_.import_total() != slots.size())
    throw std::logic_error("BrickHalo::plan: remote bricks and halo imports disagree");
  halo_.set_import_slots(to_device(slots));
}

// Calls f(i, j, k) for the interior voxels within the apron width of the brick's side towards
// any of `directions` (bits of direction_bit()), k slowest, i fastest.
template <class F>
void BrickHalo::for_each_reached_voxel(std::uint32_t directions, F f) const {
  for (int k = 0, v = 0; k < b_; ++k)
    for (int j = 0; j < b_; ++j)
      for (int i = 0; i < b_; ++i, ++v)
        if (reached_by_[v] & directions) f(i, j, k);
}

void BrickHalo::plan_like(const BrickHalo& other) {
  local_ = other.local_;
  remote_ = other.remote_;
  export_slots_ = other.export_slots_;
  export_ranks_ = other.export_ranks_;
  export_directions_ = other.export_directions_;
  remote_directions_ = other.remote_directions_;
  resize_per_particle(neighbours_, other.neighbours_.size());
  apron::copy(other.neighbours_.begin(), other.neighbours_.end(), neighbours_.begin());
  build_halo();
}

void BrickHalo::check_store(const ParticleStore& store) const {
  if (store.size() < total_voxels())
    throw std::invalid_argument("BrickHalo: the store holds " + std::to_string(store.size()) +
                                " rows, the plan needs " + std::to_string(total_voxels()));
}

void BrickHalo::fill_bytes(ParticleStore& store, std::span<const FieldRef> fields,
                           const void* background, std::size_t element_size) {
  check_store(store);
  halo_.update(store, fields);
  for (const FieldRef ref : fields) {
    auto& field = store.field(ref);
    if (field.element_size() != element_size)
      throw std::invalid_argument("BrickHalo::fill: background of another type than field '" +
                                  field.name() + "'");
    with_type(field, [&](auto* data) {
      using T = std::remove_pointer_t<decltype(data)>;
      T value;
      std::memcpy(&value, background, sizeof(T));
      for_each_index(local_.size() * voxels_,
                     FillApron<T>{{layout_, local_.size(), raw(neighbours_)}, data, value});
    });
  }
}

void BrickHalo::refresh(ParticleStore& store, std::span<const FieldRef> fields) {
  check_store(store);
  if (!halo_.peers().empty()) halo_.update(store, fields);
}

void BrickHalo::reverse_sum(ParticleStore& store, std::span<const FieldRef> fields) {
  check_store(store);
  alignas(16) const std::byte zeros[64] = {};
  const std::size_t interior = static_cast<std::size_t>(b_) * b_ * b_;
  const std::size_t slots = local_.size() + remote_.size();
  for (const FieldRef ref : fields) {
    auto& field = store.field(ref);
    if (field.element_size() > sizeof zeros)
      throw std::invalid_argument("BrickHalo::reverse_sum: field '" + field.name() +
                                  "' is too wide");
    // Remote copies collect this rank's contributions to other ranks' bricks.
    field.assign(zeros, raw(halo_.import_slots()), halo_.import_slots().size());
    with_type(field, [&](auto* data) {
      using T = std::remove_pointer_t<decltype(data)>;
      if constexpr (std::is_same_v<T, std::uint8_t>)
        throw std::invalid_argument("BrickHalo::reverse_sum: field '" + field.name() +
                                    "' is not summed");
      else
        for_each_index(slots * interior,
                       SumAprons<T>{{layout_, local_.size(), raw(neighbours_)}, data});
    });
  }
  halo_.reverse(store, fields, Reduction::sum);
}

std::size_t BrickHalo::device_bytes() const {
  return halo_.device_bytes() + neighbours_.capacity() * sizeof(std::int32_t);
}

}  // namespace apron
