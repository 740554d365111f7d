// Particle series output (see particle_output.hpp): one parallel-HDF5 file per step, written
// collectively by every rank under a .tmp name and renamed by rank 0, plus an XDMF index that
// rank 0 rewrites after every step.
//
// Error policy: a failure on one rank must become an exception on *every* rank, or the ranks
// that did not fail would wait forever in the next collective call. So each phase of write()
// ends in agree(), which hands the first failing rank's message to all ranks.
#include "io/particle_output.hpp"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

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

// ---- agreeing on failure ------------------------------------------------------------------

// Runs f and returns the message of the exception it threw, or "" when it succeeded.
template <class F>
std::string capture(F&& f) {
  try {
    f();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Collective. When any rank passes a non-empty error, every rank throws std::runtime_error with
// the message of the lowest failing rank, so all ranks fail together and report the same thing.
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
  throw std::runtime_error(message);
}

// Collective: rank 0 does f (file-system work that must happen once), then all ranks learn how
// it went. This is also a barrier: no rank returns before rank 0 has finished f.
template <class F>
void on_root(MPI_Comm comm, F&& f) {
  agree(comm, rank_of(comm) == 0 ? capture(std::forward<F>(f)) : std::string{});
}

// ---- checking the arguments ----------------------------------------------------------------

// FNV-1a, because the same bytes must hash the same on every rank (std::hash promises nothing).
std::uint64_t hash_bytes(std::uint64_t h, const void* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<const unsigned char*>(bytes)[i];
    h *= 1099511628211ull;
  }
  return h;
}

template <class T>
std::uint64_t hash_value(std::uint64_t h, const T& value) {
  return hash_bytes(h, &value, sizeof value);
}

// Collective. Attributes and dataset layouts are file metadata, which parallel HDF5 requires to
// be identical on all ranks (else the file is silently corrupt), so compare a hash of them. The
// verdict is the same on every rank, so all ranks throw together.
void check_same_on_all_ranks(MPI_Comm comm, long step, double time,
                             std::span<const HostField> fields) {
  std::uint64_t h = 14695981039346656037ull;
  h = hash_value(hash_value(hash_value(h, step), std::bit_cast<std::uint64_t>(time)),
                 fields.size());
  for (const HostField& f : fields) {
    h = hash_bytes(hash_value(h, f.name.size()), f.name.data(), f.name.size());
    h = hash_value(hash_value(h, f.type), f.components);
  }
  std::array<std::uint64_t, 2> max_and_inverted_min{h, ~h};
  MPI_Allreduce(MPI_IN_PLACE, max_and_inverted_min.data(), 2, MPI_UINT64_T, MPI_MAX, comm);
  if (max_and_inverted_min[0] != ~max_and_inverted_min[1]) {
    throw std::logic_error(
        "ParticleSeriesWriter::write: ranks passed different steps, times or field lists");
  }
}

// Same verdict on every rank, since check_same_on_all_ranks has run first.
void check_fields(std::span<const HostField> fields) {
  std::set<std::string_view> names;
  bool geometry = false;
  for (const HostField& f : fields) {
    if (f.name.empty() || f.name == "." || f.name.find('/') != std::string::npos) {
      throw std::invalid_argument("ParticleSeriesWriter::write: '" + f.name +
                                  "' cannot be a dataset name");
    }
    if (!names.insert(f.name).second || f.components < 1) {
      throw std::invalid_argument("ParticleSeriesWriter::write: field '" + f.name +
                                  "' is given twice or has no components");
    }
    if (f.name == "position") geometry = f.components == 3;
  }
  if (!geometry) {
    throw std::invalid_argument(
        "ParticleSeriesWriter::write: needs a 3-component 'position' field (the geometry)");
  }
}

// Local check (a null pointer with data to write); the caller shares the outcome via agree().
std::string missing_data(std::size_t n_local, std::span<const HostField> fields) {
  for (const HostField& f : fields) {
    if (n_local > 0 && f.data == nullptr) {
      return "ParticleSeriesWriter::write: field '" + f.name + "' has no data";
    }
  }
  return {};
}

// ---- file-system steps done by rank 0 ------------------------------------------------------

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

// Silences HDF5's automatic error-stack printing while alive: failures become exceptions that
// carry HDF5's own reason, instead of a stack dump on stderr from every rank.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &print_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, print_, data_); }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t print_ = nullptr;
  void* data_ = nullptr;
};

herr_t keep_description(unsigned, const H5E_error2_t* error, void* out) {
  if (error->desc != nullptr && *error->desc != '\0') *static_cast<std::string*>(out) = error->desc;
  return 0;
}

// The innermost entry of HDF5's error stack: the actual cause (e.g. the errno of an open).
// Must run right after the failed call, before another API call clears the stack.
std::string hdf5_cause() {
  std::string cause;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_description, &cause);
  return cause.empty() ? "no HDF5 error message" : cause;
}

// Owns one HDF5 identifier and closes it with its H5?close on every way out of a scope.
class Handle {
 public:
  using Close = herr_t (*)(hid_t);
  Handle(hid_t id, Close closer) : id_(id), close_(closer) {}
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  // Closes now and says whether that worked: closing a file is when HDF5 flushes it.
  bool close() { return close_(std::exchange(id_, H5I_INVALID_HID)) >= 0; }

 private:
  hid_t id_;
  Close close_;
};

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
  throw std::invalid_argument("ParticleSeriesWriter: unknown Dtype");
}

// This rank's rows of every dataset.
struct Slab {
  hsize_t offset;
  hsize_t count;
  hsize_t global;
};

// Collective. Rank r's rows follow those of ranks 0..r-1.
Slab slab_of(MPI_Comm comm, std::size_t n_local) {
  unsigned long long count = n_local, offset = 0, global = 0;
  MPI_Exscan(&count, &offset, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  if (rank_of(comm) == 0) offset = 0;  // MPI_Exscan leaves rank 0's result undefined
  MPI_Allreduce(&count, &global, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  return {offset, count, global};
}

// One step's HDF5 file, created with the MPI-IO driver. Every member function is collective:
// all ranks call them in the same order with the same names, types and shapes.
class StepFile {
 public:
  StepFile(MPI_Comm comm, const fs::path& path);
  void attribute(const char* name, hid_t file_type, hid_t memory_type, const void* value);
  void dataset(const HostField& field, const Slab& slab);
  void close();

 private:
  std::runtime_error failure(const std::string& what) const {
    return std::runtime_error(path_ + ": cannot " + what + " (HDF5: " + hdf5_cause() + ")");
  }
  void check(herr_t status, const std::string& what) const {
    if (status < 0) throw failure(what);
  }
  Handle own(hid_t id, Handle::Close closer, const std::string& what) const {
    if (id < 0) throw failure(what);
    return Handle(id, closer);
  }
  Handle selection(const HostField& field, const Slab& slab, bool in_file) const;

  std::string path_;
  Handle transfer_{H5I_INVALID_HID, H5Pclose};
  Handle file_{H5I_INVALID_HID, H5Fclose};
};

StepFile::StepFile(MPI_Comm comm, const fs::path& path) : path_(path.string()) {
  // Set up before the file exists, so nothing can fail on one rank after the collective create.
  transfer_ = own(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "create a transfer property list");
  check(H5Pset_dxpl_mpio(transfer_.get(), H5FD_MPIO_COLLECTIVE), "request collective writes");
  Handle access = own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create an access property list");
  check(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), "select the MPI-IO driver");
  // Metadata then leaves in one collective write at close rather than many small ones.
  check(H5Pset_coll_metadata_write(access.get(), true), "request collective metadata writes");
  file_ = own(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose,
              "create the file");
}

void StepFile::attribute(const char* name, hid_t file_type, hid_t memory_type, const void* value) {
  const std::string what = std::string("write attribute '") + name + "'";
  Handle space = own(H5Screate(H5S_SCALAR), H5Sclose, what);
  Handle attribute =
      own(H5Acreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
          what);
  check(H5Awrite(attribute.get(), memory_type, value), what);
}

// The dataspace of this rank's part: its rows of the global dataset (in_file) or its whole
// buffer. A rank without particles selects nothing but still joins the collective write.
Handle StepFile::selection(const HostField& field, const Slab& slab, bool in_file) const {
  const int rank = field.components == 1 ? 1 : 2;
  const hsize_t components = static_cast<hsize_t>(field.components);
  const hsize_t rows = in_file ? slab.global : std::max<hsize_t>(slab.count, 1);
  const std::array<hsize_t, 2> dims{rows, components}, start{in_file ? slab.offset : 0, 0},
      count{slab.count, components};
  const std::string what = "select the rows of dataset '" + field.name + "'";
  Handle space = own(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose, what);
  if (slab.count == 0) {
    check(H5Sselect_none(space.get()), what);
  } else {
    check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                              nullptr),
          what);
  }
  return space;
}

void StepFile::dataset(const HostField& field, const Slab& slab) {
  const Hdf5Type type = hdf5_type(field.type);
  const std::string what = "write dataset '" + field.name + "'";
  Handle file_space = selection(field, slab, true);
  Handle memory_space = selection(field, slab, false);
  Handle creation = own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, what);
  // Every element gets written, so skip the fill-value pass (a second full write in parallel).
  check(H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER), what);
  Handle set = own(H5Dcreate2(file_.get(), field.name.c_str(), type.file, file_space.get(),
                              H5P_DEFAULT, creation.get(), H5P_DEFAULT),
                   H5Dclose, what);
  // An empty dataset has no storage to write to (HDF5 fails on it); all ranks skip alike.
  if (slab.global == 0) return;
  // HDF5 rejects a null buffer even when nothing is selected.
  static const unsigned char nothing = 0;
  const void* data = field.data != nullptr ? field.data : &nothing;
  check(
      H5Dwrite(set.get(), type.memory, memory_space.get(), file_space.get(), transfer_.get(), data),
      what);
}

void StepFile::close() {
  if (!file_.close()) throw failure("close (flush) the file");
}

void write_contents(StepFile& file, long step, double time, int ranks, const Slab& slab,
                    std::span<const HostField> fields) {
  const std::int64_t step64 = step;
  file.attribute("step", H5T_STD_I64LE, H5T_NATIVE_INT64, &step64);
  file.attribute("time", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &time);
  file.attribute("ranks", H5T_STD_I32LE, H5T_NATIVE_INT, &ranks);
  for (const HostField& field : fields) file.dataset(field, slab);
}

// Collective. Writes the complete step file at temporary_name(path). On failure every rank
// throws and the partial file is removed.
void write_step_file(MPI_Comm comm, const fs::path& path, long step, double time, const Slab& slab,
                     std::span<const HostField> fields) {
  const fs::path tmp = temporary_name(path);
  const QuietHdf5Errors quiet;
  std::optional<StepFile> file;
  agree(comm, capture([&] { file.emplace(comm, tmp); }));
  try {
    agree(comm, capture([&] { write_contents(*file, step, time, size_of(comm), slab, fields); }));
    agree(comm, capture([&] { file->close(); }));
  } catch (...) {
    file.reset();  // the (collective) close must come before the removal
    std::error_code ignored;
    if (rank_of(comm) == 0) fs::remove(tmp, ignored);
    throw;
  }
}

// ---- XDMF ------------------------------------------------------------------------------------

std::string step_file_name(const std::string& basename, long step) {
  std::array<char, 32> digits{};
  std::snprintf(digits.data(), digits.size(), "_%06ld.h5", step);
  return basename + digits.data();
}

std::string xml_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Shortest text that reads back as the same double, so the index's times match the files'.
std::string exact_text(double value) {
  std::array<char, 32> text{};
  const auto end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
  return std::string(text.data(), end);
}

std::string number_type(Dtype type) {
  switch (type) {
    case Dtype::f32:
      return R"(NumberType="Float" Precision="4")";
    case Dtype::f64:
      return R"(NumberType="Float" Precision="8")";
    case Dtype::i32:
      return R"(NumberType="Int" Precision="4")";
    case Dtype::u32:
      return R"(NumberType="UInt" Precision="4")";
    case Dtype::i64:
      return R"(NumberType="Int" Precision="8")";
    case Dtype::u8:
      return R"(NumberType="UChar" Precision="1")";
  }
  throw std::invalid_argument("ParticleSeriesWriter: unknown Dtype");
}

const char* attribute_type(int components) {
  switch (components) {
    case 1:
      return "Scalar";
    case 3:
      return "Vector";
    case 6:
      return "Tensor6";
    case 9:
      return "Tensor";
    default:
      return "Matrix";
  }
}

// The HDF5 path is relative ("file.h5:/name"): the index sits beside the files, so the output
// folder can be moved or copied as a whole.
std::string data_item(const std::string& file, unsigned long long global, const std::string& name,
                      Dtype type, int components) {
  std::string dims = std::to_string(global);
  // ' ', not " ": g++ 12 -O2 falsely warns (-Wrestrict) on "literal" + std::string&&.
  if (components != 1) dims += ' ' + std::to_string(components);
  return R"(<DataItem Dimensions=")" + dims + "\" " + number_type(type) + R"( Format="HDF">)" +
         xml_escaped(file) + ":/" + xml_escaped(name) + "</DataItem>";
}

// One uniform grid of the temporal collection. `entry` is a ParticleSeriesWriter::Entry (a
// private type, hence auto).
std::string xdmf_grid(const auto& entry) {
  const std::string n = std::to_string(entry.global);
  const std::string grid_name = fs::path(entry.file).stem().string();
  std::string xml = "      <Grid Name=\"" + xml_escaped(grid_name) + "\" GridType=\"Uniform\">\n";
  xml += "        <Time Value=\"" + exact_text(entry.time) + "\"/>\n";
  xml += "        <Topology TopologyType=\"Polyvertex\" NumberOfElements=\"" + n +
         "\" NodesPerElement=\"1\"/>\n";
  for (const auto& [name, layout] : entry.fields) {
    const std::string item = data_item(entry.file, entry.global, name, layout.first, layout.second);
    if (name == "position") {
      xml +=
          "        <Geometry GeometryType=\"XYZ\">\n          " + item + "\n        </Geometry>\n";
    } else {
      xml += "        <Attribute Name=\"" + xml_escaped(name) + "\" AttributeType=\"" +
             attribute_type(layout.second) + "\" Center=\"Node\">\n          " + item +
             "\n        </Attribute>\n";
    }
  }
  return xml + "      </Grid>\n";
}

std::string xdmf_series(const std::string& basename, const auto& entries) {
  std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Xdmf Version=\"3.0\">\n";
  xml += "  <Domain>\n    <Grid Name=\"" + xml_escaped(basename) +
         "\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
  for (const auto& entry : entries) xml += xdmf_grid(entry);
  return xml + "    </Grid>\n  </Domain>\n</Xdmf>\n";
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
  check_same_on_all_ranks(comm_, step, time, fields);
  check_fields(fields);
  agree(comm_, missing_data(n_local, fields));
  on_root(comm_, [&] { make_output_directory(dir_); });

  Entry entry{step, time, step_file_name(basename_, step), 0, {}};
  const fs::path path = dir_ / entry.file;
  const Slab slab = slab_of(comm_, n_local);
  entry.global = slab.global;
  for (const HostField& f : fields) entry.fields.push_back({f.name, {f.type, f.components}});
  write_step_file(comm_, path, step, time, slab, fields);
  // Also the barrier that keeps every rank here until the finished file has its final name.
  on_root(comm_, [&] { rename_into_place(temporary_name(path), path); });

  // A step written again (say, a final output on a regular output step) replaces its entry.
  const auto same_step = std::find_if(entries_.begin(), entries_.end(),
                                      [&](const Entry& e) { return e.step == step; });
  if (same_step != entries_.end()) {
    *same_step = std::move(entry);
  } else {
    entries_.push_back(std::move(entry));
  }
  on_root(comm_, [&] { write_file_atomically(xmf_path_, xdmf_series(basename_, entries_)); });
}

}  // namespace apron::io
