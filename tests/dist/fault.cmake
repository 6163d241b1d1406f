# CTest `dist_fault` (docs/distributed.md, "Faults"): in a 3-rank job training
# under DataParallel, rank 2 SIGKILLs itself at step 3. Twice:
# - under plain mpirun, which ends the job itself when it sees rank 2 die (its
#   message names rank 2), unless loom's wait sees it first;
# - with Open MPI's orte_enable_recovery, which lets the other ranks run on (as
#   srun does without --kill-on-bad-exit): loom's wait must see rank 2 gone and
#   end the job with its own error naming rank 2. mpirun then exits 0 whatever
#   its ranks did, so each rank runs under a shell that records its exit status.
# Each run must end within LOOM_DIST_TIMEOUT with the survivors' exits non-zero,
# and leave no process of the job behind (pgrep on an argument unique to the run).
# Arguments: -DMPIEXEC=... -DTEST_DIST=... -DWORK_DIR=...
set(timeout 20)
set(dist_case "--test-case=a rank killed during training ends the job")
# run_killed(name expected record [mpirun options]): `record` runs each rank under
# a shell that writes down its exit status.
function(run_killed name expected record)
  string(RANDOM LENGTH 12 tag)
  set(marker "loom-dist-fault-${tag}")  # doctest ignores an argument it does not know
  set(status_dir "${WORK_DIR}/${marker}")
  file(MAKE_DIRECTORY ${status_dir})
  set(wrapper "")
  if(record)
    file(WRITE ${status_dir}/record.sh "\"$@\"\necho $? > ${status_dir}/rank-$OMPI_COMM_WORLD_RANK\n")
    set(wrapper sh ${status_dir}/record.sh)
  endif()
  string(TIMESTAMP start "%s")
  execute_process(
    COMMAND ${MPIEXEC} -np 3 --allow-run-as-root --oversubscribe -x LOOM_DIST_TIMEOUT=${timeout} ${ARGN}
            ${wrapper} ${TEST_DIST} --no-skip ${dist_case} ${marker}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  message(STATUS "${name}: mpirun exited with ${rc} after ${seconds} s\n${out}\n${err}")
  execute_process(COMMAND sleep 0.5)  # mpirun waits for its processes; a moment more for stragglers
  execute_process(COMMAND pgrep -af ${marker} RESULT_VARIABLE left OUTPUT_VARIABLE left_out)
  if(left EQUAL 0)
    execute_process(COMMAND pkill -KILL -f ${marker})
    message(FATAL_ERROR "${name}: processes of the job were left behind:\n${left_out}")
  endif()
  if("${out}${err}" MATCHES "finished training")
    message(FATAL_ERROR "${name}: a rank finished training without rank 2")
  endif()
  if(NOT "${out}${err}" MATCHES "${expected}")
    message(FATAL_ERROR "${name}: no error naming rank 2 (expected \"${expected}\")")
  endif()
  if(seconds GREATER_EQUAL ${timeout})
    message(FATAL_ERROR "${name}: the job took ${seconds} s, not less than LOOM_DIST_TIMEOUT=${timeout}")
  endif()
  if(record)  # the ranks' own exits
    foreach(r 0 1)
      if(NOT EXISTS ${status_dir}/rank-${r})  # its shell too was ended by mpirun (MPI_Abort)
        message(STATUS "${name}: rank ${r} was killed")
        continue()
      endif()
      file(READ ${status_dir}/rank-${r} code)
      string(STRIP "${code}" code)
      message(STATUS "${name}: rank ${r} exited with ${code}")
      if(code EQUAL 0)
        message(FATAL_ERROR "${name}: rank ${r} exited 0")
      endif()
    endforeach()
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "${name}: the job exited 0")
  endif()
  file(REMOVE_RECURSE ${status_dir})
endfunction()

set(loom_error "rank 2 of 3 \\(pid [0-9]+, on this host\\) has died or exited while rank [01] waited for it")
# whichever sees rank 2 gone first: mpirun, or loom's wait (it polls every 50 ms)
run_killed("plain mpirun" "process rank 2 with PID [0-9]+ on node [^ ]+ exited on signal 9|${loom_error}" OFF)
run_killed("mpirun with orte_enable_recovery" "${loom_error}" ON --mca orte_enable_recovery 1)
