# The Fashion-MNIST example data parallel under MPI, resumed: a run of two
# epochs, and a run stopped after the first (--stop-after 1) then resumed
# (--resume), must write the same checkpoint, byte for byte: rank 0's model,
# Adam moments, schedule and generator, after every rank read the first
# checkpoint back. Run by CTest as
#   cmake -DRUN="mpirun;-np;2;...;fashion_mnist" -DARGS="--ddp;..." -DDIR=<scratch> -P this file
# Without the data set it says so, which CTest counts as a skip.
include(${CMAKE_CURRENT_LIST_DIR}/run_example.cmake)

function(run_example checkpoint)
  run_example_once(dataset-fashion-mnist stdout --checkpoint ${checkpoint} ${ARGN})
endfunction()

file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
run_example(${DIR}/whole.safetensors)
run_example(${DIR}/resumed.safetensors --stop-after 1)
run_example(${DIR}/resumed.safetensors --resume)
expect_same_checkpoint(${DIR}/whole.safetensors ${DIR}/resumed.safetensors)
message("the resumed run's checkpoint equals the uninterrupted run's, byte for byte")
