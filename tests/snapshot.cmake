# pcache-snapshot's tests (src/tools/snapshot/). Included by tests/CMakeLists.txt;
# test_snapshot_*.c are registered by the test_*.c glob there. They run the
# built tool (its path compiled in), share snapshot_testlib.c (running the
# tool, making and comparing stores), and parse the tool's JSON with
# jansson (an independent parser).
foreach(name test_snapshot_tool test_snapshot_move)
  if(TARGET ${name} AND TARGET pcache-snapshot)
    pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
    target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/snapshot_testlib.c)
    target_link_libraries(${name} PRIVATE pcache_storecheck pcache_store PkgConfig::JANSSON)
    target_compile_definitions(${name}
                               PRIVATE PCACHE_SNAPSHOT_BIN="$<TARGET_FILE:pcache-snapshot>"
                                       PCACHE_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
    add_dependencies(${name} pcache-snapshot)
    set_tests_properties(${name} ${pc_parts_of_${name}} PROPERTIES LABELS "integration;store;tool")
  endif()
endforeach()
# export / import (test_snapshot_move) need the ODBC exporter and the
# private servers of the ODBC tests (odbc_servers.sh); SKIPPED (77) loudly
# when they are missing, disabled in a build without odbc/.
if(TARGET test_snapshot_move)
  if(TARGET pcache_odbc)
    target_sources(test_snapshot_move PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_testenv.c)
    pkg_check_modules(ODBCINST REQUIRED IMPORTED_TARGET odbcinst)
    target_link_libraries(test_snapshot_move PRIVATE pcache_odbc PkgConfig::ODBCINST)
    target_compile_definitions(test_snapshot_move
                               PRIVATE PCACHE_ODBC_SERVERS="${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_servers.sh")
    set_tests_properties(test_snapshot_move PROPERTIES SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
      LABELS "integration;store;tool;odbc" TIMEOUT 600
      ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_lsan.supp")
  else()
    set_target_properties(test_snapshot_move PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(test_snapshot_move PROPERTIES DISABLED TRUE)
  endif()
endif()
