# The ODBC exporter's tests (odbc/). Included by tests/CMakeLists.txt;
# test_odbc*.c are registered by the test_*.c glob there. They start their
# own PostgreSQL and MariaDB servers (odbc_servers.sh) and exit 77 - ctest
# SKIPPED, with a loud message - when the servers or drivers are missing.
# The MariaDB cases are tests of their own (test_odbc_mariadb,
# test_odbc_fail_mariadb: pc_test_parts there), the only ones that start
# MariaDB, so a machine without it shows them Skipped and the rest Passed.
# RUN_SERIAL: they start servers and measure; 2 shared cores.
foreach(name test_odbc test_odbc_fail test_sync_api)
  if(NOT TARGET ${name})
    continue()
  endif()
  if(TARGET pcache_odbc)
    target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_testenv.c)
    # libodbcinst linked in keeps it loaded for the whole run, so that the
    # ini cache it never frees is attributed to it (odbc_lsan.supp) rather
    # than to an unloaded module
    pkg_check_modules(ODBCINST REQUIRED IMPORTED_TARGET odbcinst)
    target_link_libraries(${name} PRIVATE pcache_odbc pcache_persist PkgConfig::ODBCINST)
    if(name STREQUAL test_odbc_fail)
      target_link_libraries(${name} PRIVATE pcache_odbc_testing)
    endif()
    target_link_options(${name} PRIVATE -Wl,--no-as-needed)
    set_tests_properties(${name} ${pc_parts_of_${name}} PROPERTIES ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_lsan.supp")
    target_compile_definitions(${name} PRIVATE
      PCACHE_ODBC_SERVERS="${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_servers.sh")
    set_tests_properties(${name} ${pc_parts_of_${name}} PROPERTIES SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                                            LABELS "integration;odbc" TIMEOUT 600)
  else()
    # built without odbc/ (PCACHE_ODBC=OFF): not built, reported as disabled
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    set_tests_properties(${name} ${pc_parts_of_${name}} PROPERTIES DISABLED TRUE)
  endif()
endforeach()
