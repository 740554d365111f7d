#include "io/hdf5_file.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <system_error>

#include <sys/statvfs.h>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace fs = std::filesystem;

std::size_t dtype_size(Dtype type) {
  switch (type) {
    case Dtype::f32:
    case Dtype::i32:
    case Dtype::u32:
      return 4;
    case Dtype::f64:
    case Dtype::i64:
      return 8;
    case Dtype::u8:
      return 1;
  }
  throw std::invalid_argument("unknown Dtype");
}

const char* dtype_name(Dtype type) {
  switch (type) {
    case Dtype::f32:
      return "float32";
    case Dtype::f64:
      return "float64";
    case Dtype::i32:
      return "int32";
    case Dtype::u32:
      return "uint32";
    case Dtype::i64:
      return "int64";
    case Dtype::u8:
      return "uint8";
  }
  throw std::invalid_argument("unknown Dtype");
}

int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

int size_of(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  return size;
}

void agree(MPI_Comm comm, const std::string& local_error) {
  const int mine = local_error.empty() ? INT_MAX : rank_of(comm);
  int first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return;
  std::string message = local_error;
  unsigned long length = message.size();
  MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG, first, comm);
  message.resize(length);
  MPI_Bcast(message.data(), static_cast<int>(length), MPI_CHAR, first, comm);
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(comm, MPI_COMM_WORLD, &same);
  throw AgreedError(message, same == MPI_IDENT || same == MPI_CONGRUENT);
}

void make_output_directory(const fs::path& dir) {
  if (dir.empty()) return;  // the current directory
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw std::runtime_error(dir.string() + ": cannot create the output directory: " +
                             (ec ? ec.message() : "a file of that name exists"));
  }
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) {
    throw std::runtime_error(to.string() + ": cannot rename " + from.string() +
                             " to it: " + ec.message());
  }
}

// ---- HDF5 ------------------------------------------------------------------------------------

QuietHdf5Errors::QuietHdf5Errors() {
  H5Eget_auto2(H5E_DEFAULT, &print_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietHdf5Errors::~QuietHdf5Errors() {
  H5Eset_auto2(H5E_DEFAULT, print_, data_);
}

namespace {

herr_t keep_description(unsigned, const H5E_error2_t* error, void* out) {
  if (error->desc != nullptr && *error->desc != '\0') *static_cast<std::string*>(out) = error->desc;
  return 0;
}

struct Hdf5Type {
  hid_t memory;  // what the caller's buffer holds
  hid_t file;    // fixed little-endian types, so files do not depend on the writing machine
};

Hdf5Type hdf5_type(Dtype type) {
  switch (type) {
    case Dtype::f32:
      return {H5T_NATIVE_FLOAT, H5T_IEEE_F32LE};
    case Dtype::f64:
      return {H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE};
    case Dtype::i32:
      return {H5T_NATIVE_INT32, H5T_STD_I32LE};
    case Dtype::u32:
      return {H5T_NATIVE_UINT32, H5T_STD_U32LE};
    case Dtype::i64:
      return {H5T_NATIVE_INT64, H5T_STD_I64LE};
    case Dtype::u8:
      return {H5T_NATIVE_UINT8, H5T_STD_U8LE};
  }
  throw std::invalid_argument("unknown Dtype");
}

// The Dtype a stored HDF5 type reads back as, if it is one apron writes.
std::optional<Dtype> dtype_of(hid_t stored) {
  const H5T_class_t cls = H5Tget_class(stored);
  const std::size_t size = H5Tget_size(stored);
  if (cls == H5T_FLOAT) return size == 4 ? std::optional(Dtype::f32) : std::optional(Dtype::f64);
  if (cls != H5T_INTEGER) return std::nullopt;
  const bool is_signed = H5Tget_sign(stored) == H5T_SGN_2;
  if (size == 1 && !is_signed) return Dtype::u8;
  if (size == 4) return is_signed ? Dtype::i32 : Dtype::u32;
  if (size == 8 && is_signed) return Dtype::i64;
  return std::nullopt;
}

// The dataspace of this rank's part: its rows of the global dataset (in_file) or its whole
// buffer. A rank without rows selects nothing but still joins collective calls.
hid_t rows_space(hsize_t rows, int components, hsize_t first, hsize_t count) {
  const int rank = components == 1 ? 1 : 2;
  const std::array<hsize_t, 2> dims{rows, static_cast<hsize_t>(components)}, start{first, 0},
      size{count, static_cast<hsize_t>(components)};
  const hid_t space = H5Screate_simple(rank, dims.data(), nullptr);
  if (space < 0) return space;
  const herr_t status = count == 0 ? H5Sselect_none(space)
                                   : H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(),
                                                         nullptr, size.data(), nullptr);
  if (status < 0) {
    H5Sclose(space);
    return -1;
  }
  return space;
}

}  // namespace

std::string hdf5_cause() {
  std::string cause;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_description, &cause);
  return cause.empty() ? "no HDF5 error message" : cause;
}

Slab slab_of(MPI_Comm comm, std::size_t n_local) {
  unsigned long long count = n_local, offset = 0, global = 0;
  MPI_Exscan(&count, &offset, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  if (rank_of(comm) == 0) offset = 0;  // MPI_Exscan leaves rank 0's result undefined
  MPI_Allreduce(&count, &global, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  return {offset, count, global};
}

std::runtime_error Hdf5File::failure(const std::string& what) const {
  return std::runtime_error(path_ + ": cannot " + what + " (HDF5: " + hdf5_cause() + ")");
}

void Hdf5File::check(herr_t status, const std::string& what) const {
  if (status < 0) throw failure(what);
}

Handle Hdf5File::own(hid_t id, Handle::Close closer, const std::string& what) const {
  if (id < 0) throw failure(what);
  return Handle(id, closer);
}

Hdf5File Hdf5File::create(MPI_Comm comm, const fs::path& path) {
  Hdf5File f(path.string());
  f.comm_ = comm;
  // Set up before the file exists, so nothing can fail on one rank after the collective create.
  f.transfer_ = f.own(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "create a transfer property list");
  f.check(H5Pset_dxpl_mpio(f.transfer_.get(), H5FD_MPIO_COLLECTIVE), "request collective writes");
  Handle access = f.own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create an access property list");
  f.check(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "select the MPI-IO driver");
  // Metadata then leaves in one collective write at close rather than many small ones.
  f.check(H5Pset_coll_metadata_write(access.get(), true), "request collective metadata writes");
  f.file_ = f.own(H5Fcreate(f.path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose,
                  "create the file");
  return f;
}

Hdf5File Hdf5File::open(MPI_Comm comm, const fs::path& path) {
  Hdf5File f(path.string());
  f.comm_ = comm;
  if (!fs::is_regular_file(path))
    throw std::runtime_error(f.path_ + ": no such file (or not a regular file)");
  if (H5Fis_hdf5(f.path_.c_str()) <= 0)
    throw std::runtime_error(f.path_ + ": not an HDF5 file (or its header is damaged)");
  f.transfer_ = f.own(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "create a transfer property list");
  Handle access = f.own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create an access property list");
  f.check(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "select the MPI-IO driver");
  f.file_ = f.own(H5Fopen(f.path_.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose,
                  "open the file (truncated or damaged?)");
  return f;
}

Hdf5File Hdf5File::open_serial(const fs::path& path) {
  Hdf5File f(path.string());
  if (!fs::is_regular_file(path))
    throw std::runtime_error(f.path_ + ": no such file (or not a regular file)");
  if (H5Fis_hdf5(f.path_.c_str()) <= 0)
    throw std::runtime_error(f.path_ + ": not an HDF5 file (or its header is damaged)");
  f.transfer_ = f.own(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "create a transfer property list");
  f.file_ = f.own(H5Fopen(f.path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                  "open the file (truncated or damaged?)");
  return f;
}

void Hdf5File::write_attribute(const std::string& name, const std::string& object, hid_t file_type,
                               hid_t memory_type, const void* value) {
  const std::string what = "write attribute '" + name + "'";
  Handle space = own(H5Screate(H5S_SCALAR), H5Sclose, what);
  Handle attribute = own(H5Acreate_by_name(file_.get(), object.c_str(), name.c_str(), file_type,
                                           space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         H5Aclose, what);
  check(H5Awrite(attribute.get(), memory_type, value), what);
}

void Hdf5File::attribute(const std::string& name, double value, const std::string& object) {
  write_attribute(name, object, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}
void Hdf5File::attribute(const std::string& name, std::int64_t value, const std::string& object) {
  write_attribute(name, object, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}
void Hdf5File::attribute(const std::string& name, std::uint64_t value, const std::string& object) {
  write_attribute(name, object, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}
void Hdf5File::attribute(const std::string& name, const std::string& value,
                         const std::string& object) {
  const std::string what = "write attribute '" + name + "'";
  Handle type = own(H5Tcopy(H5T_C_S1), H5Tclose, what);
  check(H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1)), what);
  const std::string stored = value.empty() ? std::string(1, '\0') : value;
  write_attribute(name, object, type.get(), type.get(), stored.data());
}

void Hdf5File::group(const std::string& name) {
  own(H5Gcreate2(file_.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
      "create group '" + name + "'");
}

Handle Hdf5File::create_dataset(const std::string& name, Dtype type, int components, hsize_t rows,
                                H5D_alloc_time_t allocation) {
  const std::string what = "create dataset '" + name + "'";
  Handle space = own(rows_space(rows, components, 0, rows), H5Sclose, what);
  Handle creation = own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, what);
  // Every element gets written, so skip the fill-value pass (a second full write in parallel).
  check(H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER), what);
  check(H5Pset_alloc_time(creation.get(), allocation), what);
  return own(H5Dcreate2(file_.get(), name.c_str(), hdf5_type(type).file, space.get(), H5P_DEFAULT,
                        creation.get(), H5P_DEFAULT),
             H5Dclose, what);
}

void Hdf5File::dataset(const HostField& field, const Slab& slab) {
  const Hdf5Type type = hdf5_type(field.type);
  const std::string what = "write dataset '" + field.name + "'";
  Handle set =
      create_dataset(field.name, field.type, field.components, slab.global, H5D_ALLOC_TIME_DEFAULT);
  // An empty dataset has no storage to write to (HDF5 fails on it); all ranks skip alike.
  if (slab.global == 0) return;
  Handle file_space =
      own(rows_space(slab.global, field.components, slab.offset, slab.count), H5Sclose, what);
  Handle memory_space =
      own(rows_space(std::max<hsize_t>(slab.count, 1), field.components, 0, slab.count), H5Sclose,
          what);
  // HDF5 rejects a null buffer even when nothing is selected.
  static const unsigned char nothing = 0;
  const void* data = field.data != nullptr ? field.data : &nothing;
  const herr_t written =
      H5Dwrite(set.get(), type.memory, memory_space.get(), file_space.get(), transfer_.get(), data);
  // A collective write can fail on some ranks only (the disk fills under their part): the others
  // would go on to the next collective call and wait there for ever. All learn it here together.
  if (comm_ == MPI_COMM_NULL) return check(written, what);
  agree(comm_, written < 0 ? failure(what).what() : std::string());
}

std::uint64_t Hdf5File::reserve(const std::string& name, Dtype type, int components, hsize_t rows) {
  static_assert(std::endian::native == std::endian::little,
                "reserve()d datasets are written as raw little-endian bytes");
  Handle set = create_dataset(name, type, components, rows, H5D_ALLOC_TIME_EARLY);
  if (rows == 0) return 0;  // no storage, nothing will be written
  const haddr_t offset = H5Dget_offset(set.get());
  if (offset == HADDR_UNDEF)
    throw failure("reserve dataset '" + name + "': its storage has no single file offset");
  return offset;
}

Handle Hdf5File::open_attribute(const std::string& name, const std::string& object) const {
  return own(H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose, "read attribute '" + name + "' of '" + object + "'");
}

bool Hdf5File::has_attribute(const std::string& name, const std::string& object) const {
  return H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

double Hdf5File::real(const std::string& name, const std::string& object) const {
  double value = 0;
  check(H5Aread(open_attribute(name, object).get(), H5T_NATIVE_DOUBLE, &value),
        "read attribute '" + name + "'");
  return value;
}

std::int64_t Hdf5File::integer(const std::string& name, const std::string& object) const {
  std::int64_t value = 0;
  check(H5Aread(open_attribute(name, object).get(), H5T_NATIVE_INT64, &value),
        "read attribute '" + name + "'");
  return value;
}

std::uint64_t Hdf5File::unsigned_integer(const std::string& name, const std::string& object) const {
  std::uint64_t value = 0;
  check(H5Aread(open_attribute(name, object).get(), H5T_NATIVE_UINT64, &value),
        "read attribute '" + name + "'");
  return value;
}

std::string Hdf5File::text(const std::string& name, const std::string& object) const {
  const std::string what = "read attribute '" + name + "'";
  Handle attribute = open_attribute(name, object);
  Handle stored = own(H5Aget_type(attribute.get()), H5Tclose, what);
  if (H5Tget_class(stored.get()) != H5T_STRING || H5Tis_variable_str(stored.get()) > 0)
    throw std::runtime_error(path_ + ": attribute '" + name + "' is not a fixed-length string");
  std::string value(H5Tget_size(stored.get()), '\0');
  check(H5Aread(attribute.get(), stored.get(), value.data()), what);
  return value.substr(0, value.find('\0'));
}

std::vector<std::string> Hdf5File::attribute_names(const std::string& object) const {
  std::vector<std::string> names;
  const auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  hsize_t index = 0;
  check(H5Aiterate_by_name(file_.get(), object.c_str(), H5_INDEX_NAME, H5_ITER_INC, &index, collect,
                           &names, H5P_DEFAULT),
        "list the attributes of '" + object + "'");
  return names;
}

bool Hdf5File::has_dataset(const std::string& name) const {
  if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t object{};
  return H5Oget_info_by_name2(file_.get(), name.c_str(), &object, H5O_INFO_BASIC, H5P_DEFAULT) >=
             0 &&
         object.type == H5O_TYPE_DATASET;
}

DatasetInfo Hdf5File::info(const std::string& name) const {
  const std::string what = "read the layout of dataset '" + name + "'";
  Handle set = own(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose, what);
  Handle stored = own(H5Dget_type(set.get()), H5Tclose, what);
  Handle space = own(H5Dget_space(set.get()), H5Sclose, what);
  DatasetInfo info;
  info.name = name;
  const auto type = dtype_of(stored.get());
  if (!type) throw std::runtime_error(path_ + ": dataset '" + name + "' has an unknown type");
  info.type = *type;
  std::array<hsize_t, 2> dims{0, 1};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 2)
    throw std::runtime_error(path_ + ": dataset '" + name + "' is not 1-D or 2-D");
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  info.rows = dims[0];
  if (dims[1] < 1 || dims[1] > (1u << 20))
    throw std::runtime_error(path_ + ": dataset '" + name + "' has " + std::to_string(dims[1]) +
                             " components per row (an empty or damaged shape)");
  info.components = static_cast<int>(dims[1]);
  return info;
}

namespace {
std::vector<std::string> children(const Hdf5File& file, hid_t id, const std::string& group) {
  std::vector<std::string> names;
  const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  hsize_t index = 0;
  if (H5Literate_by_name(id, group.c_str(), H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names,
                         H5P_DEFAULT) < 0)
    throw std::runtime_error(file.path() + ": cannot list group '" + group +
                             "' (HDF5: " + hdf5_cause() + ")");
  for (auto& n : names) n = group == "/" ? "/" + n : group + "/" + n;
  return names;
}
}  // namespace

bool Hdf5File::has_group(const std::string& name) const {
  if (name == "/") return true;
  if (H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t object{};
  return H5Oget_info_by_name2(file_.get(), name.c_str(), &object, H5O_INFO_BASIC, H5P_DEFAULT) >=
             0 &&
         object.type == H5O_TYPE_GROUP;
}

std::vector<std::string> Hdf5File::groups(const std::string& group) const {
  std::vector<std::string> out;
  for (const auto& full : children(*this, file_.get(), group))
    if (has_group(full)) out.push_back(full);
  return out;
}

std::vector<std::string> Hdf5File::datasets(const std::string& group) const {
  std::vector<std::string> names;
  const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  hsize_t index = 0;
  check(H5Literate_by_name(file_.get(), group.c_str(), H5_INDEX_NAME, H5_ITER_INC, &index, collect,
                           &names, H5P_DEFAULT),
        "list group '" + group + "'");
  std::vector<std::string> sets;
  for (const auto& n : names) {
    const std::string full = group == "/" ? "/" + n : group + "/" + n;
    if (has_dataset(full)) sets.push_back(full);
  }
  return sets;
}

void Hdf5File::read(const std::string& name, Dtype type, hsize_t first, hsize_t count,
                    void* out) const {
  const std::string what = "read dataset '" + name + "'";
  const DatasetInfo layout = info(name);
  if (first + count > layout.rows)
    throw std::runtime_error(path_ + ": dataset '" + name + "' has " + std::to_string(layout.rows) +
                             " rows, fewer than needed (" + std::to_string(first + count) + ")");
  Handle set = own(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose, what);
  Handle file_space = own(rows_space(layout.rows, layout.components, first, count), H5Sclose, what);
  Handle memory_space =
      own(rows_space(std::max<hsize_t>(count, 1), layout.components, 0, count), H5Sclose, what);
  static unsigned char nothing = 0;
  check(H5Dread(set.get(), hdf5_type(type).memory, memory_space.get(), file_space.get(),
                H5P_DEFAULT, count ? out : &nothing),
        what + " (truncated file?)");
}

void Hdf5File::close() {
  if (!file_.close()) throw failure("close (flush) the file");
}

void check_free_space(const fs::path& path, std::uint64_t bytes) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  struct statvfs disk {};
  if (statvfs(dir.c_str(), &disk) != 0) return;  // unknown: the write itself will tell
  const double free = static_cast<double>(disk.f_bavail) * static_cast<double>(disk.f_frsize);
  // HDF5's own metadata: superblock, object headers, attributes (tens of kB for apron's files).
  const double need = static_cast<double>(bytes) + (1 << 20);
  if (free >= need) return;
  char text[160];
  std::snprintf(text, sizeof text,
                ": the disk is full: %.3g MB free in the folder, the file needs about %.3g MB",
                free / 1e6, need / 1e6);
  throw std::runtime_error(path.string() + text +
                           "; free some space there or set output.dir to "
                           "another disk (nothing was written)");
}

namespace {

// Removes a temporary file and what MPI-IO made beside it under names that begin with its name
// (OMPIO's shared-file-pointer lock or per-rank files, which a file left unclosed keeps).
void remove_with_sidecars(const fs::path& tmp) {
  std::error_code ignored;
  fs::remove(tmp, ignored);
  const std::string prefix = tmp.filename().string();
  const fs::path dir = tmp.has_parent_path() ? tmp.parent_path() : fs::path(".");
  for (const auto& entry : fs::directory_iterator(dir, ignored))
    if (entry.path().filename().string().starts_with(prefix)) fs::remove(entry.path(), ignored);
}

}  // namespace

void write_atomically(MPI_Comm comm, const fs::path& path,
                      const std::function<void(Hdf5File&)>& contents, std::uint64_t local_bytes) {
  const fs::path tmp = temporary_name(path);
  unsigned long long total = 0, mine = local_bytes;
  MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  on_root(comm, [&] { check_free_space(path, total); });
  const QuietHdf5Errors quiet;
  std::optional<Hdf5File> file;
  agree(comm, capture([&] { file.emplace(Hdf5File::create(comm, tmp)); }));
  try {
    agree(comm, capture([&] { contents(*file); }));
    agree(comm, capture([&] { file->close(); }));
  } catch (...) {
    file->abandon();  // closing it could hang (see abandon()); the file is removed anyway
    file.reset();
    if (rank_of(comm) == 0) remove_with_sidecars(tmp);
    throw;
  }
  // Also the barrier that keeps every rank here until the file has its final name.
  on_root(comm, [&] { rename_into_place(tmp, path); });
}

}  // namespace apron::io
