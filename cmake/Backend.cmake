# Selects the device backend and provides apron_device_sources(), which marks sources that hold
# device code so they compile as CUDA in the cuda backend (and the kokkos backend on a Kokkos with
# the Cuda space) and as plain C++ otherwise.
add_library(apron_backend INTERFACE)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# The CUDA toolchain, for the cuda backend and for the kokkos backend on Kokkos' Cuda space: nvcc
# for the device sources (sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise), the toolkit's
# CCCL (CUB) and runtime, NCCL when present. APRON_DEVICE_CUDA tells the code that device memory
# is a CUDA GPU's (device selection, pinned staging, CUB, hand-tuned kernels). A macro, not a
# function: enable_language() must run at file scope.
macro(apron_enable_cuda)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  # CMake 3.25 predates nvcc's C++20 support: tell it the flag.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # The toolkit's own CCCL must win over Debian's older /usr/include/thrust (libthrust-dev).
  find_path(APRON_CCCL_INCLUDE thrust/version.h
    PATHS ${CUDAToolkit_INCLUDE_DIRS}/cccl ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH REQUIRED)
  target_include_directories(apron_backend SYSTEM BEFORE INTERFACE ${APRON_CCCL_INCLUDE})
  target_compile_definitions(apron_backend INTERFACE APRON_DEVICE_CUDA=1)
  # OpenMP::OpenMP_CXX turns OpenMP on for C++ sources only: without -fopenmp for nvcc's host
  # compiler, the host loops of sources compiled as CUDA (a cloud's split, checkpoint hashes)
  # would run on one thread.
  target_compile_options(apron_backend INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda --expt-relaxed-constexpr -Xcompiler=-fopenmp>)
  target_link_libraries(apron_backend INTERFACE CUDA::cudart)
  # NCCL (optional): halo messages go GPU to GPU over NVLink instead of through host memory.
  find_path(APRON_NCCL_INCLUDE nccl.h PATHS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include)
  find_library(APRON_NCCL_LIBRARY nccl PATHS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(APRON_NCCL_INCLUDE AND APRON_NCCL_LIBRARY)
    message(STATUS "apron: NCCL transport (${APRON_NCCL_LIBRARY})")
    target_compile_definitions(apron_backend INTERFACE APRON_HAVE_NCCL=1)
    target_include_directories(apron_backend SYSTEM INTERFACE ${APRON_NCCL_INCLUDE})
    target_link_libraries(apron_backend INTERFACE ${APRON_NCCL_LIBRARY})
  endif()
  set(APRON_CUDA_LANGUAGE ON)
endmacro()

set(APRON_CUDA_LANGUAGE OFF)
if(APRON_BACKEND STREQUAL "cuda")
  apron_enable_cuda()
  target_compile_definitions(apron_backend INTERFACE APRON_BACKEND_CUDA=1)
elseif(APRON_BACKEND STREQUAL "omp")
  # CCCL headers: from the CUDA toolkit when present, else from Debian's libthrust-dev.
  find_path(APRON_THRUST_INCLUDE thrust/version.h
    PATHS /usr/local/cuda/include/cccl /usr/local/cuda/include /usr/include
    NO_DEFAULT_PATH REQUIRED)
  message(STATUS "apron: OpenMP backend, Thrust from ${APRON_THRUST_INCLUDE}")
  target_include_directories(apron_backend SYSTEM INTERFACE ${APRON_THRUST_INCLUDE})
  target_compile_definitions(apron_backend INTERFACE
    APRON_BACKEND_OMP=1 THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP
    THRUST_HOST_SYSTEM=THRUST_HOST_SYSTEM_CPP)
elseif(APRON_BACKEND STREQUAL "kokkos")
  # Kokkos' default execution space runs the kernels; Kokkos::kokkos brings its headers and
  # libraries. APRON_KOKKOS_CUDA (cmake/Kokkos.cmake) picks the Cuda space, compiled as CMake's
  # CUDA language like the cuda backend.
  include(${CMAKE_CURRENT_LIST_DIR}/Kokkos.cmake)
  if(APRON_KOKKOS_CUDA)
    # Kokkos' Cuda space wants every source that includes Kokkos compiled as CUDA: those are the
    # device sources, as in the cuda backend (apron_device_sources below).
    apron_enable_cuda()
  endif()
  apron_find_kokkos()
  message(STATUS "apron: Kokkos backend")
  target_compile_definitions(apron_backend INTERFACE APRON_BACKEND_KOKKOS=1)
  target_link_libraries(apron_backend INTERFACE Kokkos::kokkos)
else()
  message(FATAL_ERROR "APRON_BACKEND must be 'omp', 'cuda' or 'kokkos', not '${APRON_BACKEND}'")
endif()
target_link_libraries(apron_backend INTERFACE OpenMP::OpenMP_CXX)

function(apron_device_sources)
  if(APRON_CUDA_LANGUAGE)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CUDA)
  endif()
endfunction()
