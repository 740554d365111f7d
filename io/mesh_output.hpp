// Output of a triangle mesh with one scalar per vertex, for ParaView to colour the surface by it:
// a PLY file with an extra vertex property, and an HDF5 file with an XDMF sidecar. Written by one
// process (meshes are replicated), each file under a .tmp name and renamed when complete.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "io/mesh_reader.hpp"

namespace apron::io {

// Binary little-endian PLY: vertex x y z (float) and `scalar_name` (float), face vertex_indices.
void write_ply_with_scalar(const std::filesystem::path& file, const TriangleMesh& mesh,
                           const std::string& scalar_name, std::span<const float> values);

// `stem`.h5 (datasets /vertices, /triangles, /<scalar_name>) and `stem`.xmf.
void write_hdf5_xdmf_with_scalar(const std::filesystem::path& stem, const TriangleMesh& mesh,
                                 const std::string& scalar_name, std::span<const float> values);

}  // namespace apron::io
