# The end-to-end test of the OpenSIPS module (opensips_e2e.py): runs when the
# module was built (-DOPENSIPS_SRC=<a built OpenSIPS 4.x tree>) against an
# OpenSIPS binary: PCACHE_OPENSIPS_PREFIX (an installed OpenSIPS: sbin/opensips
# and lib*/opensips/modules) or, by default, the OPENSIPS_SRC tree's own
# ./opensips and modules/ - both looked up by the test when it runs, so an
# OpenSIPS installed after configuring is found. Otherwise it reports SKIPPED with the reason
# (exit 77), which is what a CI machine without OpenSIPS sees. Two tests:
# opensips_cachedb_perf, the module on an LMDB store and on an SQLite file
# through ODBC; opensips_cluster_sync, perf_sync over clusterer (two
# clustered nodes + one without clusterer on a shared SQLite file, then on a
# private PostgreSQL started by tests/support/odbc_servers.sh), which exits 77
# - SKIPPED, with the reason - when clusterer.so / proto_bin.so are not
# installed or PostgreSQL is missing, also after its SQLite run passed: a
# partial run is never reported as passed. It measures convergence times:
# RUN_SERIAL.
set(PCACHE_OPENSIPS_PREFIX "$ENV{PCACHE_OPENSIPS_PREFIX}" CACHE PATH
    "an installed OpenSIPS 4.x for the cachedb_perf end-to-end test")
set(_osips_module "")
set(_osips_why "")
if(TARGET cachedb_perf)
  set(_osips_module "${PROJECT_BINARY_DIR}/opensips_module/cachedb_perf.so")
elseif(PCACHE_SANITIZE)
  set(_osips_why "the module is not built in a sanitizer tree (OpenSIPS is not an ASan binary)")
endif()
# Debian's python3 (its python3-* modules), not whatever python3 is first on PATH
find_program(PCACHE_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(PCACHE_PYTHON3)
  foreach(part "cachedb_perf;lmdb,odbc" "cluster_sync;sync")
    list(GET part 0 name)
    list(GET part 1 only)
    add_test(NAME opensips_${name}
             COMMAND ${PCACHE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/opensips/opensips_e2e.py
                     --prefix "${PCACHE_OPENSIPS_PREFIX}" --src "${OPENSIPS_SRC}"
                     --module "${_osips_module}" --skip-reason "${_osips_why}"
                     --guide "${PROJECT_SOURCE_DIR}/opensips_module/README.md" --only ${only})
    set_tests_properties(opensips_${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                                                     LABELS "opensips")
  endforeach()
  set_tests_properties(opensips_cluster_sync PROPERTIES RUN_SERIAL TRUE)
  # The admin guide's benchmark command (§11), as written, with relative
  # module paths, one small round: the command runs and measures.
  if(_osips_module AND OPENSIPS_SRC AND TARGET cdbbench)
    add_test(NAME opensips_bench_command
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/opensips/bench_command.sh
                     "${OPENSIPS_SRC}" "${PROJECT_SOURCE_DIR}"
             WORKING_DIRECTORY "${PROJECT_BINARY_DIR}")
    set_tests_properties(opensips_bench_command PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                                                          LABELS "opensips")
  endif()
  # The modules that take a cachedb_url (topology_hiding's th_state_url,
  # dialog's shared profiles, ratelimit, sql_cacher, dns_cache) on perf://,
  # under sipp: opensips_consumers.py. A module the tree did not build, or
  # sipp missing, is SKIPPED with the reason. It drives calls at a fixed
  # rate: RUN_SERIAL.
  add_test(NAME opensips_consumers
           COMMAND ${PCACHE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/opensips/opensips_consumers.py
                   --prefix "${PCACHE_OPENSIPS_PREFIX}" --src "${OPENSIPS_SRC}"
                   --module "${_osips_module}" --skip-reason "${_osips_why}")
  set_tests_properties(opensips_consumers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                                                     LABELS "opensips" RUN_SERIAL TRUE)
endif()
