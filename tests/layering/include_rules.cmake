# cmake -DSOURCE_DIR=<repo> -P include_rules.cmake
# Fails (exit status non-zero) naming every file whose project include
# ("<module>/...") reaches a module its own module may not depend on
# (docs/architecture.md, "Modules"). Lower modules never include upper ones:
# planner/ knows nothing of the frameworks it emits for, the elastic
# re-planner, the validation suites, the executor or the entry points.
cmake_minimum_required(VERSION 3.24)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "include_rules: pass -DSOURCE_DIR=<repository root>")
endif()

# module -> modules it may include besides itself. web/, cli/, tests/ and
# bench/ may include everything and are not checked.
set(allowed_common "")
set(allowed_topology common)
set(allowed_backend common)
set(allowed_profiler common topology backend)
set(allowed_planner common topology)
set(allowed_scenario common topology planner)
set(allowed_frameworks common topology planner)
set(allowed_elastic common topology planner scenario)
set(allowed_validation common topology planner scenario frameworks)
set(allowed_executor common topology backend planner)
set(modules common topology backend profiler planner scenario frameworks elastic validation executor web cli)

set(violations "")
foreach(module common topology backend profiler planner scenario frameworks elastic validation executor)
  file(GLOB_RECURSE sources LIST_DIRECTORIES false
       ${SOURCE_DIR}/${module}/*.h ${SOURCE_DIR}/${module}/*.cc ${SOURCE_DIR}/${module}/*.cu)
  foreach(src ${sources})
    file(STRINGS ${src} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][a-z_]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([a-z_]+)/.*$" "\\1" target "${line}")
      if(target STREQUAL module OR NOT target IN_LIST modules)
        continue()  # its own module, or a system/third-party header
      endif()
      if(NOT target IN_LIST allowed_${module})
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${src})
        string(STRIP "${line}" line)
        list(APPEND violations "${rel}: ${line} (${module}/ may include only: ${allowed_${module}})")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "include_rules: includes against docs/architecture.md:\n  ${text}")
endif()
message(STATUS "include_rules: every module includes only what it may depend on")
