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
