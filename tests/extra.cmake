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
# cli_hostile: overflowing and malformed CLI/JSON input, typed "expected", exit 3, run --json, replay impl.
if(TARGET reshard)
  add_test(NAME cli_hostile COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_hostile.sh $<TARGET_FILE:reshard>)
endif()
# cli_enumeration: --enumeration seed|pytorch on run/plan, the PyTorch-recorded enum_pytorch_* fixtures.
if(TARGET reshard)
  add_test(NAME cli_enumeration COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_enumeration.sh
           $<TARGET_FILE:reshard> ${CMAKE_SOURCE_DIR})
endif()
# replay_opt_failure: a failure saved by an opt campaign (planted opt bug 105) fails again on replay
# (mutation builds only; exit 77 = skipped elsewhere).
if(TARGET reshard)
  add_test(NAME replay_opt_failure COMMAND bash ${CMAKE_SOURCE_DIR}/tests/replay_opt_failure.sh
           $<TARGET_FILE:reshard>)
  set_tests_properties(replay_opt_failure PROPERTIES SKIP_RETURN_CODE 77)
endif()
