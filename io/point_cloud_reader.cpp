#include "io/point_cloud_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/las_reader.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

constexpr double kBytesPerPoint = 48;  // a point and a normal in double

std::string place_line(const fs::path& file, std::size_t line) {
  return file.string() + ":" + std::to_string(line);
}

// The whole file in one read into a buffer of its size (no stream copies).
std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (!in || ec)
    throw MeshReadError(file.string() + ": cannot open the point-cloud file (does it exist?)");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uintmax_t>(in.gcount()) != size)
    throw MeshReadError(file.string() + ": cannot read the point-cloud file (" +
                        std::to_string(in.gcount()) + " of " + std::to_string(size) + " bytes)");
  return text;
}

// The first bytes of a file, enough for any header a reader here accepts (a PLY header of up to
// 1000 lines).
std::string read_head(const fs::path& file, std::uintmax_t file_bytes) {
  constexpr std::uintmax_t kHeadBytes = std::uintmax_t{1} << 20;
  std::ifstream in(file, std::ios::binary);
  std::string text(static_cast<std::size_t>(std::min(file_bytes, kHeadBytes)), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  return text;
}

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (std::isspace(static_cast<unsigned char>(line[i])) || line[i] == ','))
      ++i;
    const std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])) && line[i] != ',')
      ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

template <class T>
bool parse(std::string_view word, T& out) {
  const char* end = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(word.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// Appends a point after checking it as the device needs it (finite, within float range).
void add_point(PointCloud& cloud, const double p[3], const std::string& place) {
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(p[d]))
      throw MeshReadError(place + ": point " + std::to_string(cloud.points.size()) +
                          " has a coordinate that is not a finite number (NaN or infinity)");
    if (std::fabs(p[d]) > std::numeric_limits<float>::max())
      throw MeshReadError(place + ": point " + std::to_string(cloud.points.size()) +
                          " has a coordinate beyond the float32 range; rescale the cloud");
  }
  cloud.points.push_back({p[0], p[1], p[2]});
}

PointCloud finish(PointCloud cloud, const fs::path& file) {
  if (cloud.points.empty())
    throw MeshReadError(file.string() + ": the point cloud is empty (no points)");
  return cloud;
}

// Lines of a text with their 1-based numbers, '\r' removed.
template <class F>
void for_each_line(std::string_view text, std::size_t first_line, F&& f) {
  std::size_t number = first_line, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(start, end - start);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    f(number, row);
    ++number;
    start = end + 1;
  }
}

// ---- PCD ---------------------------------------------------------------------------------

struct PcdHeader {
  std::vector<std::string> fields;
  std::vector<int> size, count;
  std::vector<char> type;
  long long points = -1, width = -1, height = 1;
  std::string data;
  std::size_t data_offset = 0, lines = 0;
};

PcdHeader read_pcd_header(const std::string& text, const fs::path& file) {
  PcdHeader h;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos)
      throw MeshReadError(file.string() +
                          ": the PCD header has no 'DATA' line (truncated, or not a PCD file?)");
    ++h.lines;
    std::string_view row(text.data() + pos, end - pos);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    pos = end + 1;
    const std::string place = place_line(file, h.lines);
    const auto words = words_of(row);
    if (words.empty() || words[0][0] == '#') continue;
    const std::string key(words[0]);
    auto ints = [&](std::vector<int>& out) {
      out.clear();
      for (std::size_t k = 1; k < words.size(); ++k) {
        int v = 0;
        if (!parse(words[k], v) || v <= 0)
          throw MeshReadError(place + ": '" + std::string(words[k]) + "' in " + key +
                              " is not a positive integer");
        out.push_back(v);
      }
    };
    auto one = [&](long long& out) {
      if (words.size() != 2 || !parse(words[1], out) || out < 0)
        throw MeshReadError(place + ": expected '" + key + " <count>' with a count >= 0");
    };
    if (key == "VERSION" || key == "VIEWPOINT") continue;
    if (key == "FIELDS") {
      for (std::size_t k = 1; k < words.size(); ++k) h.fields.emplace_back(words[k]);
    } else if (key == "SIZE") {
      ints(h.size);
      for (int s : h.size)
        if (s != 1 && s != 2 && s != 4 && s != 8)
          throw MeshReadError(place + ": SIZE must be 1, 2, 4 or 8");
    } else if (key == "TYPE") {
      for (std::size_t k = 1; k < words.size(); ++k) {
        if (words[k] != "F" && words[k] != "I" && words[k] != "U")
          throw MeshReadError(place + ": TYPE must be F, I or U, not '" + std::string(words[k]) +
                              "'");
        h.type.push_back(words[k][0]);
      }
    } else if (key == "COUNT") {
      ints(h.count);
    } else if (key == "WIDTH") {
      one(h.width);
    } else if (key == "HEIGHT") {
      one(h.height);
    } else if (key == "POINTS") {
      one(h.points);
    } else if (key == "DATA") {
      if (words.size() != 2)
        throw MeshReadError(place + ": expected 'DATA ascii' or 'DATA binary'");
      h.data = words[1];
      if (h.data == "binary_compressed")
        throw MeshReadError(place +
                            ": PCD 'DATA binary_compressed' is not supported; convert it "
                            "to binary or ascii (pcl_convert_pcd_ascii_binary)");
      if (h.data != "ascii" && h.data != "binary")
        throw MeshReadError(place + ": unknown PCD DATA '" + h.data +
                            "' (accepted: ascii, binary)");
      break;
    } else {
      throw MeshReadError(place + ": unknown PCD header line '" + key + "'");
    }
  }
  h.data_offset = pos;
  const std::string where = file.string() + ": the PCD header ";
  if (h.fields.empty()) throw MeshReadError(where + "has no FIELDS line");
  if (h.count.empty()) h.count.assign(h.fields.size(), 1);
  if (h.size.size() != h.fields.size() || h.type.size() != h.fields.size() ||
      h.count.size() != h.fields.size())
    throw MeshReadError(where + "needs as many SIZE, TYPE and COUNT entries as FIELDS (" +
                        std::to_string(h.fields.size()) + ")");
  if (h.points < 0) {
    if (h.width < 0) throw MeshReadError(where + "gives neither POINTS nor WIDTH");
    if (h.height > 0 && h.width > std::numeric_limits<long long>::max() / h.height)
      throw MeshReadError(where + "declares WIDTH * HEIGHT points beyond any file's size");
    h.points = h.width * h.height;
  }
  for (std::size_t f = 0; f < h.fields.size(); ++f)
    if (h.type[f] == 'F' && h.size[f] != 4 && h.size[f] != 8)
      throw MeshReadError(where + "declares field '" + h.fields[f] + "' as float of size " +
                          std::to_string(h.size[f]) + " (floats are 4 or 8 bytes)");
  return h;
}

int pcd_field(const PcdHeader& h, const char* name) {
  for (std::size_t f = 0; f < h.fields.size(); ++f)
    if (h.fields[f] == name) return static_cast<int>(f);
  return -1;
}

// A value of `size` bytes in native byte order: float (F), signed (I) or unsigned (U) integer.
double decode_native(const unsigned char* v, int size, char type) {
  auto as = [&](auto zero) {
    decltype(zero) x;
    std::memcpy(&x, v, sizeof x);
    return static_cast<double>(x);
  };
  if (type == 'F') return size == 4 ? as(float{}) : as(double{});
  if (type == 'I') {
    switch (size) {
      case 1:
        return as(std::int8_t{});
      case 2:
        return as(std::int16_t{});
      case 4:
        return as(std::int32_t{});
      default:
        return as(std::int64_t{});
    }
  }
  switch (size) {
    case 1:
      return as(std::uint8_t{});
    case 2:
      return as(std::uint16_t{});
    case 4:
      return as(std::uint32_t{});
    default:
      return as(std::uint64_t{});
  }
}

double decode_le(const unsigned char* b, int size, char type) {
  unsigned char v[8];
  std::memcpy(v, b, size);
  if (std::endian::native == std::endian::big) std::reverse(v, v + size);
  return decode_native(v, size, type);
}

// The common case of scans, read at the disk's speed: a binary PLY whose only element is the
// vertex element with scalar properties only and x, y, z among them (no normals), exactly as
// long as its count says. Anything else,
// or anything malformed, returns nothing and the general reader (io/mesh_reader.hpp), which
// names every error, reads the file.
std::optional<PointCloud> read_binary_ply_vertices(const fs::path& file,
                                                   std::uintmax_t file_bytes) {
  const std::string text = read_head(file, file_bytes);
  std::size_t pos = 0;
  std::vector<std::vector<std::string_view>> header;
  while (true) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos || header.size() > 1000) return std::nullopt;
    std::string_view row(text.data() + pos, end - pos);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    pos = end + 1;
    header.push_back(words_of(row));
    if (!header.back().empty() && header.back()[0] == "end_header") break;
  }
  if (header.size() < 3 || header[0].size() != 1 || header[0][0] != "ply") return std::nullopt;
  bool big = false, seen_format = false;
  long long count = -1;
  std::size_t stride = 0, offset[3] = {0, 0, 0};
  int size[3] = {0, 0, 0};
  char type[3] = {0, 0, 0};
  for (std::size_t h = 1; h + 1 < header.size(); ++h) {
    const auto& w = header[h];
    if (w.empty() || w[0] == "comment" || w[0] == "obj_info") continue;
    if (w[0] == "format") {
      if (w.size() != 3 || (w[1] != "binary_little_endian" && w[1] != "binary_big_endian"))
        return std::nullopt;
      big = w[1] == "binary_big_endian";
      seen_format = true;
    } else if (w[0] == "element") {
      if (count >= 0) return std::nullopt;  // a later element: read through, and checked, there
      if (w.size() != 3 || w[1] != "vertex" || !parse(w[2], count) || count < 0)
        return std::nullopt;
    } else if (w[0] == "property") {
      if (count < 0) return std::nullopt;      // a property of no element
      if (w.size() != 3) return std::nullopt;  // a list, or malformed
      static const std::pair<const char*, std::pair<int, char>> types[] = {
          {"char", {1, 'I'}},  {"int8", {1, 'I'}},    {"uchar", {1, 'U'}},  {"uint8", {1, 'U'}},
          {"short", {2, 'I'}}, {"int16", {2, 'I'}},   {"ushort", {2, 'U'}}, {"uint16", {2, 'U'}},
          {"int", {4, 'I'}},   {"int32", {4, 'I'}},   {"uint", {4, 'U'}},   {"uint32", {4, 'U'}},
          {"float", {4, 'F'}}, {"float32", {4, 'F'}}, {"double", {8, 'F'}}, {"float64", {8, 'F'}}};
      int bytes = 0;
      char kind = 0;
      for (const auto& [name, t] : types)
        if (w[1] == name) bytes = t.first, kind = t.second;
      if (bytes == 0 || w[2] == "nx" || w[2] == "ny" || w[2] == "nz") return std::nullopt;
      static const std::string_view axes[3] = {"x", "y", "z"};
      for (int d = 0; d < 3; ++d)
        if (w[2] == axes[d]) {
          if (size[d] != 0) return std::nullopt;
          size[d] = bytes, type[d] = kind, offset[d] = stride;
        }
      stride += static_cast<std::size_t>(bytes);
    } else {
      return std::nullopt;
    }
  }
  if (!seen_format || count < 0 || size[0] == 0 || size[1] == 0 || size[2] == 0)
    return std::nullopt;
  const auto n = static_cast<std::size_t>(count);
  const std::uintmax_t body = file_bytes - pos;
  if (body / stride != n || body % stride != 0)
    return std::nullopt;  // truncated, or longer than declared: the general reader says where
  const bool swap = big != (std::endian::native == std::endian::big);
  auto decode = [&](const unsigned char* record, int d) {
    const unsigned char* at = record + offset[d];
    if (!swap && type[d] == 'F' && size[d] == 4) {
      float v;
      std::memcpy(&v, at, 4);
      return static_cast<double>(v);
    }
    unsigned char v[8];
    std::memcpy(v, at, size[d]);
    if (swap) std::reverse(v, v + size[d]);
    return decode_native(v, size[d], type[d]);
  };
  auto usable = [](double x) {
    return std::isfinite(x) && std::fabs(x) <= std::numeric_limits<float>::max();
  };
  PointCloud cloud;
  cloud.points.resize(n);
  // Each block in parallel; the first unusable point, if any, is reported as a serial read would.
  read_record_blocks(
      file, "PLY", pos, n, stride,
      [&](const unsigned char* records, std::size_t in_block, std::uint64_t first,
          std::uint64_t at) {
        auto* points = cloud.points.data() + first;
        const auto block = static_cast<std::int64_t>(in_block);
        std::int64_t first_bad = block;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
        for (std::int64_t i = 0; i < block; ++i)
          for (int d = 0; d < 3; ++d) {
            points[i][d] = decode(records + static_cast<std::size_t>(i) * stride, d);
            if (!usable(points[i][d])) first_bad = std::min(first_bad, i);
          }
        if (first_bad == block) return;
        const auto i = static_cast<std::size_t>(first_bad);
        int d = 0;
        while (usable(points[i][d])) ++d;
        throw MeshReadError(file.string() + ": byte offset " + std::to_string(at + i * stride) +
                            ": point " + std::to_string(first + i) +
                            (std::isfinite(points[i][d])
                                 ? " has a coordinate beyond the float32 range; rescale the cloud"
                                 : " has a coordinate that is not a finite number (NaN or "
                                   "infinity)"));
      });
  if (n == 0) throw MeshReadError(file.string() + ": the point cloud is empty (no points)");
  return cloud;
}

}  // namespace

std::uintmax_t readable_file_bytes(const fs::path& file, const std::string& kind) {
  std::error_code ec;
  const auto bytes = fs::file_size(file, ec);
  if (ec)
    throw MeshReadError(file.string() + ": cannot open the " + kind + " file (does it exist?)");
  return bytes;
}

std::size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return std::numeric_limits<std::size_t>::max() / 4;  // unknown: do not refuse
}

void check_read_memory(const fs::path& file, std::size_t file_bytes, double points,
                       std::size_t available_bytes) {
  const double need = static_cast<double>(file_bytes) + points * kBytesPerPoint;
  if (need <= 0.9 * static_cast<double>(available_bytes)) return;
  char text[256];
  std::snprintf(text, sizeof text,
                ": reading this file needs about %.3g GB of memory (%.3g GB of file, up to %.3g "
                "points), but %.3g GB are available; split the cloud or subsample it",
                need / 1e9, file_bytes / 1e9, points, available_bytes / 1e9);
  throw MeshReadError(file.string() + text);
}

namespace {

// pread until `bytes` are read or the file ends; the bytes read.
std::size_t read_at(int fd, unsigned char* into, std::size_t bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, into + done, bytes - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

class ReadOnlyFile {
 public:
  ReadOnlyFile(const fs::path& file, const std::string& kind)
      : fd_(::open(file.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0)
      throw MeshReadError(file.string() + ": cannot open the " + kind + " file (does it exist?)");
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void read_record_blocks(const fs::path& file, const std::string& kind, std::uint64_t offset,
                        std::uint64_t count, std::size_t record_bytes,
                        const RecordBlockDecoder& decode, std::size_t block_bytes) {
  if (count == 0) return;
  const ReadOnlyFile in(file, kind);
  // Doubles the kernel's read-ahead window for this file.
  ::posix_fadvise(in.fd(), static_cast<off_t>(offset), 0, POSIX_FADV_SEQUENTIAL);
  const std::uint64_t per_block =
      std::max<std::uint64_t>(1, block_bytes / std::max<std::size_t>(1, record_bytes));
  const std::uint64_t blocks = (count + per_block - 1) / per_block;
  auto records_of = [&](std::uint64_t b) {
    return static_cast<std::size_t>(std::min(per_block, count - b * per_block));
  };
  auto offset_of = [&](std::uint64_t b) { return offset + b * per_block * record_bytes; };
  // Declared after `in`: a block's pending read is waited for (the future's destructor) before
  // its buffer and the file are released, also when decode throws.
  struct Block {
    std::vector<unsigned char> bytes;
    std::future<std::size_t> read;
  };
  std::vector<Block> ring(static_cast<std::size_t>(
      std::min<std::uint64_t>(blocks, static_cast<std::uint64_t>(kRecordBlocksInFlight))));
  auto start = [&](std::uint64_t b) {
    Block& block = ring[b % ring.size()];
    block.bytes.resize(records_of(b) * record_bytes);
    block.read = std::async(std::launch::async, read_at, in.fd(), block.bytes.data(),
                            block.bytes.size(), offset_of(b));
  };
  for (std::uint64_t b = 0; b < ring.size(); ++b) start(b);
  for (std::uint64_t b = 0; b < blocks; ++b) {
    Block& block = ring[b % ring.size()];
    const std::size_t got = block.read.get();
    if (got != block.bytes.size())
      throw MeshReadError(file.string() + ": byte offset " + std::to_string(offset_of(b) + got) +
                          ": the file ends early (cannot read its records)");
    decode(block.bytes.data(), records_of(b), b * per_block, offset_of(b));
    if (b + ring.size() < blocks) start(b + ring.size());
  }
}

PointCloud read_pts(const fs::path& file) {
  const std::string text = read_all(file);
  PointCloud cloud;
  long long declared = -1;
  std::size_t width = 0;
  for_each_line(text, 1, [&](std::size_t number, std::string_view row) {
    const auto words = words_of(row);
    if (words.empty()) return;
    const std::string place = place_line(file, number);
    if (declared < 0) {
      if (words.size() != 1 || !parse(words[0], declared) || declared < 0)
        throw MeshReadError(place + ": a PTS file starts with its point count (one integer)");
      return;
    }
    if (width == 0) {
      width = words.size();
      if (width != 3 && width != 4 && width != 6 && width != 7)
        throw MeshReadError(place +
                            ": expected 3, 4 (x y z intensity) or 7 (x y z intensity r g b) "
                            "values, found " +
                            std::to_string(width));
    }
    if (words.size() != width)
      throw MeshReadError(place + ": " + std::to_string(words.size()) + " values, but " +
                          std::to_string(width) + " on the lines before");
    double p[3];
    for (int d = 0; d < 3; ++d)
      if (!parse(words[d], p[d]))
        throw MeshReadError(place + ": '" + std::string(words[d]) + "' is not a number");
    if (static_cast<long long>(cloud.points.size()) >= declared)
      throw MeshReadError(place + ": more points than the " + std::to_string(declared) +
                          " the first line declares");
    add_point(cloud, p, place);
  });
  if (declared < 0) throw MeshReadError(file.string() + ": the PTS file is empty (no point count)");
  if (static_cast<long long>(cloud.points.size()) != declared)
    throw MeshReadError(file.string() + ": the first line declares " + std::to_string(declared) +
                        " points but the file holds " + std::to_string(cloud.points.size()) +
                        " (truncated?)");
  return finish(std::move(cloud), file);
}

PointCloud read_pcd(const fs::path& file) {
  const std::string text = read_all(file);
  const PcdHeader h = read_pcd_header(text, file);
  const int xyz[3] = {pcd_field(h, "x"), pcd_field(h, "y"), pcd_field(h, "z")};
  for (int f : xyz)
    if (f < 0) throw MeshReadError(file.string() + ": the PCD FIELDS lack x, y or z");
  PointCloud cloud;
  // NaN coordinates mark invalid points of organised (not dense) clouds: skipped, not errors.
  auto take = [&](const double p[3], const std::string& place) {
    if (std::isnan(p[0]) || std::isnan(p[1]) || std::isnan(p[2])) return;
    add_point(cloud, p, place);
  };
  if (h.data == "ascii") {
    // Columns: each field contributes COUNT values.
    std::vector<int> column(h.fields.size());
    std::size_t width = 0;
    for (std::size_t f = 0; f < h.fields.size(); ++f)
      column[f] = static_cast<int>(width), width += h.count[f];
    long long read = 0;
    for_each_line(std::string_view(text).substr(h.data_offset), h.lines + 1,
                  [&](std::size_t number, std::string_view row) {
                    const auto words = words_of(row);
                    if (words.empty()) return;
                    const std::string place = place_line(file, number);
                    if (read >= h.points)
                      throw MeshReadError(place + ": more points than the " +
                                          std::to_string(h.points) + " the header declares");
                    if (words.size() != width)
                      throw MeshReadError(place + ": " + std::to_string(words.size()) +
                                          " values, but the FIELDS and COUNT declare " +
                                          std::to_string(width));
                    double p[3];
                    for (int d = 0; d < 3; ++d) {
                      const std::string_view w = words[column[xyz[d]]];
                      if (w == "nan" || w == "NaN") {
                        p[d] = std::nan("");
                      } else if (!parse(w, p[d])) {
                        throw MeshReadError(place + ": '" + std::string(w) + "' is not a number");
                      }
                    }
                    take(p, place);
                    ++read;
                  });
    if (read != h.points)
      throw MeshReadError(file.string() + ": the PCD header declares " + std::to_string(h.points) +
                          " points but the data holds " + std::to_string(read) + " (truncated?)");
    return finish(std::move(cloud), file);
  }
  std::size_t stride = 0;
  std::vector<std::size_t> offset(h.fields.size());
  for (std::size_t f = 0; f < h.fields.size(); ++f)
    offset[f] = stride, stride += static_cast<std::size_t>(h.size[f]) * h.count[f];
  const std::size_t available = text.size() - h.data_offset;
  const auto points = static_cast<std::size_t>(h.points);
  if (stride == 0 || available / stride < points)
    throw MeshReadError(file.string() + ": byte offset " + std::to_string(text.size()) +
                        ": the file ends early: the header declares " + std::to_string(h.points) +
                        " points of " + std::to_string(stride) + " bytes (truncated?)");
  if (available != points * stride)
    throw MeshReadError(file.string() + ": byte offset " +
                        std::to_string(h.data_offset + points * stride) + ": data follows the " +
                        std::to_string(h.points) +
                        " points the header declares (is POINTS too small?)");
  cloud.points.reserve(points);
  const auto* base = reinterpret_cast<const unsigned char*>(text.data()) + h.data_offset;
  for (std::size_t i = 0; i < points; ++i) {
    double p[3];
    for (int d = 0; d < 3; ++d)
      p[d] = decode_le(base + i * stride + offset[xyz[d]], h.size[xyz[d]], h.type[xyz[d]]);
    take(p, file.string() + ": byte offset " + std::to_string(h.data_offset + i * stride));
  }
  return finish(std::move(cloud), file);
}

PointCloud read_point_file(const fs::path& file, std::size_t available_bytes) {
  const auto bytes = readable_file_bytes(file, "point-cloud");
  if (available_bytes == 0) available_bytes = available_memory_bytes();
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  // Lidar formats (io/las_reader.hpp): the LAS header says how many points there are.
  if (ext == ".las") return read_las(file, available_bytes);
  if (ext == ".laz") return read_laz(file, available_bytes);
  if (ext == ".e57") return read_e57(file, available_bytes);
  // The most points the file can hold: 12 bytes per binary point (3 floats), 6 per text line.
  const bool binary_capable = ext == ".ply" || ext == ".pcd";
  check_read_memory(file, bytes, static_cast<double>(bytes) / (binary_capable ? 12.0 : 6.0),
                    available_bytes);
  if (ext == ".ply") {
    if (auto fast = read_binary_ply_vertices(file, bytes)) return std::move(*fast);
    return read_ply_points(file);
  }
  if (ext == ".xyz" || ext == ".csv" || ext == ".txt") return read_xyz(file);
  if (ext == ".pts") return read_pts(file);
  if (ext == ".pcd") return read_pcd(file);
  throw MeshReadError(file.string() + ": unknown point-cloud format '" + ext +
                      "' (accepted: .ply, .xyz, .csv, .txt, .pts, .pcd, .las, .laz, .e57)");
}

}  // namespace apron::io
