// The `meshdist:` section of a case file (the workload's own schema): two meshes, how to sample
// them, which directions to measure and what to write (ARCHITECTURE.md; issue 5).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/workload_schema.hpp"

namespace apron::meshdist {

struct MeshInput {
  std::string file;   // as resolved: relative to the working directory, else to the case file
  int subdivide = 1;  // split every edge into this many parts (k^2 triangles per triangle)
};

struct MeshdistConfig : config::WorkloadSettings {
  MeshInput a, b;
  bool sample_vertices = true;      // every vertex is a sample (gives the per-vertex error)
  std::int64_t area_samples = 0;    // area-uniform samples per mesh, like Metro's -n
  double area_density = 0;          // or samples per unit area (Metro's -A); 0: use the count
  std::uint64_t seed = 1;           // of the area sampling
  std::string directions = "both";  // both | a_to_b | b_to_a
  std::string search = "grid";      // grid | brute_force (the reference)
  double cell_factor = 2.0;         // grid cell edge / sqrt(mean triangle area)
  int histogram_bins = 32;
  bool per_vertex_output = true;  // PLY + HDF5/XDMF with the error at every vertex
  int repeat = 1;                 // analyses run (benchmarks: the first includes warm-up)
};

// Reads the `meshdist` section of a `workload: meshdist` case.
std::shared_ptr<const MeshdistConfig> read_meshdist_config(config::MapReader& root);
// The meshdist schema: no shared sections beyond output.dir and output.progress_every.
config::WorkloadSchema meshdist_schema();

}  // namespace apron::meshdist
