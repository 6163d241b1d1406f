#pragma once
// The umbrella header: everything a loom program uses.
#include <loom/capture.hpp>
#include <loom/checkpoint.hpp>
#include <loom/context.hpp>
#include <loom/data.hpp>
#include <loom/debug.hpp>
#include <loom/dist.hpp>
#include <loom/dtype.hpp>
#include <loom/error.hpp>
#include <loom/gradient.hpp>
#include <loom/graph_file.hpp>
#include <loom/lr_scheduler.hpp>
#include <loom/memory.hpp>
#include <loom/nn.hpp>
#include <loom/optim.hpp>
#include <loom/random.hpp>
#include <loom/tensor.hpp>
