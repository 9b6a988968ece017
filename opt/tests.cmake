# opt/tests.cmake - opt's multi-process tests (include()d from tests/CMakeLists.txt after the
# test_* targets exist): test_opt_mpi under mpirun with 4 ranks. Open MPI refuses root unless told.
get_property(RS_OPT_MPIEXEC GLOBAL PROPERTY RS_OPT_MPIEXEC)
if(TARGET test_opt_mpi AND RS_OPT_MPIEXEC)
  add_test(NAME test_opt_mpi_np4
           COMMAND ${RS_OPT_MPIEXEC} --oversubscribe --allow-run-as-root -np 4
                   $<TARGET_FILE:test_opt_mpi> ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_opt_mpi_np4 PROPERTIES TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
# the MPI transport's single-copy path (RS_MPI_CMA_MIN=0: every message between node peers takes it;
# where process_vm_readv is not permitted the transport falls back and this runs the pack path)
if(TARGET reshard AND RS_OPT_MPIEXEC)
  add_test(NAME opt_mpi_cma_np4
           COMMAND ${RS_OPT_MPIEXEC} --oversubscribe --allow-run-as-root -np 4 $<TARGET_FILE:reshard> check
                   --impl opt --transport mpi --cases 300 --quiet)
  set_tests_properties(opt_mpi_cma_np4 PROPERTIES TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;RS_MPI_CMA_MIN=0")
endif()
# no hang on a stalled or dead peer: a plug-in that never returns, a rank stopped and a rank killed
# under mpirun; every survivor exits 4 within --timeout (tests/peer_timeout.sh)
add_library(stall_copy_plugin MODULE ${CMAKE_SOURCE_DIR}/tests/stall_copy_plugin.c)
# ("mpi" in the name: the ASan build runs it without leak checks, like every MPI test). Sanitizer and
# coverage builds run one MPI scenario of the three (CI runs ctest in all three builds).
if(TARGET reshard)
  add_test(NAME peer_timeout_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/peer_timeout.sh $<TARGET_FILE:reshard>
           ${CMAKE_SOURCE_DIR}/fixtures/p2p $<TARGET_FILE:stall_copy_plugin> ${RS_OPT_MPIEXEC})
  set(RS_PEER_TIMEOUT_SCENARIOS "check-stall check-dead p2p-stall")
  if(RS_SANITIZE OR RS_COVERAGE)
    set(RS_PEER_TIMEOUT_SCENARIOS "check-dead")
  endif()
  set_tests_properties(peer_timeout_mpi PROPERTIES TIMEOUT 600
    ENVIRONMENT "RS_PEER_TIMEOUT_SCENARIOS=${RS_PEER_TIMEOUT_SCENARIOS}")
endif()
# out of memory on one MPI process is exit 3 on every process at once (tests/peer_oom.sh; "mpi" in
# the name: the ASan build runs it without leak checks, and the script skips itself under a sanitizer)
if(TARGET reshard AND RS_OPT_MPIEXEC)
  add_test(NAME peer_oom_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/peer_oom.sh $<TARGET_FILE:reshard>)
  set_tests_properties(peer_oom_mpi PROPERTIES TIMEOUT 300)
endif()
# opt's streaming and slab copy paths (thresholds lowered by RS_OPT_COPY_PATHS=small) on a short
# generated campaign; ci/test.sh runs a longer one
if(TARGET reshard)
  add_test(NAME opt_copy_paths COMMAND bash ${CMAKE_SOURCE_DIR}/tests/opt_copy_paths.sh $<TARGET_FILE:reshard>)
  set_tests_properties(opt_copy_paths PROPERTIES TIMEOUT 300 ENVIRONMENT "RS_COPY_PATHS_CASES=300")
endif()
include(${CMAKE_SOURCE_DIR}/opt/ckpt/tests.cmake)
