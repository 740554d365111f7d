#include "io/mesh_output.hpp"

#include <hdf5.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

void check_sizes(const TriangleMesh& mesh, std::span<const float> values) {
  if (values.size() != mesh.vertices.size())
    throw std::invalid_argument("mesh output: " + std::to_string(values.size()) + " values for " +
                                std::to_string(mesh.vertices.size()) + " vertices");
}

template <class T>
void put_le(std::string& out, T value) {
  static_assert(std::endian::native == std::endian::little, "PLY writer assumes little endian");
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec)
    throw std::runtime_error(to.string() + ": cannot rename " + from.string() + ": " +
                             ec.message());
}

// Closes an HDF5 identifier on every way out of a scope.
struct H5Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~H5Handle() {
    if (id >= 0) close(id);
  }
};

hid_t checked(hid_t id, const std::string& what, const fs::path& file) {
  if (id < 0) throw std::runtime_error(file.string() + ": HDF5 failed to " + what);
  return id;
}

void write_dataset(hid_t file_id, const char* name, hid_t file_type, hid_t memory_type,
                   hsize_t rows, hsize_t columns, const void* data, const fs::path& file) {
  const hsize_t dims[2] = {rows, columns};
  H5Handle space{
      checked(H5Screate_simple(columns > 1 ? 2 : 1, dims, nullptr), "create a dataspace", file),
      H5Sclose};
  H5Handle set{
      checked(H5Dcreate2(file_id, name, file_type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              std::string("create dataset ") + name, file),
      H5Dclose};
  if (H5Dwrite(set.id, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw std::runtime_error(file.string() + ": HDF5 failed to write " + name);
}

std::string xdmf_text(const std::string& h5_name, const TriangleMesh& mesh,
                      const std::string& scalar_name) {
  const auto nv = mesh.vertices.size(), nt = mesh.triangles.size();
  std::ostringstream x;
  x << "<?xml version=\"1.0\" ?>\n<Xdmf Version=\"3.0\">\n <Domain>\n  <Grid Name=\"mesh\">\n"
    << "   <Topology TopologyType=\"Triangle\" NumberOfElements=\"" << nt << "\">\n"
    << "    <DataItem Dimensions=\"" << nt << " 3\" NumberType=\"UInt\" Precision=\"4\" "
    << "Format=\"HDF\">" << h5_name << ":/triangles</DataItem>\n   </Topology>\n"
    << "   <Geometry GeometryType=\"XYZ\">\n    <DataItem Dimensions=\"" << nv
    << " 3\" NumberType=\"Float\" Precision=\"8\" Format=\"HDF\">" << h5_name
    << ":/vertices</DataItem>\n   </Geometry>\n"
    << "   <Attribute Name=\"" << scalar_name << "\" AttributeType=\"Scalar\" Center=\"Node\">\n"
    << "    <DataItem Dimensions=\"" << nv << "\" NumberType=\"Float\" Precision=\"4\" "
    << "Format=\"HDF\">" << h5_name << ":/" << scalar_name << "</DataItem>\n   </Attribute>\n"
    << "  </Grid>\n </Domain>\n</Xdmf>\n";
  return x.str();
}

}  // namespace

void write_ply_with_scalar(const fs::path& file, const TriangleMesh& mesh,
                           const std::string& scalar_name, std::span<const float> values) {
  check_sizes(mesh, values);
  std::string out = "ply\nformat binary_little_endian 1.0\ncomment written by apron\n";
  out += "element vertex " + std::to_string(mesh.vertices.size()) + "\n";
  out += "property float x\nproperty float y\nproperty float z\n";
  out += "property float " + scalar_name + "\n";
  out += "element face " + std::to_string(mesh.triangles.size()) + "\n";
  out += "property list uchar int vertex_indices\nend_header\n";
  out.reserve(out.size() + mesh.vertices.size() * 16 + mesh.triangles.size() * 13);
  for (std::size_t i = 0; i < mesh.vertices.size(); ++i) {
    for (double c : mesh.vertices[i]) put_le(out, static_cast<float>(c));
    put_le(out, values[i]);
  }
  for (const auto& t : mesh.triangles) {
    put_le(out, static_cast<std::uint8_t>(3));
    for (auto v : t) put_le(out, static_cast<std::int32_t>(v));
  }
  write_file_atomically(file, out);
}

void write_hdf5_xdmf_with_scalar(const fs::path& stem, const TriangleMesh& mesh,
                                 const std::string& scalar_name, std::span<const float> values) {
  check_sizes(mesh, values);
  const fs::path h5 = stem.string() + ".h5";
  const fs::path tmp = temporary_name(h5);
  {
    H5Handle file{checked(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                          "create the file", tmp),
                  H5Fclose};
    write_dataset(file.id, "vertices", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, mesh.vertices.size(), 3,
                  mesh.vertices.data(), tmp);
    write_dataset(file.id, "triangles", H5T_STD_U32LE, H5T_NATIVE_UINT32, mesh.triangles.size(), 3,
                  mesh.triangles.data(), tmp);
    write_dataset(file.id, scalar_name.c_str(), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.size(), 1,
                  values.data(), tmp);
  }
  rename_into_place(tmp, h5);
  write_file_atomically(stem.string() + ".xmf",
                        xdmf_text(h5.filename().string(), mesh, scalar_name));
}

}  // namespace apron::io
