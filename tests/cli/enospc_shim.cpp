// A fault injector for tests (LD_PRELOAD): writes to files whose path ends with
// $APRON_TEST_ENOSPC_PATH fail with ENOSPC once $APRON_TEST_ENOSPC_AFTER bytes (default 0) have
// gone to such files in this process: a disk that fills in the middle of a write, on the ranks
// that load it, at a chosen file and byte, which no real disk does on cue.
#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<long long> written{0};

// Whether this write to fd of n bytes must fail (it counts the bytes it lets through).
bool must_fail(int fd, std::size_t n) {
  const char* pattern = std::getenv("APRON_TEST_ENOSPC_PATH");
  if (!pattern || !*pattern) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t length = readlink(link, path, sizeof path - 1);
  if (length < 0) return false;
  path[length] = 0;
  // Ends with: MPI-IO's helper files are named after the data file (OMPIO's shared file
  // pointer segment, in another file system) and must not fail with it.
  const std::size_t p = std::strlen(pattern), l = static_cast<std::size_t>(length);
  if (l < p || std::strcmp(path + l - p, pattern) != 0) return false;
  const char* after = std::getenv("APRON_TEST_ENOSPC_AFTER");
  const long long allowed = after ? std::atoll(after) : 0;
  if (written.fetch_add(static_cast<long long>(n)) + static_cast<long long>(n) <= allowed)
    return false;
  errno = ENOSPC;
  return true;
}

std::size_t total(const iovec* v, int count) {
  std::size_t n = 0;
  for (int k = 0; k < count; ++k) n += v[k].iov_len;
  return n;
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buffer, std::size_t n) {
  static auto next = real<ssize_t (*)(int, const void*, std::size_t)>("write");
  return must_fail(fd, n) ? -1 : next(fd, buffer, n);
}
ssize_t pwrite(int fd, const void* buffer, std::size_t n, off_t offset) {
  static auto next = real<ssize_t (*)(int, const void*, std::size_t, off_t)>("pwrite");
  return must_fail(fd, n) ? -1 : next(fd, buffer, n, offset);
}
ssize_t pwrite64(int fd, const void* buffer, std::size_t n, off_t offset) {
  static auto next = real<ssize_t (*)(int, const void*, std::size_t, off_t)>("pwrite64");
  return must_fail(fd, n) ? -1 : next(fd, buffer, n, offset);
}
ssize_t writev(int fd, const iovec* v, int count) {
  static auto next = real<ssize_t (*)(int, const iovec*, int)>("writev");
  return must_fail(fd, total(v, count)) ? -1 : next(fd, v, count);
}
ssize_t pwritev(int fd, const iovec* v, int count, off_t offset) {
  static auto next = real<ssize_t (*)(int, const iovec*, int, off_t)>("pwritev");
  return must_fail(fd, total(v, count)) ? -1 : next(fd, v, count, offset);
}
ssize_t pwritev64(int fd, const iovec* v, int count, off_t offset) {
  static auto next = real<ssize_t (*)(int, const iovec*, int, off_t)>("pwritev64");
  return must_fail(fd, total(v, count)) ? -1 : next(fd, v, count, offset);
}
}
