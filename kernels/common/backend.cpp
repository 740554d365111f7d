#include "kernels/common/backend.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#if defined(APRON_DEVICE_CUDA)
#include <sys/mman.h>
#endif
#if !defined(APRON_BACKEND_KOKKOS)
#include <thrust/memory.h>
#include <thrust/version.h>
#endif

// This source compiles as CUDA in the CUDA builds, like the workloads' sources whose host loops
// are OpenMP loops: where nvcc's host compiler lost -fopenmp (cmake/Backend.cmake), those loops
// would run on one thread without a word. The build stops here instead.
#if !defined(_OPENMP) && !defined(__CUDA_ARCH__)
#error "host code must compile with OpenMP on (nvcc: -Xcompiler=-fopenmp)"
#endif

namespace apron {
namespace {

struct Cache {
  std::mutex mutex;
  std::multimap<std::size_t, char*> free_blocks;  // size -> block
  std::map<char*, std::size_t> used_blocks;       // block -> size
  std::size_t cached_bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be returned during static teardown
  return *c;
}

#if defined(APRON_BACKEND_KOKKOS)
char* device_allocate(std::size_t bytes) {
  return static_cast<char*>(detail::device_malloc(bytes));
}
void device_free(char* p) {
  detail::device_free(p);
}
#else
char* device_allocate(std::size_t bytes) {
  // The OpenMP system's malloc returns null when memory runs out; CUDA's throws bad_alloc.
  char* block = thrust::raw_pointer_cast(thrust::malloc<char>(thrust::device, bytes));
  if (!block && bytes > 0) throw std::bad_alloc();
  return block;
}

void device_free(char* p) {
  thrust::free(thrust::device, thrust::device_pointer_cast(p));
}
#endif

}  // namespace

#if defined(APRON_BACKEND_KOKKOS)
void ensure_kokkos() {
  if (Kokkos::is_initialized()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    if (Kokkos::is_initialized() || Kokkos::is_finalized()) return;
    // Without Kokkos' advice on OMP_PROC_BIND, which would go to every rank's stderr.
    auto settings = Kokkos::InitializationSettings().set_disable_warnings(true);
#if defined(APRON_DEVICE_CUDA)
    // The GPU the runtime chose for this rank (runtime.cpp: local rank modulo the GPUs), not
    // Kokkos' own choice.
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess) settings.set_device_id(device);
#endif
    Kokkos::initialize(settings);
    std::atexit([] {
      if (Kokkos::is_initialized()) {
        scratch_allocator().release_all();
        Kokkos::finalize();
      }
    });
  });
}

namespace detail {
void* device_malloc(std::size_t bytes) {
  ensure_kokkos();
  try {
    return Kokkos::kokkos_malloc<DeviceMemorySpace>("apron", bytes);
  } catch (const std::runtime_error&) {
    // Kokkos reports a failed allocation as a runtime error ("... failed to allocate"); apron's
    // out-of-memory handling (src/runtime) knows std::bad_alloc.
    throw std::bad_alloc();
  }
}
void device_free(void* p) {
  // Arrays of objects that outlive the runtime (function statics) are left to the process' end.
  if (p && Kokkos::is_initialized()) Kokkos::kokkos_free<DeviceMemorySpace>(p);
}
}  // namespace detail
#endif

void stop_device_runtime() {
  scratch_allocator().release_all();
#if defined(APRON_BACKEND_KOKKOS)
  if (Kokkos::is_initialized()) Kokkos::finalize();
#endif
}

char* CachingAllocator::allocate(std::ptrdiff_t request) {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  const auto bytes = static_cast<std::size_t>(request);
  // Reuse the smallest cached block that fits and is at most twice as large.
  auto it = c.free_blocks.lower_bound(bytes);
  char* block = nullptr;
  std::size_t size = bytes;
  if (it != c.free_blocks.end() && it->first <= 2 * bytes + 4096) {
    size = it->first;
    block = it->second;
    c.free_blocks.erase(it);
  } else {
    block = device_allocate(bytes);
    c.cached_bytes += bytes;
  }
  c.used_blocks[block] = size;
  return block;
}

void CachingAllocator::deallocate(char* ptr, std::size_t) {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.used_blocks.find(ptr);
  c.free_blocks.emplace(it->second, ptr);
  c.used_blocks.erase(it);
}

void CachingAllocator::release_all() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, block] : c.free_blocks) {
    device_free(block);
    c.cached_bytes -= size;
  }
  c.free_blocks.clear();
}

std::size_t CachingAllocator::bytes_cached() const {
  return cache().cached_bytes;
}

CachingAllocator& scratch_allocator() {
  static CachingAllocator allocator;
  return allocator;
}

PinnedBuffer::~PinnedBuffer() {
  release();
}

void PinnedBuffer::release() {
#if defined(APRON_DEVICE_CUDA)
  if (registered_) {
    cudaHostUnregister(data_);
    std::free(data_);
  } else if (data_) {
    cudaFreeHost(data_);
  }
#else
  delete[] data_;
#endif
  data_ = nullptr;
  size_ = 0;
  registered_ = false;
}

#if defined(APRON_DEVICE_CUDA)
namespace {
// Large buffers on 2 MB pages, page-locked where they lie: cudaMallocHost locks 4 KB pages one by
// one (150 MB in 60-80 ms on an H200's host) and stalls the page faults of the process' other
// threads meanwhile; huge pages registered take about 10 ms (bench/NOTES.md). nullptr where
// that fails: the caller falls back to cudaMallocHost.
std::byte* huge_pages_locked(std::size_t& size) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20, kLeast = 16 * kHugePage;
  if (size < kLeast) return nullptr;
  size = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, size);
  if (p == nullptr) return nullptr;
  madvise(p, size, MADV_HUGEPAGE);  // advice: 4 KB pages still work where THP is off
  if (cudaHostRegister(p, size, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();  // cleared: the fallback does not fail for it
    std::free(p);
    return nullptr;
  }
  return static_cast<std::byte*>(p);
}
}  // namespace
#endif

void PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= size_) return;
  release();
  std::size_t size = bytes + bytes / 4;  // room to grow without a new allocation each time
#if defined(APRON_DEVICE_CUDA)
  data_ = huge_pages_locked(size);
  registered_ = data_ != nullptr;
  if (!registered_ && cudaMallocHost(reinterpret_cast<void**>(&data_), size) != cudaSuccess)
    throw std::runtime_error("cudaMallocHost of " + std::to_string(size) + " bytes failed");
#else
  data_ = new std::byte[size];
#endif
  size_ = size;
}

#if defined(__CUDACC__)
void check_launch(const char* what) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw std::runtime_error(std::string(what) +
                             ": kernel launch failed: " + cudaGetErrorString(e));
}
#endif

void device_synchronize() {
#if defined(APRON_BACKEND_KOKKOS)
  // On the Cuda space a global fence is a device synchronisation: it also waits for the CUB
  // calls and hand-tuned kernels, which run on the legacy default stream.
  if (Kokkos::is_initialized()) Kokkos::fence();
#elif defined(APRON_BACKEND_CUDA)
  // Not checked here (the phase timers call this from a destructor): a kernel fault is sticky,
  // and the next Thrust or CUB call reports it.
  cudaDeviceSynchronize();
#endif
}

std::string backend_libraries() {
#if defined(APRON_BACKEND_KOKKOS)
  ensure_kokkos();
  using Exec = Kokkos::DefaultExecutionSpace;
  return "Kokkos:    " + std::to_string(KOKKOS_VERSION_MAJOR) + "." +
         std::to_string(KOKKOS_VERSION_MINOR) + "." + std::to_string(KOKKOS_VERSION_PATCH) +
         ", execution space " + Exec::name() + " (concurrency " +
         std::to_string(Exec().concurrency()) + "), memory space " + DeviceMemorySpace::name() +
         "\n";
#else
  return "Thrust:    " + std::to_string(THRUST_MAJOR_VERSION) + "." +
         std::to_string(THRUST_MINOR_VERSION) + "." + std::to_string(THRUST_SUBMINOR_VERSION) +
         "\n";
#endif
}

const char* backend_name() {
#if defined(APRON_BACKEND_KOKKOS)
  return "kokkos";
#elif defined(APRON_BACKEND_CUDA)
  return "cuda";
#else
  return "omp";
#endif
}

}  // namespace apron
