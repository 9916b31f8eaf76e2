# pcache-snapshot's test (storage/tool/). Included by tests/CMakeLists.txt;
# test_snapshot_tool.c is registered by the test_*.c glob there. It runs the
# built tool (its path compiled in), links the store to make and damage
# stores, and parses the tool's JSON with jansson (an independent parser).
if(TARGET test_snapshot_tool AND TARGET pcache-snapshot)
  pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
  target_link_libraries(test_snapshot_tool PRIVATE pcache_store PkgConfig::JANSSON)
  target_compile_definitions(test_snapshot_tool
                             PRIVATE PCACHE_SNAPSHOT_BIN="$<TARGET_FILE:pcache-snapshot>"
                                     PCACHE_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
  add_dependencies(test_snapshot_tool pcache-snapshot)
  set_tests_properties(test_snapshot_tool PROPERTIES LABELS "store;tool")
endif()
