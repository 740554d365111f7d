// Point-cloud readers (issue 16): PLY (ascii, binary little and big endian; vertex x y z of any
// numeric type), XYZ / CSV / TXT text ("x y z" per line, optionally normals or a header line of
// names), PTS (a point count, then "x y z [intensity [r g b]]" per line) and PCD (ascii and
// binary; binary_compressed is refused by name). Malformed input is a MeshReadError naming the
// file, the line or byte offset, and the reason. Before anything is allocated, the file and the
// points it can hold are checked against the memory available: a file far larger than memory
// allows is an error, not an out-of-memory kill. LAS (and LAZ, E57 refused with the fix named):
// io/las_reader.hpp, chosen here by extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "io/mesh_reader.hpp"

namespace apron::io {

// Chooses the format by extension (.ply .xyz .csv .txt .pts .pcd .las, and .laz .e57 refused
// with the fix named; case-insensitive).
// available_bytes: the memory the read may use; 0: what the machine reports as available.
PointCloud read_point_file(const std::filesystem::path& file, std::size_t available_bytes = 0);

PointCloud read_pts(const std::filesystem::path& file);
PointCloud read_pcd(const std::filesystem::path& file);

// The size of `file` in bytes; throws MeshReadError naming it as a `kind` file ("LAS",
// "point-cloud") when it cannot be opened.
std::uintmax_t readable_file_bytes(const std::filesystem::path& file, const std::string& kind);

// The memory the operating system reports as available (MemAvailable), in bytes.
std::size_t available_memory_bytes();

// Throws MeshReadError when reading `file` (its bytes plus up to `points` points of 48 bytes, the
// points and normals in double) would not fit in `available_bytes`.
void check_read_memory(const std::filesystem::path& file, std::size_t file_bytes, double points,
                       std::size_t available_bytes);

// Binary files of fixed-size records (LAS points, binary PLY vertices) are read in blocks of about
// kRecordBlockBytes, with up to kRecordBlocksInFlight blocks' reads under way while one block is
// decoded: one outstanding read left a fast disk idle between requests, and the decoding threads
// waiting on it. The memory a read holds beside its points is that many blocks.
inline constexpr std::size_t kRecordBlockBytes = std::size_t{8} << 20;
inline constexpr int kRecordBlocksInFlight = 4;

// decode(records, n, first, at): records [first, first + n), the first at byte offset `at`.
using RecordBlockDecoder =
    std::function<void(const unsigned char*, std::size_t, std::uint64_t, std::uint64_t)>;

// Reads `count` records of `record_bytes` bytes each from byte `offset` of `file` (a `kind` file
// in messages) and hands them to `decode` block by block, in the file's order, each block of
// about block_bytes; a file that ends early is a MeshReadError naming the byte offset where it
// ended.
void read_record_blocks(const std::filesystem::path& file, const std::string& kind,
                        std::uint64_t offset, std::uint64_t count, std::size_t record_bytes,
                        const RecordBlockDecoder& decode,
                        std::size_t block_bytes = kRecordBlockBytes);

}  // namespace apron::io
