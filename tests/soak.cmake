# Multi-process soak of the engine (tests/crash/soak_engine.c). Included by
# tests/CMakeLists.txt. The crash tests test_lockdeath.c and
# test_forksafety.c are cmocka programs that the test_*.c glob there already
# registers; they only get a label here.
#
# soak_engine runs PCACHE_SOAK_SECONDS (default 30) of wall time whatever the
# build: an ASan build does fewer operations in the same time. RUN_SERIAL
# because it forks a worker per core and more: sharing two cores with other
# tests would only make its timing checks noisier.
add_executable(soak_engine crash/soak_engine.c)
target_link_libraries(soak_engine PRIVATE pcache pcache_testhooks)
add_test(NAME soak_engine COMMAND soak_engine)
# The program has its own watchdog (3 x its run time + 60 s); this cap only
# backs it up, sized from the environment seen at configure time.
set(pc_soak_seconds 30)
if(DEFINED ENV{PCACHE_SOAK_SECONDS} AND "$ENV{PCACHE_SOAK_SECONDS}" MATCHES "^[0-9]+$")
  set(pc_soak_seconds $ENV{PCACHE_SOAK_SECONDS})
endif()
math(EXPR pc_soak_timeout "${pc_soak_seconds} * 4 + 300")
set_tests_properties(soak_engine PROPERTIES TIMEOUT ${pc_soak_timeout} RUN_SERIAL TRUE
                                            LABELS "crash;soak")

foreach(crash_test test_lockdeath test_forksafety)
  if(TEST ${crash_test})
    set_tests_properties(${crash_test} PROPERTIES LABELS "crash")
  endif()
endforeach()
