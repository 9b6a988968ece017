# extra.cmake - per-test link needs beyond the library (included by tests/CMakeLists.txt).
# test_fixtures reads the recorded PyTorch corpus (fixtures/pytorch/*.jsonl.gz) with zlib.
target_link_libraries(test_fixtures PRIVATE z)
# cli_forms: the stable forms of the reshard CLI (exact JSON, exit codes, run/replay/gen/check).
if(TARGET reshard)
  add_test(NAME cli_forms COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_forms.sh $<TARGET_FILE:reshard>)
endif()
# regressions: every saved shrunk failure in fixtures/regressions must pass.
if(TARGET reshard)
  add_test(NAME regressions COMMAND bash ${CMAKE_SOURCE_DIR}/tests/replay_regressions.sh
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR}/fixtures/regressions)
endif()

# ---- cross-config resharding (reshard p2p) ----
# The example copy-service plug-in (plain C ABI of reshard/copy_service.h), loaded with dlopen.
add_library(p2p_copy_plugin MODULE ${CMAKE_SOURCE_DIR}/tests/p2p_copy_plugin.c)
if(TARGET reshard)
  # hand-made models (Megatron templates, explicit layouts) with ref, opt and the example plug-in,
  # the saved shrunk failures, and the CLI's stable forms and exit codes
  add_test(NAME p2p_fixtures COMMAND bash ${CMAKE_SOURCE_DIR}/tests/p2p_fixtures.sh $<TARGET_FILE:reshard>
           ${CMAKE_SOURCE_DIR}/fixtures/p2p $<TARGET_FILE:p2p_copy_plugin>)
  get_property(RS_P2P_MPIEXEC GLOBAL PROPERTY RS_OPT_MPIEXEC)
  if(RS_P2P_MPIEXEC)
    add_test(NAME p2p_mpi_np4
             COMMAND ${RS_P2P_MPIEXEC} --oversubscribe --allow-run-as-root -np 4 $<TARGET_FILE:reshard>
                     p2p check --impl opt --transport mpi --seed 21 --cases 300 --quiet)
    set_tests_properties(p2p_mpi_np4 PROPERTIES TIMEOUT 300
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  endif()
endif()
