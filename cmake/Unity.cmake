# Unity builds for the libraries.
#
# Each library compiles its sources as one translation unit (CMake's
# UNITY_BUILD): the templates every file instantiates (nlohmann/json, the
# standard containers and formatting) are instantiated and optimised once per
# library rather than once per file. On the project's 2-core machine building
# `paratune` from clean took 420 CPU-seconds against 726 (README). The price
# is incremental: a change to one file recompiles its whole library.
# `-DPARATUNE_UNITY=OFF` compiles file by file, as a developer iterating on
# one library may prefer; `PARATUNE_UNITY_BATCH` sets how many sources share
# a translation unit (0: all of a library's).
#
# Sources share a translation unit, so file-local names (anonymous namespaces)
# must be distinct across a library; a file whose local names follow a
# pattern shared with its siblings on purpose is excluded with
# SKIP_UNITY_BUILD_INCLUSION where it is listed (frameworks/ and backend/CMakeLists.txt).
option(PARATUNE_UNITY "Compile each library's sources as one translation unit" ON)
set(PARATUNE_UNITY_BATCH 0 CACHE STRING "Sources per unity translation unit (0: all of a library's)")

# paratune_unity(<target>...)
function(paratune_unity)
  if(NOT PARATUNE_UNITY)
    return()
  endif()
  foreach(target ${ARGN})
    if(TARGET ${target})
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                            UNITY_BUILD_BATCH_SIZE ${PARATUNE_UNITY_BATCH})
    endif()
  endforeach()
endfunction()
