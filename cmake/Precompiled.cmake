# Precompiled headers for the libraries and test programs.
#
# Every translation unit includes common/json.h, so every one parsed
# nlohmann/json (about 2.6 s of GCC's front end on the project's 2-core
# machine) and the standard headers around it (about 0.9 s); GoogleTest adds
# its own to each test file. Precompiling them for all the libraries (once
# with -fpic and once without) and once for all the test programs takes that
# parse out of every library unit and test compile. Only third-party and
# standard headers are listed: no project header, so a file that forgets an
# include of ours still fails to compile, and a change to a project header
# does not invalidate the precompiled one.
# `-DPARATUNE_PCH=OFF` compiles without them (every file still includes what
# it uses).
option(PARATUNE_PCH "Precompile the third-party and standard headers" ON)

set(PARATUNE_PCH_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PARATUNE_PCH_HEADERS ${PARATUNE_PCH_DIR}/precompiled.h)
set(PARATUNE_PCH_TEST_HEADERS ${PARATUNE_PCH_HEADERS} ${PARATUNE_PCH_DIR}/precompiled_test.h)

# Under a precompiled header GCC's middle-end warnings report libstdc++'s own
# false positives once std::string's operator+ or copy is inlined into our
# code (-Warray-bounds, -Wstringop-overread on char_traits::copy's memcpy),
# which the same code reading the headers from /usr/include does not: the
# same report under CMake's cmake_pch.hxx with GCC 13 is canonical/mir#2987,
# under an -include'd StdAfx.h with GCC 12 micmacIGN/micmac#236. These four
# are off for precompiled targets on GCC; the sanitizer tier, which checks
# bounds at run time, and -DPARATUNE_PCH=OFF builds keep them.
set(PARATUNE_PCH_GCC_QUIET)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(PARATUNE_PCH_GCC_QUIET -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread
      -Wno-restrict)
endif()

# paratune_precompile(<target>...): the libraries share two precompiled
# headers, built once each by the targets paratune_pch and paratune_pch_pic:
# GCC refuses a header made under another -fpic setting, and the libraries
# that backend modules load are position-independent. What else differs
# between the libraries' flags does not matter to GCC's check: include paths,
# and definitions the listed headers never name (BOOST_ALL_NO_LIB,
# PARATUNE_VERSION, PARATUNE_BACKEND_*). Fourteen headers of about 6 s each
# became two. A header GCC refuses is a warning (-Winvalid-pch, which CMake
# adds), an error under PARATUNE_WERROR: CI's build fails rather than slowly
# parsing the headers again.
function(paratune_precompile)
  if(NOT PARATUNE_PCH)
    return()
  endif()
  add_library(paratune_pch OBJECT ${PARATUNE_PCH_DIR}/precompiled.cc)
  add_library(paratune_pch_pic OBJECT ${PARATUNE_PCH_DIR}/precompiled.cc)
  set_target_properties(paratune_pch_pic PROPERTIES POSITION_INDEPENDENT_CODE ON)
  foreach(owner paratune_pch paratune_pch_pic)
    target_link_libraries(${owner} PRIVATE nlohmann_json::nlohmann_json paratune_warnings)
    target_compile_options(${owner} PRIVATE ${PARATUNE_PCH_GCC_QUIET})
    target_precompile_headers(${owner} PRIVATE ${PARATUNE_PCH_HEADERS})
  endforeach()
  foreach(target ${ARGN})
    if(TARGET ${target})
      get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
      set(owner paratune_pch)
      if(pic)
        set(owner paratune_pch_pic)
      endif()
      target_compile_options(${target} PRIVATE ${PARATUNE_PCH_GCC_QUIET})
      target_precompile_headers(${target} REUSE_FROM ${owner})
    endif()
  endforeach()
endfunction()

# paratune_add_test_pch(): the target that builds the test programs' one
# precompiled header (GoogleTest's on top of the libraries' list). Call it
# where the test programs' compile options are set, so it compiles as they
# do. It defines nothing of its own: GCC refuses a precompiled header in a
# file that lacks a macro the header was built with, and the test programs
# differ in theirs (PARATUNE_SHARED_DIR, PARATUNE_BINARY, ...).
function(paratune_add_test_pch)
  if(NOT PARATUNE_PCH)
    return()
  endif()
  add_library(paratune_test_pch OBJECT ${PARATUNE_PCH_DIR}/precompiled_test.cc)
  target_link_libraries(paratune_test_pch PRIVATE GTest::gtest nlohmann_json::nlohmann_json
                        paratune_warnings)
  target_compile_options(paratune_test_pch PRIVATE ${PARATUNE_PCH_GCC_QUIET})
  target_precompile_headers(paratune_test_pch PRIVATE ${PARATUNE_PCH_TEST_HEADERS})
endfunction()

# paratune_precompile_test(<target>): a test program reuses that header.
function(paratune_precompile_test target)
  if(NOT PARATUNE_PCH)
    return()
  endif()
  target_compile_options(${target} PRIVATE ${PARATUNE_PCH_GCC_QUIET})
  target_precompile_headers(${target} REUSE_FROM paratune_test_pch)
endfunction()
