# extra.cmake - per-test link needs beyond the library (included by tests/CMakeLists.txt).
# test_fixtures, test_tp_fixtures and test_pytorch_order read the recorded PyTorch corpora
# (fixtures/pytorch, fixtures/tp, fixtures/pytorch_order: *.jsonl.gz) with one reader (tests/jsonl.c)
# over zlib.
foreach(t test_fixtures test_tp_fixtures test_pytorch_order)
  target_sources(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/jsonl.c)
  target_link_libraries(${t} PRIVATE z)
endforeach()
# cli_forms: the stable forms of the reshard CLI (exact JSON, exit codes, run/replay/gen/check).
if(TARGET reshard)
  add_test(NAME cli_forms COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_forms.sh $<TARGET_FILE:reshard>)
endif()
# regressions: every saved shrunk failure in fixtures/regressions must pass.
if(TARGET reshard)
  add_test(NAME regressions COMMAND bash ${CMAKE_SOURCE_DIR}/tests/replay_regressions.sh
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR}/fixtures/regressions)
endif()
# standalone: the repository stands alone (no pointers outside the checkout, no numbered source
# documents) and docs/contract.md has sections 1-12 (the "SPEC n" that comments cite).
add_test(NAME standalone COMMAND bash ${CMAKE_SOURCE_DIR}/tests/standalone.sh ${CMAKE_SOURCE_DIR})
# (label "source": it reads only the source tree, so ci/test.sh runs it in the release tree alone and
# the sanitizer, coverage and build-matrix trees skip it with -LE source)
set_tests_properties(standalone PROPERTIES LABELS source)
# layers: ref, opt and the oracle share only core/ (no symbol of one used by another)
add_test(NAME layers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layers.sh ${CMAKE_BINARY_DIR})
# cli_hostile: overflowing and malformed CLI/JSON input, typed "expected", exit 3, run --json, replay impl.
if(TARGET reshard)
  add_test(NAME cli_hostile COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_hostile.sh $<TARGET_FILE:reshard>)
endif()
# cli_enumeration: --enumeration seed|pytorch on run/plan, the PyTorch-recorded enum_pytorch_* fixtures.
if(TARGET reshard)
  add_test(NAME cli_enumeration COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_enumeration.sh
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
endif()
# bench_pytorch: bench pytorch's recorded fallback, its --python errors and its live path (a stand-in planner)
if(TARGET reshard AND TARGET rs_bench)
  add_test(NAME bench_pytorch COMMAND bash ${CMAKE_SOURCE_DIR}/tests/bench_pytorch.sh
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
endif()
# replay_opt_failure: a failure saved by an opt campaign (planted opt bug 105) fails again on replay
# (mutation builds only; exit 77 = skipped elsewhere).
if(TARGET reshard)
  add_test(NAME replay_opt_failure COMMAND bash ${CMAKE_SOURCE_DIR}/tests/replay_opt_failure.sh
           $<TARGET_FILE:reshard>)
  set_tests_properties(replay_opt_failure PROPERTIES SKIP_RETURN_CODE 77)
endif()
# ---- ckpt (distributed checkpoints) ----
# ckpt_cli: the stable forms and exit codes of `reshard ckpt ...`; ckpt_torture: 100 saves killed
# with SIGKILL at random moments, `latest` must always load correctly (torn = 0).
if(TARGET reshard)
  add_test(NAME ckpt_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/ckpt_cli.sh $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
  add_test(NAME ckpt_torture COMMAND $<TARGET_FILE:reshard> ckpt torture --kills 100 --seed 1)
endif()
# ckpt_interop: data files and the export read by the safetensors Python package; only when
# -DRS_CKPT_PYTHON=<python with numpy and safetensors> is given (ci/test.sh runs it directly).
if(TARGET reshard AND RS_CKPT_PYTHON)
  add_test(NAME ckpt_interop COMMAND bash ${CMAKE_SOURCE_DIR}/tests/ckpt_interop.sh $<TARGET_FILE:reshard>
           ${CMAKE_SOURCE_DIR} ${RS_CKPT_PYTHON})
endif()

# ---- cross-config resharding (reshard p2p) ----
# The example copy-service plug-in (plain C ABI of reshard/copy_service.h), loaded with dlopen.
add_library(p2p_copy_plugin MODULE ${CMAKE_SOURCE_DIR}/tests/p2p_copy_plugin.c)
# one of another ABI version, which every verb refuses before it runs anything (cli_hostile.sh)
add_library(p2p_plugin_wrong_abi MODULE ${CMAKE_SOURCE_DIR}/tests/p2p_plugin_wrong_abi.c)
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

# ---- tp (tensor-parallel styles) ----
# tp_cli: the stable forms of `reshard tp` (exit codes, exact JSON, gen -> run, check reports).
if(TARGET reshard)
  add_test(NAME tp_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tp_cli.sh $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
endif()
# cli_gen: the generator's options on the CLI (gen and check) narrow what is generated, coverage
# is judged against the options, bad values exit 2.
if(TARGET reshard)
  add_test(NAME cli_gen COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_gen.sh $<TARGET_FILE:reshard>)
endif()

# ---- reports people read ----
# reports: JUnit XML read by junitparser and the --report HTML pages screenshotted by headless
# Chromium (a passing campaign, report_demo's failing one and, in mutation builds, a planted bug).
add_executable(report_demo ${CMAKE_SOURCE_DIR}/tests/report_demo.c)
target_link_libraries(report_demo PRIVATE rs_props)
# Under ASan+UBSan it runs without the browser (the writers are checked, the pages are the same).
if(TARGET reshard)
  set(RS_REPORTS_BROWSER browser)
  if(RS_SANITIZE)
    set(RS_REPORTS_BROWSER nobrowser)
  endif()
  add_test(NAME reports COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reports.sh $<TARGET_FILE:reshard>
           $<TARGET_FILE:report_demo> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/reports-venv ${RS_REPORTS_BROWSER})
  set_tests_properties(reports PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# report_flags: every campaign verb (check, p2p/tp/ckpt check under each impl, conform, fuzz-planner
# of both kinds) with each report flag its --help lists; the files are read back.
if(TARGET reshard)
  add_test(NAME report_flags COMMAND bash ${CMAKE_SOURCE_DIR}/tests/report_flags.sh $<TARGET_FILE:reshard>)
  set_tests_properties(report_flags PROPERTIES TIMEOUT 300)
endif()
# install: `cmake --install` into a temporary prefix; an outside program built against it with
# find_package(reshard) and with pkg-config; an outside backend plug-in held to `reshard conform`.
add_test(NAME install COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(install PROPERTIES TIMEOUT 300)
# ---- conform (reshard conform: other backends, docs/conformance.md) ----
# opt wrapped as a backend plug-in (its options plant bugs), the same plug-in served as a separate
# program over the process protocol, and the script that runs every example against them.
# conform_opt_plugin_v1: the same plug-in saying the struct_size of the header before p2p_flags
# (an ABI-1 plug-in built against the older struct). A plan given to either is read with conform's
# one transfers reader (conform/p2p_transfers.c, compiled in: a plug-in links no rs_conform).
if(TARGET rs_opt AND TARGET rs_conform AND TARGET reshard)
  foreach(v conform_opt_plugin conform_opt_plugin_v1)
    add_library(${v} MODULE ${CMAKE_SOURCE_DIR}/tests/conform_opt_plugin.c
                ${CMAKE_SOURCE_DIR}/conform/p2p_transfers.c)
    # rs_ref: opt/ckpt names strict modes with rs_strict_name, which lives in ref/ckpt
    target_link_libraries(${v} PRIVATE rs_opt rs_ref)
  endforeach()
  target_compile_definitions(conform_opt_plugin_v1 PRIVATE RS_CONFORM_PLUGIN_V1=1)
  add_executable(conform_serve_child ${CMAKE_SOURCE_DIR}/tests/conform_serve_child.c
                 ${CMAKE_SOURCE_DIR}/tests/conform_opt_plugin.c)
  target_link_libraries(conform_serve_child PRIVATE rs_conform rs_opt)
  add_test(NAME conform COMMAND bash ${CMAKE_SOURCE_DIR}/tests/conform.sh $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
  set_tests_properties(conform PROPERTIES TIMEOUT 300)
endif()

# ---- planner plug-ins (reshard fuzz-planner, docs/conformance.md "Planner fuzzing") ----
# tests/planner_plugin.c built once per mode: ref's greedy and graph planners and opt's P2P planner
# wrapped as plug-ins (must pass), a planted-bug planner, an illegal-plan planner and a planner
# that gathers where PyTorch zero-fills (must be caught).
set(RS_PLANNER_PLUGINS greedy graph opt_p2p bug illegal gather)
foreach(mode RANGE 1 6)
  math(EXPR idx "${mode} - 1")
  list(GET RS_PLANNER_PLUGINS ${idx} name)
  add_library(planner_${name} MODULE ${CMAKE_SOURCE_DIR}/tests/planner_plugin.c
              ${CMAKE_SOURCE_DIR}/opt/p2p/plan.c)
  target_compile_definitions(planner_${name} PRIVATE PLANNER_MODE=${mode})
  target_include_directories(planner_${name} PRIVATE ${CMAKE_SOURCE_DIR}/opt)
  target_link_libraries(planner_${name} PRIVATE rs_ref)
endforeach()
if(TARGET reshard)
  add_test(NAME fuzz_planner COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fuzz_planner.sh $<TARGET_FILE:reshard>
           ${CMAKE_SOURCE_DIR})
  set_tests_properties(fuzz_planner PROPERTIES TIMEOUT 300)
endif()
# p2p_mcore_ranks: the P2P template expansion against Megatron-Core's own RankGenerator (the python
# in RS_MCORE_PYTHON, default python3); skipped (77) where megatron-core does not import.
if(TARGET reshard)
  add_test(NAME p2p_mcore_ranks COMMAND bash ${CMAKE_SOURCE_DIR}/tests/p2p_mcore_ranks.sh $<TARGET_FILE:reshard>)
  set_tests_properties(p2p_mcore_ranks PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
# ckpt_py_reader: the C readers' flip and hostile suites through the Python reader of the
# reshard-dcp package (tools/pytorch/reshard_dcp; numpy and xxhash, no torch) in RS_TORCH_PYTHON
# (default python3); 77 = skipped where they do not import. ci/dcp_interop.sh adds dcp.load.
if(TARGET reshard)
  add_test(NAME ckpt_py_reader COMMAND sh -c "exec \"\${RS_TORCH_PYTHON:-python3}\" \"$1/tests/ckpt_py_reader.py\" \"$0\" \"$1\" --flips 100"
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
  set_tests_properties(ckpt_py_reader PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
