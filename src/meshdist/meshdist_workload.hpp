// The mesh-to-mesh distance analysis (issue 5; Zhang, Tang, Wu 2011): the one-sided Hausdorff
// distances of two meshes, the symmetric Hausdorff distance and the paper's overall error
// (mean squared distance), from samples split over the ranks; meshes are replicated per rank.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/case_config.hpp"
#include "meshdist/mesh_prep.hpp"
#include "meshdist/meshdist_config.hpp"
#include "runtime/runtime.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

namespace apron::meshdist {

// One direction, source -> target: distances from the source's samples to the target surface.
struct DirectionResult {
  std::string name;  // "a_to_b" or "b_to_a"
  std::uint64_t samples = 0, vertex_samples = 0, area_samples = 0;
  // World units (the meshes'): the analysis runs in the frame's and scales back in float64.
  double sum = 0, sum_squares = 0;  // float64 over all samples and ranks
  double max = 0;                   // the one-sided Hausdorff distance
  float local_max = 0;              // the same in the frame's units (a float: histogram bins)
  std::uint64_t argmax = 0;         // the lowest global sample index attaining it
  std::array<double, 3> max_sample{}, closest_point{};
  long long closest_triangle = -1;
  double bin_width = 0;
  std::vector<long long> histogram;
  std::vector<float> vertex_error;  // rank 0: error at every source vertex (vertex sampling)
  surface::GridGeometry grid;       // in the frame's units
  std::size_t grid_pairs = 0;
  double seconds = 0;  // grid + sampling + search + reduction (the last repetition)

  double mean() const { return samples ? sum / samples : 0; }
  double mean_squared() const { return samples ? sum_squares / samples : 0; }  // d_sw
};

class MeshDistance final : public Workload {
 public:
  explicit MeshDistance(const WorkloadContext& context);

  void setup() override;                      // reads the meshes
  void advance() override;                    // the whole analysis (config.meshdist.repeat times)
  std::size_t global_items() const override;  // samples over both directions
  void write_outputs(bool final) override;
  void report(Json& json) const override;

  const std::vector<DirectionResult>& results() const { return results_; }
  const std::vector<double>& analysis_seconds() const { return analysis_seconds_; }

 private:
  io::TriangleMesh read_input(const MeshInput& input, const char* key) const;
  std::unique_ptr<PreparedMesh> prepare(io::TriangleMesh mesh, const MeshInput& input,
                                        const char* key) const;
  Frame analysis_frame(const io::TriangleMesh& a, const io::TriangleMesh& b) const;
  DirectionResult measure(const char* name, PreparedMesh& source, PreparedMesh& target);
  void finish_result(DirectionResult& r, const PreparedMesh& source, const PreparedMesh& target);
  void check_sample_memory() const;
  std::uint64_t area_sample_count(const PreparedMesh& mesh) const;
  std::pair<std::uint64_t, std::uint64_t> local_samples(const PreparedMesh& source) const;
  void upload();
  void print_table() const;
  void write_vertex_errors() const;

  const MeshdistConfig& md_;  // config_'s own meshdist section
  RankInfo ranks_;
  DeviceInfo device_;
  PhaseTimers& timers_;
  Frame frame_;  // both meshes' (the analysis frame)
  std::unique_ptr<PreparedMesh> a_, b_;
  std::vector<DirectionResult> results_;
  std::vector<double> analysis_seconds_;  // per repetition, everything after parsing
  // The analysis' device arrays, sized from the meshes in one pass: both meshes' arrays and
  // room for the most samples this rank measures in one direction (one allocation, in the first
  // analysis; none after).
  DeviceArena arena_;
  // This rank's samples of the direction being measured (kept to find the argmax's closest point).
  DeviceSpan<Vec4> samples_;
  DeviceSpan<float> distance_;
  DeviceSpan<int> triangle_;
  // The grid over each target mesh (a, b): each keeps its size from one analysis to the next;
  // the search order of the samples, sized with the arena for both directions.
  std::array<surface::TriangleGrid, 2> grids_;
  surface::SampleOrder order_;
};

// The workload's entry in the registry (src/workloads.cpp).
WorkloadSpec meshdist_spec();

}  // namespace apron::meshdist
