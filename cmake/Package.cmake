# The relocatable package: `cmake --build build --target package`
# makes paratune-VERSION-Linux-x86_64.tar.gz holding
#   bin/paratune                    links the base C/C++ runtime only
#   lib/paratune/paratune_backend_{cuda,mpi}.so   the backend modules
#   lib/*.so*                       every library the modules need that is
#                                   neither the base C/C++ runtime nor part of
#                                   the CUDA driver, toolkit or NCCL (the GPU
#                                   node's own): Open MPI's and what it pulls in
# reached through RPATH $ORIGIN/../lib (bin) and $ORIGIN/.. (modules).
include(GNUInstallDirs)
set_target_properties(paratune PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
install(TARGETS paratune RUNTIME DESTINATION bin)
get_property(paratune_modules GLOBAL PROPERTY PARATUNE_BACKEND_MODULES)
foreach(m ${paratune_modules})
  install(TARGETS ${m} LIBRARY DESTINATION lib/paratune)
endforeach()

# The libraries to bundle are resolved at install time from the installed
# files themselves (cmake/BundleLibs.cmake).
set(module_files "")
foreach(m ${paratune_modules})
  list(APPEND module_files "$<TARGET_FILE_NAME:${m}>")
endforeach()
install(CODE "
  set(PARATUNE_BUNDLE_MODULES \"${module_files}\")
  set(PARATUNE_BUNDLE_DIRS \"${CUDAToolkit_LIBRARY_DIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/BundleLibs.cmake\")
")

set(CPACK_GENERATOR TGZ)
set(CPACK_PACKAGE_NAME paratune)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_SYSTEM_NAME Linux-x86_64)
set(CPACK_PACKAGE_FILE_NAME paratune-${PROJECT_VERSION}-Linux-x86_64)
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
set(CPACK_STRIP_FILES OFF)
include(CPack)
