# Workloads as modules (ARCHITECTURE.md, "A run", 3): each built-in workload is src/<w>,
# kernels/<w> and tests/<w>, each with its own CMakeLists.txt, listed once in APRON_WORKLOADS (the
# top-level CMakeLists.txt). The registry's list of built-ins (src/workloads.cpp.in) is generated
# from what each src/<w>/CMakeLists.txt declares.

# Adds the calling folder's sources (relative paths) to `target`, compiled as CUDA where the
# backend asks for it (a source property set here must name the target's own folder).
function(apron_target_device_sources target)
  list(TRANSFORM ARGN PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ OUTPUT_VARIABLE files)
  target_sources(${target} PRIVATE ${files})
  if(APRON_CUDA_LANGUAGE)
    set_source_files_properties(${files} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CUDA)
  endif()
endfunction()

# apron_workload(NAME SPEC <namespace::function> HEADER <header declaring it>
#                SOURCES <plain C++> DEVICE_SOURCES <sources that hold device containers>)
# A library apron_<NAME> of the folder's host-side orchestration, and its registry entry.
function(apron_workload name)
  cmake_parse_arguments(W "" "SPEC;HEADER" "SOURCES;DEVICE_SOURCES" ${ARGN})
  add_library(apron_${name} STATIC ${W_SOURCES} ${W_DEVICE_SOURCES})
  apron_device_sources(${W_DEVICE_SOURCES})
  # The workload uses the engine (apron_core), whose registry lists it: a cycle CMake resolves
  # for static libraries by repeating them on the link line.
  target_link_libraries(apron_${name} PUBLIC apron_core PRIVATE apron_warnings)
  target_link_libraries(apron_core PUBLIC apron_${name})
  set_property(GLOBAL APPEND PROPERTY APRON_WORKLOAD_SPECS "${W_SPEC}")
  set_property(GLOBAL APPEND PROPERTY APRON_WORKLOAD_HEADERS "${W_HEADER}")
endfunction()
