# The service's load benchmark: cached POST /v1/plans from 64
# concurrent keep-alive connections on loopback. Not a test: run it by hand.
if(TARGET paratune_web)
  add_executable(serve_load_bench ${CMAKE_CURRENT_LIST_DIR}/serve_load_bench.cc)
  target_link_libraries(serve_load_bench PRIVATE paratune_web paratune_warnings)
endif()
