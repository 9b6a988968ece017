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
# cli_gen: the generator's options on the CLI (gen and check) narrow what is generated, coverage
# is judged against the options, bad values exit 2.
if(TARGET reshard)
  add_test(NAME cli_gen COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_gen.sh $<TARGET_FILE:reshard>)
endif()
