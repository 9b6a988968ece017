# opt/ckpt/tests.cmake - opt checkpoint tests (included from opt/tests.cmake): the CLI and DCP
# interop script, the shared reader rules (ckpt_readers), the ckpt_opt campaign under mpirun with 4 processes, and the CLI under mpirun.
if(TARGET reshard)
  add_test(NAME ckpt_opt COMMAND bash ${CMAKE_SOURCE_DIR}/tests/ckpt_opt.sh $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
  # the shared reader and writer rules of both implementations (links, FIFOs, step refusal,
  # malformed latest, empty prepended axes, one key namespace, ref load's linearity)
  add_test(NAME ckpt_readers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/ckpt_readers.sh $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
  set_tests_properties(ckpt_readers PROPERTIES TIMEOUT 300)
  get_property(RS_CKPT_MPIEXEC GLOBAL PROPERTY RS_OPT_MPIEXEC)
  if(RS_CKPT_MPIEXEC)
    add_test(NAME ckpt_opt_mpi_np4
             COMMAND ${RS_CKPT_MPIEXEC} --oversubscribe --allow-run-as-root -np 4 $<TARGET_FILE:reshard>
                     ckpt check --impl opt --transport mpi --seed 3 --cases 60 --quiet --regress-dir ckpt-opt-regressions)
    add_test(NAME ckpt_opt_mpi_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/ckpt_opt_mpi.sh ${RS_CKPT_MPIEXEC}
             $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
    set_tests_properties(ckpt_opt_mpi_np4 ckpt_opt_mpi_cli PROPERTIES TIMEOUT 300
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  endif()
endif()
