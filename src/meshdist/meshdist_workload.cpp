#include "meshdist/meshdist_workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <vector>

#include "config/yaml_reader.hpp"
#include "decomposition/reductions.hpp"
#include "io/mesh_output.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/surface/triangle_geometry.hpp"
#include "runtime/json.hpp"

namespace apron::meshdist {
namespace {

// floor(total * k / size) without the product, which can exceed 64 bits.
std::uint64_t share_end(std::uint64_t total, int k, int size) {
  const auto n = static_cast<std::uint64_t>(size), r = static_cast<std::uint64_t>(k);
  return total / n * r + total % n * r / n;
}

// Samples [first, last) of `total` on this rank: contiguous, in rank order.
std::pair<std::uint64_t, std::uint64_t> rank_range(std::uint64_t total, int rank, int size) {
  return {share_end(total, rank, size), share_end(total, rank + 1, size)};
}

}  // namespace

MeshDistance::MeshDistance(const WorkloadContext& context)
    : Workload(context.config,
               {"sample",
                "a_error.xmf, b_error.xmf and the .ply files open in ParaView; run_report.json"}),
      md_(config_.settings_as<MeshdistConfig>()),
      ranks_(context.ranks),
      device_(context.device),
      timers_(context.timers) {}

// Every rank reads the same file and fails the same way: bad input, reported once.
io::TriangleMesh MeshDistance::read_input(const MeshInput& input, const char* key) const {
  try {
    return subdivide(io::read_mesh(input.file), input.subdivide);
  } catch (const io::MeshReadError& e) {
    throw config::ConfigError(std::string("meshdist.") + key + ".file: " + e.what());
  }
}

std::unique_ptr<PreparedMesh> MeshDistance::prepare(io::TriangleMesh mesh, const MeshInput& input,
                                                    const char* key) const {
  try {
    return std::make_unique<PreparedMesh>(std::move(mesh), frame_);
  } catch (const io::MeshReadError& e) {
    throw config::ConfigError(std::string("meshdist.") + key + ".file: " + input.file + ": " +
                              e.what());
  }
}

void MeshDistance::setup() {
  const auto& md = md_;
  {
    auto t = timers_.scope("read");
    io::TriangleMesh a = read_input(md.a, "a"), b = read_input(md.b, "b");
    frame_ = analysis_frame(a, b);
    a_ = prepare(std::move(a), md.a, "a");
    b_ = prepare(std::move(b), md.b, "b");
  }
  for (const auto* m : {a_.get(), b_.get()})
    Log::info("mesh %s: %zu vertices, %zu triangles (%zu zero-area skipped), area %.6g",
              m == a_.get() ? "a" : "b", m->host.vertices.size(), m->host.triangles.size(),
              m->host.degenerate_skipped, m->world_area());
  check_sample_memory();
}

// The frame of both meshes' common box. What it cannot hold is refused: an extent that is not
// finite, and extents whose distances the per-vertex error outputs (float) cannot hold: beyond
// 1e38 (a distance of up to sqrt(3) times the extent overflows float) or below 1e-30 (errors a
// float ulp of the extent would be float denormals, without their precision).
Frame MeshDistance::analysis_frame(const io::TriangleMesh& a, const io::TriangleMesh& b) const {
  constexpr double kMaxSpan = 1e38, kMinSpan = 1e-30;
  const Bounds box = bounds_of(a).merged(bounds_of(b));
  const double span = box.span();
  if (!(span >= kMinSpan && span <= kMaxSpan)) {
    char text[512];
    std::snprintf(text, sizeof text,
                  ": key 'meshdist': the two meshes together span %.3g units (a: %s, b: %s); "
                  "apron measures meshes spanning 1e-30 to 1e38 units (distances are written as "
                  "float): rescale the meshes (or a stray vertex lies far away)",
                  span, md_.a.file.c_str(), md_.b.file.c_str());
    throw config::ConfigError(config_.file + text);
  }
  return frame_of(box);
}

// The samples this rank will hold (position, distance, triangle, sort scratch: ~40 B each) must
// fit, on every rank, before anything is allocated: a count too large is bad input, named.
void MeshDistance::check_sample_memory() const {
  constexpr double kBytesPerSample = 40;
  double most = 0;
  for (const PreparedMesh* m : {a_.get(), b_.get()}) {
    const double area = md_.area_density > 0 ? md_.area_density * m->world_area()
                                             : static_cast<double>(md_.area_samples);
    const double vertices = md_.sample_vertices ? static_cast<double>(m->host.vertices.size()) : 0;
    most = std::max(most, (area + vertices) / ranks_.size);
  }
  const double free_bytes = global_min(ranks_.comm, static_cast<double>(device_.free_bytes));
  if (most * kBytesPerSample > 0.9 * free_bytes) {
    char text[256];
    std::snprintf(text, sizeof text,
                  ": key 'meshdist.sampling.%s': %.3g samples per rank need about %.3g GB, but "
                  "%.3g GB are available per rank; lower it or run on more ranks",
                  md_.area_density > 0 ? "density" : "count", most, most * kBytesPerSample / 1e9,
                  free_bytes / 1e9);
    throw config::ConfigError(config_.file + text);
  }
  // Where memory holds them (a large host), the grid search still orders a rank's samples with
  // 32-bit indices.
  if (most > static_cast<double>(std::numeric_limits<std::uint32_t>::max())) {
    char text[256];
    std::snprintf(text, sizeof text,
                  ": key 'meshdist.sampling.%s': %.3g samples per rank, more than the 2^32 - 1 "
                  "that one rank can search; lower it or run on more ranks",
                  md_.area_density > 0 ? "density" : "count", most);
    throw config::ConfigError(config_.file + text);
  }
}

std::uint64_t MeshDistance::area_sample_count(const PreparedMesh& mesh) const {
  const auto& md = md_;
  if (md.area_density > 0)
    return static_cast<std::uint64_t>(std::llround(md.area_density * mesh.world_area()));
  return static_cast<std::uint64_t>(md.area_samples);
}

// Samples [first, last) of the source's on this rank.
std::pair<std::uint64_t, std::uint64_t> MeshDistance::local_samples(
    const PreparedMesh& source) const {
  const std::uint64_t vertices = md_.sample_vertices ? source.host.vertices.size() : 0;
  return rank_range(vertices + area_sample_count(source), ranks_.rank, ranks_.size);
}

// Both meshes and the per-sample arrays in one arena: its size is known from the meshes and the
// sampling, so the first analysis allocates it once and later ones reuse it.
void MeshDistance::upload() {
  std::size_t n = 0;  // this rank's samples in the larger direction measured
  auto room_for = [&](const PreparedMesh& source) {
    const auto [first, last] = local_samples(source);
    n = std::max(n, static_cast<std::size_t>(last - first));
  };
  if (md_.directions != "b_to_a") room_for(*a_);
  if (md_.directions != "a_to_b") room_for(*b_);
  arena_.reset(a_->device_bytes() + b_->device_bytes() + DeviceArena::bytes_for<Vec4>(n) +
               DeviceArena::bytes_for<float>(n) + DeviceArena::bytes_for<int>(n));
  a_->upload(arena_);
  b_->upload(arena_);
  samples_ = arena_.take<Vec4>(n);
  distance_ = arena_.take<float>(n);
  triangle_ = arena_.take<int>(n);
  if (md_.search == "grid") order_.reserve(n);
}

DirectionResult MeshDistance::measure(const char* name, PreparedMesh& source,
                                      PreparedMesh& target) {
  const auto& md = md_;
  const double start = wall_seconds();
  DirectionResult r;
  r.name = name;
  r.vertex_samples = md.sample_vertices ? source.host.vertices.size() : 0;
  r.area_samples = area_sample_count(source);
  r.samples = r.vertex_samples + r.area_samples;
  const auto [first, last] = local_samples(source);
  const auto n = static_cast<std::size_t>(last - first);
  const DeviceSpan<Vec4> samples = samples_.first(n);
  {
    auto t = timers_.scope("sample");
    make_samples(md.sample_vertices ? source.vertices : DeviceSpan<const Vec4>{}, source.soup,
                 source.device_cumulative_area, md.seed, first, samples);
  }
  if (md.search == "grid") {
    surface::TriangleGrid& grid = grids_[&target == a_.get() ? 0 : 1];
    {
      auto t = timers_.scope("grid");
      r.grid = target.grid_geometry(md.cell_factor);
      grid.build(target.soup, r.grid);
      r.grid_pairs = grid.pairs();
    }
    auto t = timers_.scope("search");
    grid.nearest(target.soup, samples, distance_.first(n), triangle_.first(n), order_);
  } else {
    auto t = timers_.scope("search");
    surface::nearest_brute_force(target.soup, samples, distance_.first(n), triangle_.first(n));
  }
  auto t = timers_.scope("reduce");
  const DistanceStats local = reduce_distances(distance_.first(n), first);
  double sums[2] = {local.sum, local.sum_squares};
  global_sum(ranks_.comm, sums);
  // A NaN distance reaches the global sum on every rank alike (the maximum would hide it).
  if (!std::isfinite(sums[1]))
    throw std::runtime_error("mesh distance " + r.name +
                             ": a distance is not finite; the meshes' float arithmetic failed "
                             "(rescale them)");
  const double scale = frame_.scale;
  r.sum = sums[0] * scale;
  r.sum_squares = sums[1] * scale * scale;
  // The maximum, then the lowest sample index attaining it: the same bits on any rank count.
  const ArgMax max = global_argmax(ranks_.comm, local.max, static_cast<std::int64_t>(local.argmax));
  r.local_max = static_cast<float>(max.value);  // a float's value, exact in double
  r.max = static_cast<double>(r.local_max) * scale;
  r.argmax = static_cast<std::uint64_t>(max.index);
  r.seconds = wall_seconds() - start;
  return r;
}

// Outside the timed analysis: histogram, the maximum's closest point, the per-vertex errors.
void MeshDistance::finish_result(DirectionResult& r, const PreparedMesh& source,
                                 const PreparedMesh& target) {
  const auto [first, last] = local_samples(source);
  const std::vector<float> local = copy_to_host(distance_.first(last - first));

  // Bins from the frame's distances: the same counts for a pair at any scale.
  const int bins = md_.histogram_bins;
  const double local_width = static_cast<double>(r.local_max) / bins;
  r.bin_width = r.max / bins;
  r.histogram.assign(bins, 0);
  for (float d : local) {
    if (!(d >= 0)) continue;  // not reached: measure() refuses non-finite distances
    const double bin = local_width > 0 ? d / local_width : 0;
    ++r.histogram[static_cast<std::size_t>(std::min<double>(bin, bins - 1))];
  }
  MPI_Allreduce(MPI_IN_PLACE, r.histogram.data(), bins, MPI_LONG_LONG, MPI_SUM, ranks_.comm);

  int owner = 0;
  for (int k = 0; k < ranks_.size; ++k) {
    const auto [lo, hi] = rank_range(r.samples, k, ranks_.size);
    if (r.argmax >= lo && r.argmax < hi) owner = k;
  }
  double where[7] = {0, 0, 0, 0, 0, 0, -1};
  if (ranks_.rank == owner && r.samples > 0) {
    const std::size_t i = r.argmax - first;
    const Vec4 p = read_element(samples_, i);
    const int tri = read_element(triangle_, i);
    const auto& t = target.host.triangles[tri];
    auto corner = [&](int k) { return target.local_vertex(t[k]); };  // the device's corners
    const auto q =
        frame_.world(surface::closest_point_on_triangle(xyz(p), corner(0), corner(1), corner(2)));
    const auto s = frame_.world(xyz(p));
    const double values[7] = {s[0], s[1], s[2], q[0], q[1], q[2], static_cast<double>(tri)};
    std::copy(values, values + 7, where);
  }
  MPI_Bcast(where, 7, MPI_DOUBLE, owner, ranks_.comm);
  r.max_sample = {where[0], where[1], where[2]};
  r.closest_point = {where[3], where[4], where[5]};
  r.closest_triangle = static_cast<long long>(where[6]);

  if (r.vertex_samples == 0) return;  // vertex samples come first: [0, vertex_samples)
  const auto vertex_end = std::min(last, r.vertex_samples);
  const int mine = static_cast<int>(first < vertex_end ? vertex_end - first : 0);
  std::vector<int> counts(ranks_.size), offsets(ranks_.size);
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, ranks_.comm);
  for (int k = 1; k < ranks_.size; ++k) offsets[k] = offsets[k - 1] + counts[k - 1];
  if (ranks_.rank == 0) r.vertex_error.resize(source.host.vertices.size());
  MPI_Gatherv(local.data(), mine, MPI_FLOAT, r.vertex_error.data(), counts.data(), offsets.data(),
              MPI_FLOAT, 0, ranks_.comm);
  for (float& e : r.vertex_error) e = static_cast<float>(e * frame_.scale);  // world units
}

void MeshDistance::advance() {
  const auto& md = md_;
  const bool a_to_b = md.directions != "b_to_a", b_to_a = md.directions != "a_to_b";
  for (int repetition = 0; repetition < md.repeat; ++repetition) {
    const bool last = repetition + 1 == md.repeat;
    MPI_Barrier(ranks_.comm);
    const double start = wall_seconds();
    {
      auto t = timers_.scope("upload");
      upload();
    }
    double seconds = wall_seconds() - start;
    results_.clear();
    auto run = [&](const char* name, PreparedMesh& source, PreparedMesh& target) {
      results_.push_back(measure(name, source, target));
      seconds += results_.back().seconds;
      if (last) {
        auto t = timers_.scope("results");
        finish_result(results_.back(), source, target);
      }
    };
    if (a_to_b) run("a_to_b", *a_, *b_);
    if (b_to_a) run("b_to_a", *b_, *a_);
    seconds = global_max(ranks_.comm, seconds);
    analysis_seconds_.push_back(seconds);
    Log::info("analysis %d of %d: %.3f ms (excluding file parsing)", repetition + 1, md.repeat,
              1e3 * seconds);
  }
  clock_ = {1, 1, 0};
}

std::size_t MeshDistance::global_items() const {
  std::size_t n = 0;
  for (const auto& r : results_) n += r.samples;
  return n;
}

void MeshDistance::print_table() const {
  Log::info("\nmesh distance            %-14s %-14s %-14s", "a -> b", "b -> a", "symmetric");
  auto row = [&](const char* label, auto value) {
    double v[2] = {NAN, NAN};
    for (const auto& r : results_) v[r.name == "a_to_b" ? 0 : 1] = value(r);
    const double sym = std::isnan(v[0]) ? v[1] : (std::isnan(v[1]) ? v[0] : std::max(v[0], v[1]));
    Log::info("%-24s %-14.7g %-14.7g %-14.7g", label, v[0], v[1], sym);
  };
  row("samples", [](const DirectionResult& r) { return double(r.samples); });
  row("Hausdorff (max)", [](const DirectionResult& r) { return r.max; });
  row("mean", [](const DirectionResult& r) { return r.mean(); });
  row("RMS", [](const DirectionResult& r) { return std::sqrt(r.mean_squared()); });
  row("mean squared (d_sw)", [](const DirectionResult& r) { return r.mean_squared(); });
  Log::info(
      "(symmetric: the larger direction; for the mean squared error that is the paper's d_hw)");
  for (const auto& r : results_)
    Log::info(
        "%s: maximum at sample %llu (%.7g, %.7g, %.7g), closest point (%.7g, %.7g, %.7g) on "
        "triangle %lld",
        r.name.c_str(), static_cast<unsigned long long>(r.argmax), r.max_sample[0], r.max_sample[1],
        r.max_sample[2], r.closest_point[0], r.closest_point[1], r.closest_point[2],
        r.closest_triangle);
}

void MeshDistance::write_vertex_errors() const {
  if (ranks_.rank != 0) return;
  const std::filesystem::path dir(config_.output.dir);
  for (const auto& r : results_) {
    if (r.vertex_error.empty()) continue;
    const bool from_a = r.name == "a_to_b";
    const io::TriangleMesh& mesh = (from_a ? a_ : b_)->host;
    const std::string stem = from_a ? "a_error" : "b_error";
    io::write_ply_with_scalar(dir / (stem + ".ply"), mesh, "error", r.vertex_error);
    io::write_hdf5_xdmf_with_scalar(dir / stem, mesh, "error", r.vertex_error);
  }
}

void MeshDistance::write_outputs(bool final) {
  if (!final) return;
  print_table();
  if (!md_.per_vertex_output) return;
  auto t = timers_.scope("output");
  write_vertex_errors();
}

void MeshDistance::report(Json& j) const {
  const auto& md = md_;
  j.begin_object("meshdist");
  for (const auto* m : {a_.get(), b_.get()}) {
    const bool is_a = m == a_.get();
    j.begin_object(is_a ? "mesh_a" : "mesh_b");
    j.value("file", (is_a ? md.a : md.b).file);
    j.value("subdivide", (is_a ? md.a : md.b).subdivide);
    j.value("vertices", m->host.vertices.size());
    j.value("triangles", m->host.triangles.size());
    j.value("faces_read", m->host.polygons);
    j.value("degenerate_skipped", m->host.degenerate_skipped);
    j.value("area", m->world_area());
    j.end_object();
  }
  // The analysis frame: coordinates (x - centre) / scale, in float (the distances' precision
  // is float's relative to the scale).
  j.begin_object("frame");
  j.values("centre", frame_.centre);
  j.value("scale", frame_.scale);
  j.end_object();
  j.value("search", md.search);
  j.value("seed", static_cast<long long>(md.seed));
  double hausdorff = 0, d_hw = 0, mean = 0, rms = 0;
  j.begin_object("directions");
  for (const auto& r : results_) {
    j.begin_object(r.name);
    j.value("samples", static_cast<long long>(r.samples));
    j.value("vertex_samples", static_cast<long long>(r.vertex_samples));
    j.value("area_samples", static_cast<long long>(r.area_samples));
    j.value("hausdorff", r.max);
    j.value("mean", r.mean());
    j.value("rms", std::sqrt(r.mean_squared()));
    j.value("mean_squared", r.mean_squared());
    j.value("sum", r.sum);
    j.value("sum_squares", r.sum_squares);
    j.value("max_sample_index", static_cast<long long>(r.argmax));
    j.values("max_sample", r.max_sample);
    j.values("closest_point", r.closest_point);
    j.value("closest_triangle", r.closest_triangle);
    j.begin_object("histogram");
    j.value("bin_width", r.bin_width);
    j.values("counts", r.histogram);
    j.end_object();
    if (md.search == "grid") {
      j.begin_object("grid");
      j.values("dims", r.grid.dims);
      j.value("cell_size", static_cast<double>(r.grid.cell) * frame_.scale);
      j.value("pairs", r.grid_pairs);
      j.end_object();
    }
    j.value("seconds", r.seconds);
    j.value("samples_per_second", r.samples / std::max(r.seconds, 1e-12));
    j.end_object();
    hausdorff = std::max(hausdorff, r.max);
    d_hw = std::max(d_hw, r.mean_squared());
    mean = std::max(mean, r.mean());
    rms = std::max(rms, std::sqrt(r.mean_squared()));
  }
  j.end_object();
  j.begin_object("symmetric");
  j.value("hausdorff", hausdorff);
  j.value("d_hw", d_hw);
  j.value("mean", mean);
  j.value("rms", rms);
  j.end_object();
  // per repetition, max over ranks, file parsing excluded
  j.values("analysis_seconds", analysis_seconds_);
  // What a one-shot user sees (the first analysis of a process: first allocations, first uses of
  // the device) apart from a warmed-up analysis (the median of the others; meshdist.repeat >= 2).
  if (!analysis_seconds_.empty()) j.value("cold_analysis_seconds", analysis_seconds_.front());
  if (analysis_seconds_.size() > 1) {
    std::vector<double> warm(analysis_seconds_.begin() + 1, analysis_seconds_.end());
    std::nth_element(warm.begin(), warm.begin() + warm.size() / 2, warm.end());
    j.value("warm_analysis_seconds", warm[warm.size() / 2]);
  }
  j.end_object();
}

WorkloadSpec meshdist_spec() {
  // Samples grow in proportion to the area sample count.
  return workload_spec_of<MeshDistance>(
      "meshdist", "mesh-to-mesh distance: Hausdorff and overall error (one-shot analysis)",
      meshdist_schema(), {"meshdist.sampling.count", 1.0});
}

}  // namespace apron::meshdist
