// Host arrays as every writer (series, checkpoints, Catalyst) takes them, without HDF5: code
// that only describes its data (the workload interface) does not include <hdf5.h>.
#pragma once

#include <cstddef>
#include <string>

namespace apron::io {

enum class Dtype { f32, f64, i32, u32, i64, u8 };

std::size_t dtype_size(Dtype type);
const char* dtype_name(Dtype type);

// One field of the local particles, in host memory: n_local * components values of `type`,
// interleaved per particle (x0 y0 z0 x1 ...).
struct HostField {
  std::string name;
  Dtype type;
  int components;
  const void* data;
};

}  // namespace apron::io
