#include "io/particle_output.hpp"

#include <hdf5.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace {

// Closes an HDF5 handle when it goes out of scope, so error paths leak nothing.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    if (id_ < 0) throw std::runtime_error("HDF5: " + what + " failed");
  }
  ~Handle() { close_(id_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

hid_t native_type(Dtype t) {
  switch (t) {
    case Dtype::f32: return H5T_NATIVE_FLOAT;
    case Dtype::f64: return H5T_NATIVE_DOUBLE;
    case Dtype::i32: return H5T_NATIVE_INT32;
    case Dtype::u32: return H5T_NATIVE_UINT32;
    case Dtype::i64: return H5T_NATIVE_INT64;
    case Dtype::u8: return H5T_NATIVE_UINT8;
  }
  return H5T_NATIVE_FLOAT;
}

const char* xdmf_type(Dtype t, int& precision) {
  switch (t) {
    case Dtype::f32: precision = 4; return "Float";
    case Dtype::f64: precision = 8; return "Float";
    case Dtype::i32: precision = 4; return "Int";
    case Dtype::u32: precision = 4; return "UInt";
    case Dtype::i64: precision = 8; return "Int";
    case Dtype::u8: precision = 1; return "UChar";
  }
  return "Float";
}

void write_attribute(hid_t file, const char* name, hid_t type, const void* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle attr(H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              std::string("creating attribute ") + name);
  if (H5Awrite(attr, type, value) < 0) throw std::runtime_error("HDF5: writing attribute");
}

// One field: a (N) or (N, components) dataset; this rank writes rows [offset, offset + n).
void write_field(hid_t file, hid_t transfer, const HostField& f, unsigned long long global,
                 unsigned long long offset, unsigned long long n) {
  const int rank = f.components == 1 ? 1 : 2;
  const hsize_t dims[2] = {global, static_cast<hsize_t>(f.components)};
  Handle file_space(H5Screate_simple(rank, dims, nullptr), H5Sclose, "H5Screate_simple");
  Handle dataset(H5Dcreate2(file, f.name.c_str(), native_type(f.type), file_space, H5P_DEFAULT,
                            H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose, "creating dataset " + f.name);
  const hsize_t start[2] = {offset, 0};
  const hsize_t count[2] = {n, static_cast<hsize_t>(f.components)};
  Handle memory_space(H5Screate_simple(rank, count, nullptr), H5Sclose, "H5Screate_simple");
  if (n == 0) {
    H5Sselect_none(file_space);
    H5Sselect_none(memory_space);
  } else {
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  }
  if (H5Dwrite(dataset, native_type(f.type), memory_space, file_space, transfer, f.data) < 0)
    throw std::runtime_error("HDF5: writing dataset " + f.name);
}

}  // namespace

ParticleSeriesWriter::ParticleSeriesWriter(MPI_Comm comm, std::filesystem::path dir,
                                           std::string basename)
    : comm_(comm),
      dir_(std::move(dir)),
      basename_(std::move(basename)),
      xmf_path_(dir_ / (basename_ + ".xmf")) {}

void ParticleSeriesWriter::write(long step, double time, std::size_t n_local,
                                 std::span<const HostField> fields) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  unsigned long long n = n_local, offset = 0, global = 0;
  MPI_Exscan(&n, &offset, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_);
  if (rank == 0) offset = 0;
  MPI_Allreduce(&n, &global, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_);

  char name[64];
  std::snprintf(name, sizeof name, "%s_%06ld.h5", basename_.c_str(), step);
  const auto final_path = dir_ / name;
  const auto tmp_path = temporary_name(final_path);
  {
    Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
    H5Pset_fapl_mpio(access, comm_, MPI_INFO_NULL);
    Handle file(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), H5Fclose,
                "creating " + tmp_path.string());
    Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate");
    H5Pset_dxpl_mpio(transfer, H5FD_MPIO_COLLECTIVE);
    for (const auto& f : fields) write_field(file, transfer, f, global, offset, n);
    const long long step64 = step;
    write_attribute(file, "step", H5T_NATIVE_INT64, &step64);
    write_attribute(file, "time", H5T_NATIVE_DOUBLE, &time);
    write_attribute(file, "ranks", H5T_NATIVE_INT, &size);
  }
  MPI_Barrier(comm_);
  Entry entry{step, time, name, global, {}};
  for (const auto& f : fields) entry.fields.push_back({f.name, {f.type, f.components}});
  entries_.push_back(entry);
  if (rank == 0) {
    std::filesystem::rename(tmp_path, final_path);
    write_file_atomically(xmf_path_, xdmf_text());
  }
  MPI_Barrier(comm_);
}

std::string ParticleSeriesWriter::xdmf_text() const {
  std::ostringstream x;
  x << "<?xml version=\"1.0\" ?>\n<Xdmf Version=\"3.0\">\n<Domain>\n"
    << "<Grid Name=\"" << basename_ << "\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
  for (const auto& e : entries_) {
    const auto n = e.global;
    x << "  <Grid Name=\"step " << e.step << "\" GridType=\"Uniform\">\n"
      << "    <Time Value=\"" << e.time << "\"/>\n"
      << "    <Topology TopologyType=\"Polyvertex\" NumberOfElements=\"" << n
      << "\" NodesPerElement=\"1\"/>\n";
    for (const auto& [field, info] : e.fields) {
      const auto [type, components] = info;
      int precision = 4;
      const char* number = xdmf_type(type, precision);
      std::ostringstream item;
      item << "<DataItem Format=\"HDF\" NumberType=\"" << number << "\" Precision=\"" << precision
           << "\" Dimensions=\"" << n;
      if (components > 1) item << ' ' << components;
      item << "\">" << e.file << ":/" << field << "</DataItem>";
      if (field == "position") {
        x << "    <Geometry GeometryType=\"XYZ\">" << item.str() << "</Geometry>\n";
      } else {
        x << "    <Attribute Name=\"" << field << "\" Center=\"Node\" AttributeType=\""
          << (components == 1 ? "Scalar" : "Vector") << "\">" << item.str() << "</Attribute>\n";
      }
    }
    x << "  </Grid>\n";
  }
  x << "</Grid>\n</Domain>\n</Xdmf>\n";
  return x.str();
}

}  // namespace apron::io
