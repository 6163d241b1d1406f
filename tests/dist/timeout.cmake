# CTest `dist_timeout` (docs/distributed.md, "Faults"): rank 1 of a 2-rank job sleeps
# while rank 0 waits in an all-reduce. With LOOM_DIST_TIMEOUT=2, rank 0 must log an
# error naming itself and the collective and end the job (MPI_Abort): mpirun exits
# non-zero within seconds, long before rank 1 would wake.
# Arguments: -DMPIEXEC=... -DTEST_DIST=...
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np 2 --allow-run-as-root --oversubscribe -x LOOM_DIST_TIMEOUT=2
          ${TEST_DIST} --no-skip "--test-case=a rank that never joins a collective ends the job"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message(STATUS "mpirun exited with ${rc} after ${seconds} s\n${out}\n${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0: the timeout did not end it")
endif()
if(NOT "${out}${err}" MATCHES "all_reduce\\(sum\\): rank 0 of 2 waited 2 s \\(LOOM_DIST_TIMEOUT\\) for the other ranks")
  message(FATAL_ERROR "no error naming rank 0, the all-reduce and the timeout")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s: rank 1 was not ended with rank 0")
endif()
