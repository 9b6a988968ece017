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
include(${CMAKE_SOURCE_DIR}/opt/ckpt/tests.cmake)
