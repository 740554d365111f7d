#include "kernels/cloth/energy.hpp"
#include "kernels/common/algorithms.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cloth/dual.hpp"
#include "kernels/cloth/vertex_adjoint.hpp"
#include "kernels/cloth/vertex_geometry.hpp"
#include "kernels/common/primitives.hpp"

namespace apron::cloth {
namespace {

using Dual = Dual3<double>;

// Positions whose vertex `seeded` carries the derivative directions x, y, z.
struct SeededPoints {
  const Vector3<double>* x;
  std::uint32_t seeded;
  APRON_HD Vector3<Dual> operator()(std::uint32_t i) const {
    const Vector3<double> p = x[i];
    const double s = i == seeded ? 1.0 : 0.0;
    return {Dual(p.x, s, 0, 0), Dual(p.y, 0, s, 0), Dual(p.z, 0, 0, s)};
  }
};

// W_v |V_v| with positions from `x` (plain or seeded) and every normal recomputed from them.
struct VertexEnergy {
  RingView rings;
  const Vector2<double>* coordinates;
  const double* rest_misfit;
  const Sym2<double>* rest_metric;
  const Sym2<double>* rest_curvature;
  const double* rest_area;
  Material material;

  // eps and kappa of vertex v, and b, its curvature tensor now.
  template <class Points, class S>
  APRON_HD void strains(const Points& x, std::uint32_t v, Sym2<S>& eps, Sym2<S>& kappa,
                        Sym2<S>& b) const {
    const RingNormals<Points> normals{x, rings};
    Vector3<S> t;
    Sym2<S> a;
    vertex_tensors(x, normals, rings, coordinates, v, normals(v), t, a, b);
    const Sym2<double> rest_a = rest_metric[v], rest_b = rest_curvature[v];
    eps = S(0.5) * (a - Sym2<S>{S(rest_a.xx), S(rest_a.xy), S(rest_a.yy)});
    kappa = S(-1) * (b - Sym2<S>{S(rest_b.xx), S(rest_b.xy), S(rest_b.yy)});
  }

  template <class Points>
  APRON_HD auto operator()(const Points& x, std::uint32_t v) const {
    using S = decltype(x(v).x);
    Sym2<S> eps, kappa, b;
    strains(x, v, eps, kappa, b);
    return (energy_density(eps, kappa, rest_metric[v], material) + hourglass(x, v)) *
           S(rest_area[v]);
  }

  // The hourglass control's share of W at v.
  template <class Points>
  APRON_HD auto hourglass(const Points& x, std::uint32_t v) const {
    using S = decltype(x(v).x);
    if (material.hourglass == 0) return S(0);
    return S(material.hourglass * material.zeta) *
           ring_misfit(x, rings, coordinates, rest_misfit, v);
  }
};

struct DensityKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  double* density;
  APRON_HD void operator()(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    density[v] = energy(FromArray<double>{x}, u) / energy.rest_area[v];
  }
};

struct MeasuresKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  VertexMeasures* out;
  APRON_HD void operator()(std::size_t i) const {
    const auto v = static_cast<std::uint32_t>(i);
    Sym2<double> eps, kappa, b;
    energy.strains(FromArray<double>{x}, v, eps, kappa, b);
    const Sym2<double> rest_a = energy.rest_metric[v];
    const Material& m = energy.material;
    const Vector2<double> strain = principal_strains(eps, rest_a);
    out[i] = {m.zeta * metric_contraction(eps, eps, rest_a),
              m.xi * metric_contraction(kappa, kappa, rest_a),
              m.phi * metric_contraction(eps, kappa, rest_a),
              energy.hourglass(FromArray<double>{x}, v),
              strain.x,
              strain.y,
              trace(b) / 2,
              determinant(b)};
  }
};

struct VertexEnergyKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  double* out;
  APRON_HD void operator()(std::size_t v) const {
    out[v] = energy(FromArray<double>{x}, static_cast<std::uint32_t>(v));
  }
};

// ---- the forward-mode gradient (energy_gradient_forward, the oracle) ---------------------------

struct ForwardGradientKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  const std::uint32_t* two_ring_offsets;
  const std::uint32_t* two_ring;
  Vector3<double>* gradient;
  APRON_HD void operator()(std::size_t j) const {
    const SeededPoints seeded{x, static_cast<std::uint32_t>(j)};
    Dual sum(0.0);
    for (std::uint32_t k = two_ring_offsets[j]; k < two_ring_offsets[j + 1]; ++k)
      sum += energy(seeded, two_ring[k]);
    gradient[j] = {sum.d[0], sum.d[1], sum.d[2]};
  }
};

// ---- the adjoint gradient (energy_gradient) ---------------------------------------------------

// Pass 1: the normals, and 1 / |sum| of their unnormalised sums (0 where the sum is 0, whose
// normal normalized() sets to 0).
struct NormalsKernel {
  const Vector3<double>* x;
  RingView rings;
  Vector3<double>* normal;
  double* inverse_length;
  APRON_HD void operator()(std::size_t v) const {
    const Vector3<double> sum =
        max_weighted_sum(FromArray<double>{x}, rings, static_cast<std::uint32_t>(v));
    const double length = norm(sum);
    const double inverse = length > 0 ? 1 / length : 0;
    normal[v] = inverse * sum;
    inverse_length[v] = inverse;
  }
};

// The adjoints of a_ab and b_ab from that of W |V| (= 1), through eps = (a - A) / 2 and
// kappa = -(b - B).
struct EnergySeed {
  Sym2<double> rest_a, rest_b;
  double area;
  Material m;
  APRON_HD void operator()(Sym2<double> a, Sym2<double> b, Sym2<double>& a_bar,
                           Sym2<double>& b_bar) const {
    const Sym2<double> eps = 0.5 * (a - rest_a), kappa = -1.0 * (b - rest_b);
    // W = zeta P(eps, eps) + xi P(kappa, kappa) + phi P(eps, kappa), P symmetric and bilinear.
    const Sym2<double> p_eps = metric_contraction_gradient(eps, rest_a);
    const Sym2<double> p_kappa = metric_contraction_gradient(kappa, rest_a);
    const double ea = 0.5 * area * 2 * m.zeta, ka = 0.5 * area * m.phi;  // a_bar = eps_bar / 2
    a_bar = {ea * p_eps.xx + ka * p_kappa.xx, ea * p_eps.xy + ka * p_kappa.xy,
             ea * p_eps.yy + ka * p_kappa.yy};
    const double kb = -area * 2 * m.xi, eb = -area * m.phi;  // b_bar = -kappa_bar
    b_bar = {kb * p_kappa.xx + eb * p_eps.xx, kb * p_kappa.xy + eb * p_eps.xy,
             kb * p_kappa.yy + eb * p_eps.yy};
  }
};

// Pass 2: per v, d(W_v |V_v|)/dx_i and /dn_i for i in v's closed ring, into v's slots, in
// precision R past the strains (vertex_tensors_adjoint).
template <class R>
struct VertexAdjointKernel {
  const Vector3<double>* x;
  const Vector3<double>* normal;
  VertexEnergy energy;  // the rings and rest state the energy reads
  Vector3<R>* x_adjoint;
  Vector3<R>* n_adjoint;
  APRON_HD void operator()(std::size_t v) const { (*this)(v, x_adjoint, n_adjoint, 0); }
  // The same, with slot s written to x_out[s - first] and n_out[s - first].
  APRON_HD void operator()(std::size_t v, Vector3<R>* x_out, Vector3<R>* n_out,
                           std::size_t first) const {
    const VertexEnergy& e = energy;
    const Ring ring = e.rings.ring(v);
    const std::size_t slot = ring.begin + v - first;
    // d(W_v |V_v|) / d(sum of m_k^2) for the hourglass control's terms.
    const Misfit<double> misfit{
        e.rest_misfit, e.rest_area[v] * e.material.hourglass * e.material.zeta / ring.size()};
    vertex_tensors_adjoint<R>(
        x, normal, e.rings, e.coordinates, static_cast<std::uint32_t>(v),
        EnergySeed{e.rest_metric[v], e.rest_curvature[v], e.rest_area[v], e.material}, misfit,
        x_out + slot, n_out + slot);
  }
};

// The per-vertex adjoint holds ~156 registers, latency-bound on its rings' gathers: 128-thread
// blocks keep more of it resident than 256-thread ones, and capping it at 128 registers (4
// blocks an SM) hides more latency than its few spills cost (bench/NOTES.md).
inline constexpr int kAdjointThreads = 128, kAdjointBlocksPerSM = 4;

#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
// Under CUDA a block writes its vertices' slots (contiguous: the closed rings of v0..v0+127)
// into shared memory, then copies them out word by word. Written in place, each thread's 42
// scattered 4-byte stores (and the misfit it parks in a slot and reads back) each cost the L2 a
// sector of its own, every lane a different one; copied out, 32 lanes fill 4 whole sectors.
// The arithmetic is the portable kernel's. 7.5 slots a vertex fit (a closed ring of the mean
// valence, 6, takes 7): 23 KB a block in float32, so that 4 blocks fit the 100 KB shared-memory
// configuration and leave ~156 KB of L1 to the kernel's gathers and spills (8 slots a vertex
// took the 132 KB one: 2% slower). A block whose rings need more writes in place.
inline constexpr std::size_t kStagedSlots = 15 * kAdjointThreads / 2;

template <class R>
__global__ void __launch_bounds__(kAdjointThreads, kAdjointBlocksPerSM)
    staged_vertex_adjoint_kernel(std::size_t n, VertexAdjointKernel<R> f) {
  __shared__ Vector3<R> x_out[kStagedSlots], n_out[kStagedSlots];
  const std::size_t v0 = blockIdx.x * std::size_t{kAdjointThreads}, v = v0 + threadIdx.x;
  const std::size_t v1 = v0 + kAdjointThreads < n ? v0 + kAdjointThreads : n;
  // The block's slots: [ring_offsets[v0] + v0, ring_offsets[v1] + v1).
  const std::size_t first = load(f.energy.rings.offsets + v0) + v0,
                    last = load(f.energy.rings.offsets + v1) + v1;
  if (last - first > kStagedSlots) {
    if (v < n) f(v);
    return;
  }
  if (v < n) f(v, x_out, n_out, first);
  __syncthreads();
  const R* x_from = &x_out[0].x;
  const R* n_from = &n_out[0].x;
  R* x_to = &f.x_adjoint[first].x;
  R* n_to = &f.n_adjoint[first].x;
  for (std::size_t w = threadIdx.x; w < 3 * (last - first); w += kAdjointThreads) {
    x_to[w] = x_from[w];
    n_to[w] = n_from[w];
  }
}

// Asks for the shared memory that `blocks` blocks of `kernel` need on an SM (and no more: the
// rest stays L1, which the kernel's gathers and spills use).
template <class Kernel>
void reserve_shared_memory(Kernel kernel, int blocks) {
  cudaFuncAttributes attributes{};
  int device = 0, per_sm = 0;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || cudaGetDevice(&device) ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) ||
      per_sm == 0)
    return;                                     // a hint only: the launch reports real errors
  const std::size_t reserved_per_block = 1024;  // what the SM keeps of each block's share
  const std::size_t need = blocks * (attributes.sharedSizeBytes + reserved_per_block);
  const int percent =
      static_cast<int>(std::min<std::size_t>(100, (100 * need + per_sm - 1) / per_sm));
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent);
}

template <class R>
void vertex_adjoint(std::size_t n, const VertexAdjointKernel<R>& kernel, bool staged) {
  if (!staged) return for_each_index<kAdjointThreads, kAdjointBlocksPerSM>(n, kernel);
  if (n == 0) return;
  static const bool reserved =
      (reserve_shared_memory(staged_vertex_adjoint_kernel<R>, kAdjointBlocksPerSM), true);
  (void)reserved;
  const auto blocks = static_cast<unsigned>((n + kAdjointThreads - 1) / kAdjointThreads);
  staged_vertex_adjoint_kernel<R><<<blocks, kAdjointThreads>>>(n, kernel);
  check_launch("staged_vertex_adjoint_kernel");
}
#else
template <class R>
void vertex_adjoint(std::size_t n, const VertexAdjointKernel<R>& kernel, bool /*staged*/) {
  for_each_index<kAdjointThreads, kAdjointBlocksPerSM>(n, kernel);
}
#endif

// Adds to `sum`, in ring order, the slots that the entries of `ring` name in `twin_slot`: the
// ring's neighbours' slots for its vertex. Each slot is two dependent loads (its index, then
// the slot, in a neighbour's region); nvcc's unrolled loop runs the ring's first size % 4
// entries one chain at a time, so the indices and slots of up to kTwinBatch entries are loaded
// before any is added. The additions keep their order: the sum is the same to the bit. The
// normal-sum adjoint uses it (8% faster at 1M on an H200); the gather, batched so with its
// normals' terms, went from 64 registers to 112 and no faster (bench/NOTES.md).
inline constexpr std::uint32_t kTwinBatch = 8;
template <class R>
APRON_HD void add_twin_slots(Vector3<double>& sum, const Vector3<R>* slots,
                             const std::uint32_t* twin_slot, const Ring& ring) {
  for (std::uint32_t e = ring.begin; e < ring.end; e += kTwinBatch) {
    const std::uint32_t count = ring.end - e < kTwinBatch ? ring.end - e : kTwinBatch;
    std::uint32_t index[kTwinBatch]{};
    Vector3<R> slot[kTwinBatch]{};
#pragma unroll
    for (std::uint32_t i = 0; i < kTwinBatch; ++i)
      if (i < count) index[i] = load(twin_slot + e + i);
#pragma unroll
    for (std::uint32_t i = 0; i < kTwinBatch; ++i)
      if (i < count) slot[i] = slots[index[i]];
#pragma unroll
    for (std::uint32_t i = 0; i < kTwinBatch; ++i)
      if (i < count) sum += vector_cast<double>(slot[i]);
  }
}

// Pass 3: per k, the adjoint of n_k gathered from k's closed ring (the n slots that name k; the
// sum in float64, as slots of opposite sign cancel), then through normalized() to that of k's
// unnormalised sum: (a - (a . n) n) / |sum|.
template <class R>
struct NormalSumAdjointKernel {
  RingView rings;
  const std::uint32_t* twin_slot;
  const Vector3<double>* normal;
  const double* inverse_length;
  const Vector3<R>* n_adjoint;
  Vector3<double>* sum_adjoint;
  APRON_HD void operator()(std::size_t k) const {
    const Ring ring = rings.ring(k);
    Vector3<double> a = vector_cast<double>(n_adjoint[ring.begin + k]);
    add_twin_slots(a, n_adjoint, twin_slot, ring);
    const Vector3<double> n = normal[k];
    sum_adjoint[k] = inverse_length[k] * (a - dot(a, n) * n);
  }
};

// Pass 4: per j, its own x slot, the x slots its neighbours hold for it (summed in float64), and
// the normals' terms of its ring's triangles (vertex_normals_adjoint_at).
template <class R>
struct GatherKernel {
  const Vector3<double>* x;
  RingView rings;
  const std::uint32_t* twin_slot;
  const Vector3<R>* x_adjoint;
  const Vector3<double>* sum_adjoint;
  Vector3<double>* gradient;
  APRON_HD void operator()(std::size_t j) const {
    const Ring ring = rings.ring(j);
    Vector3<double> g = vector_cast<double>(x_adjoint[ring.begin + j]);
    for (std::uint32_t e = ring.begin; e < ring.end; ++e)
      g += vector_cast<double>(x_adjoint[twin_slot[e]]);
    gradient[j] =
        g + vertex_normals_adjoint_at(x, sum_adjoint, rings, static_cast<std::uint32_t>(j));
  }
};

VertexEnergy vertex_energy(const DeviceMesh<double>& mesh, const ReferenceState<double>& ref,
                           const EnergyModel& model) {
  return {ring_view(mesh),      raw(ref.ring_coordinates), raw(ref.ring_misfit),
          raw(ref.rest.metric), raw(ref.rest.curvature),   raw(ref.rest.area),
          model.material};
}

// Each vertex's 2-ring as CSR, into the model (energy_gradient_forward's, built on its first call).
void build_two_rings(const DeviceMesh<double>& mesh, const EnergyModel& model) {
  const std::vector<std::uint32_t> offsets = to_host(mesh.ring_offsets),
                                   neighbours = to_host(mesh.ring_neighbours);
  std::vector<std::uint32_t> two_offsets{0}, two_ring;
  for (std::size_t v = 0; v + 1 < offsets.size(); ++v) {
    std::vector<std::uint32_t> near{static_cast<std::uint32_t>(v)};
    for (std::uint32_t k = offsets[v]; k < offsets[v + 1]; ++k) {
      const std::uint32_t u = neighbours[k];
      near.push_back(u);
      near.insert(near.end(), neighbours.begin() + offsets[u], neighbours.begin() + offsets[u + 1]);
    }
    std::sort(near.begin(), near.end());
    near.erase(std::unique(near.begin(), near.end()), near.end());
    two_ring.insert(two_ring.end(), near.begin(), near.end());
    two_offsets.push_back(static_cast<std::uint32_t>(two_ring.size()));
  }
  model.two_ring_offsets = DeviceVector<std::uint32_t>(two_offsets.begin(), two_offsets.end());
  model.two_ring = DeviceVector<std::uint32_t>(two_ring.begin(), two_ring.end());
}

// Passes 2-4 with the slots in precision R.
template <class R>
void gradient_from_normals(const DeviceMesh<double>& mesh,
                           const DeviceVector<Vector3<double>>& positions,
                           const ReferenceState<double>& reference, const EnergyModel& model,
                           AdjointSlots<R>& slots, DeviceVector<Vector3<double>>& gradient) {
  const std::size_t n = mesh.vertices();
  const RingView rings = ring_view(mesh);
  vertex_adjoint(
      n,
      VertexAdjointKernel<R>{raw(positions), raw(model.normal),
                             vertex_energy(mesh, reference, model), raw(slots.x), raw(slots.n)},
      model.staged_slots);
  for_each_index(n, NormalSumAdjointKernel<R>{rings, raw(model.twin_slot), raw(model.normal),
                                              raw(model.normal_inverse_length), raw(slots.n),
                                              raw(model.normal_sum_adjoint)});
  for_each_index(n, GatherKernel<R>{raw(positions), rings, raw(model.twin_slot), raw(slots.x),
                                    raw(model.normal_sum_adjoint), raw(gradient)});
}

}  // namespace

EnergyModel make_energy_model(const DeviceMesh<double>& mesh, const Material& material,
                              GradientPrecision precision) {
  const std::vector<std::uint32_t> offsets = to_host(mesh.ring_offsets),
                                   neighbours = to_host(mesh.ring_neighbours);
  // The twin of entry (v -> u) is the entry (u -> v): found by sorting the directed edges.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> edges;
  edges.reserve(neighbours.size());
  for (std::size_t v = 0; v + 1 < offsets.size(); ++v)
    for (std::uint32_t k = offsets[v]; k < offsets[v + 1]; ++k)
      edges.push_back({std::uint64_t{v} << 32 | neighbours[k], k});
  std::sort(edges.begin(), edges.end());
  // Entry (u -> v)'s slot in u's closed-ring layout: its index plus u's place (u + 1).
  std::vector<std::uint32_t> twin_slot(neighbours.size());
  for (std::size_t v = 0; v + 1 < offsets.size(); ++v)
    for (std::uint32_t k = offsets[v]; k < offsets[v + 1]; ++k) {
      const std::uint64_t key = std::uint64_t{neighbours[k]} << 32 | v;
      const auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(key, 0u));
      if (it == edges.end() || it->first != key)
        throw std::logic_error("make_energy_model: ring entry without its reverse");
      twin_slot[k] = it->second + neighbours[k] + 1;
    }
  EnergyModel model;
  model.material = material;
  model.precision = precision;
  model.twin_slot = DeviceVector<std::uint32_t>(twin_slot.begin(), twin_slot.end());
  const std::size_t n = mesh.vertices(), slots = neighbours.size() + n;
  model.normal.resize(n);
  model.normal_inverse_length.resize(n);
  model.normal_sum_adjoint.resize(n);
  if (precision == GradientPrecision::mixed)
    model.slots32.resize(slots);
  else
    model.slots64.resize(slots);
  return model;
}

void energy_density(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model,
                    DeviceVector<double>& density) {
  density.resize(mesh.vertices());
  for_each_index(
      mesh.vertices(),
      DensityKernel{raw(positions), vertex_energy(mesh, reference, model), raw(density)});
}

void vertex_measures(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<VertexMeasures>& out) {
  out.resize(mesh.vertices());
  for_each_index(mesh.vertices(),
                 MeasuresKernel{raw(positions), vertex_energy(mesh, reference, model), raw(out)});
}

void vertex_energies(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<double>& out) {
  out.resize(mesh.vertices());
  for_each_index(
      mesh.vertices(),
      VertexEnergyKernel{raw(positions), vertex_energy(mesh, reference, model), raw(out)});
}

double total_energy(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model) {
  const std::size_t n = mesh.vertices();
  DeviceVector<double> per_vertex, total;
  vertex_energies(mesh, positions, reference, model, per_vertex);
  const std::vector<std::uint32_t> whole{0, static_cast<std::uint32_t>(n)};
  const DeviceVector<std::uint32_t> segment(whole.begin(), whole.end());
  segmented_reduce(per_vertex, segment, 1, Reduction::sum, total);
  return read_element(total, 0);
}

void energy_gradient(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<Vector3<double>>& gradient) {
  const std::size_t n = mesh.vertices(), slots = mesh.ring_neighbours.size() + n;
  const bool mixed = model.precision == GradientPrecision::mixed;
  if (model.normal.size() != n || model.twin_slot.size() != mesh.ring_neighbours.size() ||
      (mixed ? model.slots32.x.size() : model.slots64.x.size()) != slots)
    throw std::invalid_argument("energy_gradient: the model was made for another mesh");
  gradient.resize(n);
  for_each_index(n, NormalsKernel{raw(positions), ring_view(mesh), raw(model.normal),
                                  raw(model.normal_inverse_length)});
  if (mixed)
    gradient_from_normals(mesh, positions, reference, model, model.slots32, gradient);
  else
    gradient_from_normals(mesh, positions, reference, model, model.slots64, gradient);
}

void energy_gradient_forward(const DeviceMesh<double>& mesh,
                             const DeviceVector<Vector3<double>>& positions,
                             const ReferenceState<double>& reference, const EnergyModel& model,
                             DeviceVector<Vector3<double>>& gradient) {
  if (model.two_ring_offsets.size() != mesh.vertices() + 1) build_two_rings(mesh, model);
  gradient.resize(mesh.vertices());
  for_each_index(
      mesh.vertices(),
      ForwardGradientKernel{raw(positions), vertex_energy(mesh, reference, model),
                            raw(model.two_ring_offsets), raw(model.two_ring), raw(gradient)});
}

}  // namespace apron::cloth
