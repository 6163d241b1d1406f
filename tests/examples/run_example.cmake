# Shared by the example scripts run with `cmake -P` (gpt.cmake,
# fashion_mnist_ddp_resume.cmake): run_example_once(<package> <stdout var> [args...])
# runs ${RUN} ${ARGS} [args...], echoes what it printed, and fails the test unless
# it exits 0. Exit 77 means the example's Debian data package is missing, which the
# test's SKIP_REGULAR_EXPRESSION counts as a skip.
function(run_example_once package out)
  execute_process(COMMAND ${RUN} ${ARGS} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE stdout
                  ERROR_VARIABLE stderr)
  message("${stdout}${stderr}")
  if(status EQUAL 77)
    message(FATAL_ERROR "${package} is not installed: skipped")
  endif()
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${RUN} ${ARGS} ${ARGN} exited with ${status}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

# Fails the test unless the uninterrupted run's checkpoint `whole` and the
# stopped-and-resumed run's `resumed` are equal, byte for byte.
function(expect_same_checkpoint whole resumed)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${whole} ${resumed} RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "the resumed run's checkpoint differs from the uninterrupted run's")
  endif()
endfunction()
