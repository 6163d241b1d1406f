# The GPT example at a tiny size (one layer, d_model 32, windows of 32 characters,
# 20 steps): the validation loss must fall from step 0 to step 20, a second run with
# the same seed must print the same losses, and a run stopped after step 10
# (--stop-after 10) then resumed (--resume) must print the uninterrupted run's losses
# and write its checkpoint byte for byte (model, both AdamW states, schedules,
# generator). Run by CTest as
#   cmake -DRUN=<gpt> -DARGS="--steps;20;..." -DDIR=<scratch> -P this file
# Without the fortunes package it says so, which CTest counts as a skip.
include(${CMAKE_CURRENT_LIST_DIR}/run_example.cmake)

function(run_example out checkpoint)
  run_example_once(fortunes stdout --checkpoint ${checkpoint} ${ARGN})
  # The evaluation lines, "step N: ... val loss X", without their timing.
  string(REGEX MATCHALL "step [0-9]+: [^\n]*val loss [0-9.]+" losses "${stdout}")
  set(${out} "${losses}" PARENT_SCOPE)
endfunction()

# "val loss X" of the line of step `step` in `lines`.
function(val_loss out lines step)
  foreach(line IN LISTS lines)
    if(line MATCHES "^step ${step}: .*val loss ([0-9.]+)$")
      set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no validation loss at step ${step} in: ${lines}")
endfunction()

file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
run_example(whole ${DIR}/whole.safetensors)
run_example(again ${DIR}/again.safetensors)
run_example(first_half ${DIR}/resumed.safetensors --stop-after 10)
run_example(second_half ${DIR}/resumed.safetensors --resume)

val_loss(start "${whole}" 0)
val_loss(end "${whole}" 20)
if(NOT end LESS start)
  message(FATAL_ERROR "the validation loss did not fall: ${start} at step 0, ${end} at step 20")
endif()
message("validation loss ${start} at step 0, ${end} at step 20")
if(NOT again STREQUAL whole)
  message(FATAL_ERROR "two runs with the same seed differ:\n${whole}\n${again}")
endif()
# The resumed run prints steps 11-20's train loss and step 20's val loss; the stopped
# run printed steps 0 and 10.
if(NOT "${first_half};${second_half}" STREQUAL "${whole}")
  message(FATAL_ERROR "the stopped and resumed run's losses differ from the uninterrupted run's:\n"
                      "${whole}\n${first_half};${second_half}")
endif()
expect_same_checkpoint(${DIR}/whole.safetensors ${DIR}/resumed.safetensors)
message("equal seeds print equal losses; the resumed run's losses and checkpoint equal the uninterrupted run's")
