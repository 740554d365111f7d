// The checkpoint file's layout (format 2, io/checkpoint.hpp) and the checks of its metadata:
// what the writer lays out, the reader and `apron inspect` read back and verify.
#pragma once

#include <mpi.h>

#include <bit>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "io/hdf5_file.hpp"

namespace apron::io::checkpoint_format {

inline constexpr const char* kStateGroup = "/state";
inline constexpr const char* kArraysGroup = "/arrays";
inline constexpr const char* kTablesGroup = "/tables";
inline constexpr const char* kConfigSet = "/config";

std::string array_path(const std::string& name);
std::string table_path(const std::string& table);
std::string rank_rows_path(const std::string& table);
std::string columns_path(const std::string& table);
std::string column_path(const std::string& table, const std::string& column);
std::string leaf(const std::string& full);  // the last part of a dataset path
std::size_t row_bytes(Dtype type, int components);
std::uint64_t sum_over_ranks(MPI_Comm comm, std::uint64_t mine);
std::string hex(std::uint64_t value);
std::string number(double value);  // every digit a double holds
// Table, column and array names are single path components.
void check_name(const std::string& what, const std::string& name);

// The manifest: everything but the rows, and its checksum.
struct ColumnEntry {
  Dtype type = Dtype::u8;
  int components = 1;
  std::uint64_t rows = 0;
  std::uint64_t checksum = 0;
};
struct TableEntry {
  std::uint64_t rows = 0;
  std::vector<std::int64_t> rank_rows;
  std::map<std::string, ColumnEntry> columns;
};
struct Manifest {
  CheckpointHeader header;
  std::map<std::string, TableEntry> tables;
  std::map<std::string, ColumnEntry> arrays;  // replicated
};

// FNV-1a over a length-prefixed serialisation: any change of a value, a name, a count or the set
// of datasets changes it (tests/checkpoint/ckpt_digest.py is the same in Python).
class Digest {
 public:
  Digest& bytes(const void* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= static_cast<const unsigned char*>(data)[i];
      h_ *= 1099511628211ull;
    }
    return *this;
  }
  Digest& u64(std::uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
    return bytes(le, 8);
  }
  Digest& i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
  Digest& f64(double v) { return u64(std::bit_cast<std::uint64_t>(v)); }
  Digest& text(const std::string& s) { return u64(s.size()).bytes(s.data(), s.size()); }
  Digest& column(const std::string& name, const ColumnEntry& c) {
    return text(name).text(dtype_name(c.type)).i64(c.components).u64(c.rows).u64(c.checksum);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

// The header checksum.
std::uint64_t digest_of(const Manifest& m);
std::runtime_error bad_value(const std::string& path, const std::string& what,
                             const std::string& value, const std::string& rule);
// Values a checkpoint can never hold, whatever its checksum says.
void check_ranges(const std::string& path, const Manifest& m);
void write_header(Hdf5File& file, const CheckpointHeader& h, std::uint64_t digest);
void check_format(const Hdf5File& file);
std::string what_is_missing(const Hdf5File& file, const std::string& name);
ColumnEntry column_entry(const Hdf5File& file, const std::string& set);
Manifest read_manifest(const Hdf5File& file);
// The checks of a manifest read from `file`; "" when it passes, else the reason.
std::string manifest_problem(const Hdf5File& file, const Manifest& m);
std::runtime_error checksum_mismatch(const std::string& path, const std::string& name,
                                     std::uint64_t stored, std::uint64_t computed);
// "" when values [first, first + count) of a replicated array are finite, else the reason.
std::string non_finite_problem(const std::string& path, const std::string& name, Dtype type,
                               const void* data, std::uint64_t count, std::uint64_t first = 0);

}  // namespace apron::io::checkpoint_format
