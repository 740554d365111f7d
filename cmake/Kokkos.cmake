# Kokkos for apron: apron_find_kokkos() makes the targets Kokkos::kokkos (and Kokkos::kokkoscore,
# Kokkos::kokkoscontainers) available.
#
# 1. A Kokkos >= 4.6 the user installed (Kokkos_ROOT or CMAKE_PREFIX_PATH) wins: it is built for
#    their machine and compiler, so apron should not build a second copy. Pass
#    -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON to skip it and build the pinned release instead.
# 2. Otherwise the pinned release (APRON_KOKKOS_VERSION) is built as part of apron's build through
#    FetchContent, with cmake/patches/kokkos-4.6.01-cuda13.patch applied: 4.6.01's CUDA backend
#    does not compile against CUDA 13's runtime API, and 4.6 is what apron targets. Only Kokkos'
#    core is built (no tests, examples or benchmarks); its install rules come along, so
#    `cmake --install` of the including project installs a usable Kokkos.
#
# Options:
#   APRON_KOKKOS_CUDA     also build/require the Cuda execution space (default: on when
#                         APRON_BACKEND is cuda). The OpenMP space is always on: it is apron's
#                         host space in both backends.
#   APRON_KOKKOS_TARBALL  a local copy of the release tarball, used instead of downloading it
#                         (machines without access to GitHub). Its SHA256 is checked.
include_guard(GLOBAL)
include(FetchContent)

set(APRON_KOKKOS_VERSION 4.6.01)
set(APRON_KOKKOS_SHA256 d8a8a5e15331c46b900d3f75d2b62b0b32f067b126a4a75d465224c899765084)
set(APRON_KOKKOS_URL
  "https://github.com/kokkos/kokkos/releases/download/${APRON_KOKKOS_VERSION}/kokkos-${APRON_KOKKOS_VERSION}.tar.gz")
# Captured here: inside the function CMAKE_CURRENT_LIST_DIR is the caller's directory.
set(_apron_kokkos_cmake_dir "${CMAKE_CURRENT_LIST_DIR}")

# The shared vendor directory sits next to the checkouts (<checkout>/../shared/vendor). Found
# relative to this file rather than to CMAKE_SOURCE_DIR, so a small project that includes this
# file from elsewhere in the tree (scripts/check-kokkos.sh does) finds it too.
set(_apron_kokkos_default_tarball "")
get_filename_component(_apron_vendor_tarball
  "${CMAKE_CURRENT_LIST_DIR}/../../shared/vendor/kokkos-${APRON_KOKKOS_VERSION}.tar.gz" ABSOLUTE)
if(EXISTS "${_apron_vendor_tarball}")
  set(_apron_kokkos_default_tarball "${_apron_vendor_tarball}")
endif()
set(APRON_KOKKOS_TARBALL "${_apron_kokkos_default_tarball}" CACHE FILEPATH
  "Local kokkos-${APRON_KOKKOS_VERSION}.tar.gz to build instead of downloading it (empty: download)")

if(DEFINED APRON_BACKEND AND APRON_BACKEND STREQUAL "cuda")
  set(_apron_kokkos_cuda_default ON)
else()
  set(_apron_kokkos_cuda_default OFF)
endif()
option(APRON_KOKKOS_CUDA "Kokkos with the Cuda execution space (sm_90)" ${_apron_kokkos_cuda_default})

function(apron_find_kokkos)
  find_package(Kokkos 4.6 CONFIG QUIET)
  if(Kokkos_FOUND)
    # An installed Kokkos has its backends fixed at its build; say so plainly rather than fail
    # later with missing Kokkos::Cuda symbols. RETURN_VALUE keeps Kokkos' own check quiet.
    set(devices OpenMP)
    if(APRON_KOKKOS_CUDA)
      list(APPEND devices Cuda)
    endif()
    kokkos_check(DEVICES ${devices} RETURN_VALUE has_devices)
    list(JOIN devices " and " devices)
    if(NOT has_devices)
      message(FATAL_ERROR "apron: the Kokkos at ${Kokkos_DIR} (${Kokkos_VERSION}) lacks one of "
        "the execution spaces apron needs (${devices}). Point Kokkos_ROOT at one that has them, "
        "or pass -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON to build Kokkos ${APRON_KOKKOS_VERSION} "
        "here.")
    endif()
    if(NOT APRON_KOKKOS_CUDA)
      # A Kokkos with the Cuda space makes Cuda the default execution space and wants every source
      # that includes it compiled for the GPU; apron's omp backend compiles them as plain C++.
      kokkos_check(DEVICES Cuda RETURN_VALUE has_cuda)
      if(has_cuda)
        message(FATAL_ERROR "apron: the Kokkos at ${Kokkos_DIR} has the Cuda space, which the omp "
          "backend cannot use. Configure with APRON_BACKEND=cuda, point Kokkos_ROOT at a "
          "host-only Kokkos, or pass -DCMAKE_DISABLE_FIND_PACKAGE_Kokkos=ON.")
      endif()
    elseif(NOT Kokkos_COMPILE_LANGUAGE STREQUAL "CUDA")
      # Tested here is only a Kokkos compiled as CMake's CUDA language, the way apron's own device
      # sources are; one built with nvcc_wrapper installs a compiler launcher for all C++ sources.
      message(WARNING "apron: the Kokkos at ${Kokkos_DIR} was compiled as "
        "${Kokkos_COMPILE_LANGUAGE} (nvcc_wrapper?), not as CUDA; apron is tested with "
        "Kokkos_ENABLE_COMPILE_AS_CMAKE_LANGUAGE=ON only.")
    endif()
    message(STATUS "apron: Kokkos ${Kokkos_VERSION} from ${Kokkos_DIR} (${devices})")
    return()
  endif()

  if(APRON_KOKKOS_TARBALL)
    if(NOT EXISTS "${APRON_KOKKOS_TARBALL}")
      message(FATAL_ERROR "apron: APRON_KOKKOS_TARBALL=${APRON_KOKKOS_TARBALL} does not exist")
    endif()
    # Checked here as well as by FetchContent: its own mismatch error is buried in a sub-build log.
    file(SHA256 "${APRON_KOKKOS_TARBALL}" actual)
    if(NOT actual STREQUAL APRON_KOKKOS_SHA256)
      message(FATAL_ERROR "apron: ${APRON_KOKKOS_TARBALL} is not the Kokkos "
        "${APRON_KOKKOS_VERSION} release tarball: its SHA256 is ${actual}, expected "
        "${APRON_KOKKOS_SHA256}")
    endif()
    set(url "${APRON_KOKKOS_TARBALL}")
  else()
    set(url "${APRON_KOKKOS_URL}")
  endif()
  message(STATUS "apron: building Kokkos ${APRON_KOKKOS_VERSION} from ${url}")

  # Kokkos reads its options from the cache. Backend choices follow APRON_KOKKOS_CUDA (FORCE: a
  # later reconfigure that flips it must reach Kokkos); the rest are defaults the user may override.
  set(Kokkos_ENABLE_TESTS OFF CACHE BOOL "Kokkos' own tests (apron: off)")
  set(Kokkos_ENABLE_EXAMPLES OFF CACHE BOOL "Kokkos' examples (apron: off)")
  set(Kokkos_ENABLE_BENCHMARKS OFF CACHE BOOL "Kokkos' benchmarks (apron: off)")
  set(Kokkos_ENABLE_OPENMP ON CACHE BOOL "Kokkos OpenMP execution space (apron: on)" FORCE)
  if(APRON_KOKKOS_CUDA)
    set(Kokkos_ENABLE_CUDA ON CACHE BOOL "Kokkos Cuda execution space (APRON_KOKKOS_CUDA)" FORCE)
    # Compile Kokkos' sources as CMake's CUDA language with nvcc itself, the way apron compiles
    # its device sources (cmake/Backend.cmake). The alternative, Kokkos' nvcc_wrapper as the C++
    # compiler, defaults to sm_70, which CUDA 13 dropped.
    set(Kokkos_ENABLE_COMPILE_AS_CMAKE_LANGUAGE ON CACHE BOOL
      "Kokkos compiled as CMake's CUDA language (apron: on)" FORCE)
    # apron's CUDA backend targets sm_90 only (cmake/Backend.cmake).
    set(Kokkos_ARCH_HOPPER90 ON CACHE BOOL "Kokkos for sm_90 (apron: on)" FORCE)
    # Kokkos would enable CUDA itself, in its own directory, and then find that CMake 3.25 knows
    # no nvcc flag for C++20 ("requires the language dialect CUDA20"). cmake/Backend.cmake
    # enables CUDA at file scope with that flag supplied; Kokkos' directory inherits it.
    get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "CUDA" IN_LIST languages)
      message(FATAL_ERROR "apron: APRON_KOKKOS_CUDA needs the CUDA language enabled before "
        "apron_find_kokkos(): call apron_enable_cuda() (cmake/Backend.cmake) first")
    endif()
  else()
    set(Kokkos_ENABLE_CUDA OFF CACHE BOOL "Kokkos Cuda execution space (APRON_KOKKOS_CUDA)" FORCE)
  endif()

  # SYSTEM: Kokkos' headers as system headers for apron's targets, as they are when Kokkos comes
  # from an install (imported targets), so apron's -Werror judges apron's code, not Kokkos'.
  # First: CMake 3.25 would read it after URL_HASH as part of the hash.
  FetchContent_Declare(Kokkos SYSTEM
    URL "${url}"
    URL_HASH SHA256=${APRON_KOKKOS_SHA256}
    # Timestamps of extraction time: a changed tarball rebuilds what it changed (policy CMP0135).
    DOWNLOAD_EXTRACT_TIMESTAMP FALSE
    PATCH_COMMAND "${CMAKE_COMMAND}"
      -DPATCH_FILE=${_apron_kokkos_cmake_dir}/patches/kokkos-${APRON_KOKKOS_VERSION}-cuda13.patch
      -P "${_apron_kokkos_cmake_dir}/apply-patch.cmake")
  FetchContent_MakeAvailable(Kokkos)
endfunction()
