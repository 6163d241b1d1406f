#pragma once
// Graph files: a tensor graph in loom's text form together with its input data,
// self-contained, so a computation can be saved from a program and rerun
// elsewhere (loom-dump reads these files; loom-fuzz writes its replays as them).
//
//   # loom graph 1
//   %0 = BUFFER f32 [(0 6)]            buffer 0 of the file: its id is the file's own number
//   %1 = RESHAPE f32 %0 [(2 3)]
//   %2 = CONST f32 [2.0]
//   ...
//   @data 0 hex 0000803f00000040...     buffer 0's bytes, little-endian, as in memory
//   @data 1 random 7                    buffer 1: past the size limit, seeded random values
//
// The graph lines are the IR text form of docs/ir.md; the `@data` lines give
// each BUFFER's contents. docs/graph-files.md describes the format in full.
#include <loom/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct SaveGraphOptions {
  // A buffer of more bytes than this is saved as its shape and dtype only and
  // filled with seeded random values on load (floats uniform in [-1, 1),
  // integers in [-8, 8) (UInt8 in [0, 16)), Bool 0 or 1).
  int64_t max_data_bytes = int64_t{1} << 20;
  uint64_t seed = 0;  // the seed those random values derive from
};

// The graphs of `outputs` as text: every node they reach (realized tensors are
// their buffers), buffers numbered 0, 1, ... in the order the graph reaches them,
// each with its data. Nothing is realized or changed.
std::string graph_to_text(const std::vector<Tensor>& outputs, const SaveGraphOptions& options = {});
// graph_to_text written to `path`; throws loom::Error if it cannot be written.
void save_graph(const std::vector<Tensor>& outputs, const std::string& path,
                const SaveGraphOptions& options = {});

// The tensors of a graph file, lazy, in the order they were saved: each file
// buffer becomes a fresh buffer holding the saved (or seeded random) data.
// Malformed text is a loom::Error naming the line.
std::vector<Tensor> graph_from_text(std::string_view text);
std::vector<Tensor> load_graph(const std::string& path);

}  // namespace loom
