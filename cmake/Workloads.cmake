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
# Adds the folder's host-side orchestration to apron_core (one library: the registry that lists
# the workloads and the engine they build on link as one) and its registry entry.
function(apron_workload name)
  cmake_parse_arguments(W "" "SPEC;HEADER" "SOURCES;DEVICE_SOURCES" ${ARGN})
  list(TRANSFORM W_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  target_sources(apron_core PRIVATE ${W_SOURCES})
  apron_target_device_sources(apron_core ${W_DEVICE_SOURCES})
  set_property(GLOBAL APPEND PROPERTY APRON_WORKLOAD_SPECS "${W_SPEC}")
  set_property(GLOBAL APPEND PROPERTY APRON_WORKLOAD_HEADERS "${W_HEADER}")
endfunction()
