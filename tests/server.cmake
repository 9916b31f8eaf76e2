# pcached's integration tests (tests/server/*.py): real clients against a
# real pcached - python3-redis run by the system's /usr/bin/python3,
# redis-cli and redis-benchmark (Debian packages, see .ci/deps.sh). Each
# test starts its own servers on kernel-chosen loopback ports and stops
# them, even when it fails.
if(TARGET pcached)
  foreach(name test_resp test_process test_jsonrpc_config test_hostile test_instances
               test_journal_bound test_crash_all test_mgmt_door test_buffers
               test_group_commit test_systemd test_config_alias
               test_txn test_txn_refused test_txn_node_clients test_isolation test_txn_journal_kill
               test_hello
               test_atomic test_clients
               test_redis_compat test_config_set test_benchmark_strings test_metrics test_rebalance
               test_evict test_readme test_command_meta test_redis_replies test_swapdb
               test_keep_data test_start_messages test_monitoring test_table_growth)
    add_test(NAME server_${name}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/${name}.py)
    set_tests_properties(server_${name} PROPERTIES TIMEOUT 600 LABELS "server" SKIP_RETURN_CODE 77
      ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHECTL=$<TARGET_FILE:pcachectl>;PCACHED_DOCS=${PROJECT_SOURCE_DIR}/docs/pcached.md;PCACHE_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1")
  endforeach()
  # the backup and restore drill of docs/operations.md (pcache-snapshot verify)
  if(TARGET pcache-snapshot)
    add_test(NAME server_test_backup_drill
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_backup_drill.py)
    set_tests_properties(server_test_backup_drill PROPERTIES TIMEOUT 300 LABELS "server"
      SKIP_RETURN_CODE 77
      ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHE_SNAPSHOT=$<TARGET_FILE:pcache-snapshot>;PYTHONDONTWRITEBYTECODE=1")
  endif()
  # RESP transports: unix socket, several bind addresses, IPv6 (issue 20 item 5)
  add_test(NAME server_test_transports
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_transports.py)
  set_tests_properties(server_test_transports PROPERTIES TIMEOUT 600 LABELS "server"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PYTHONDONTWRITEBYTECODE=1")
  # replies Redis's own test suite found different, side by side with redis-server
  add_test(NAME server_test_redis_suite_regressions
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_redis_suite_regressions.py)
  set_tests_properties(server_test_redis_suite_regressions PROPERTIES TIMEOUT 600
    LABELS "server" SKIP_RETURN_CODE 77
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PYTHONDONTWRITEBYTECODE=1")
  # a full file system: mounts a small tmpfs, skipped (77) where it cannot
  add_test(NAME server_test_diskfull
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_diskfull.py)
  set_tests_properties(server_test_diskfull PROPERTIES TIMEOUT 600 LABELS "server"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHECTL=$<TARGET_FILE:pcachectl>;PYTHONDONTWRITEBYTECODE=1")
  # issue 34 F1/F2: orders of start / kill -9 / fill / free on loop-mounted ext4
  add_test(NAME server_test_health_orders
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_health_orders.py)
  set_tests_properties(server_test_health_orders PROPERTIES TIMEOUT 600 LABELS "server"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PYTHONDONTWRITEBYTECODE=1")
  # issue 34 item 1: power cuts (EXT4_IOC_SHUTDOWN on loop-mounted ext4), root only
  if(TARGET pcache-snapshot)
    add_test(NAME server_test_powercut
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_powercut.py)
    set_tests_properties(server_test_powercut PROPERTIES TIMEOUT 900 LABELS "server;crash"
      SKIP_RETURN_CODE 77
      ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHE_SNAPSHOT=$<TARGET_FILE:pcache-snapshot>;PYTHONDONTWRITEBYTECODE=1")
  endif()
  # issue 34 F3: kill -9 of the master alone, restart at once, 20 times
  add_test(NAME server_test_master_kill
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_master_kill.py)
  set_tests_properties(server_test_master_kill PROPERTIES TIMEOUT 600 LABELS "server"
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PYTHONDONTWRITEBYTECODE=1")
endif()

# The RESP parser against a guard page, fed whole and byte by byte.
if(TARGET test_resp_parse)
  target_link_libraries(test_resp_parse PRIVATE pcached_testing)
endif()

# The perf_sync notice datagram's codec against hostile input.
if(TARGET test_sync_wire)
  target_link_libraries(test_sync_wire PRIVATE pcached_testing)
endif()

# perf_sync between real pcached nodes sharing one private PostgreSQL
# (tests/support/odbc_servers.sh; SKIPPED with exit 77 when PostgreSQL or psqlODBC
# is missing). RUN_SERIAL: it measures convergence times on 2 shared cores.
if(TARGET pcached AND TARGET pcache_odbc)
  add_test(NAME server_test_sync
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/server/test_sync.py)
  set_tests_properties(server_test_sync PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    RUN_SERIAL TRUE LABELS "server;odbc"
    ENVIRONMENT "PCACHED=$<TARGET_FILE:pcached>;PCACHECTL=$<TARGET_FILE:pcachectl>;PCACHE_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/support/odbc_lsan.supp")
endif()
