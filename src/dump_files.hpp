#pragma once
// LOOM_DUMP_DIR: every kernel at every stage, one file per (kernel, stage):
//
//   graph.00.tensor.uop          graph.01.rangeify.uop       (a schedule's graph-level stages)
//   r_1024_1024.00.simplify.uop  r_1024_1024.01.kernel.uop   r_1024_1024.02.optimizer.uop
//   r_1024_1024.03.linear.txt    r_1024_1024.04.llvm.ll      r_1024_1024.05.asm.s
//
// The number orders a kernel's stages as they ran; schedule-wide graphs go
// under `graph`. Numbers keep counting for the life of the process, so a later
// realize never overwrites an earlier file.
#include <string>
#include <string_view>

namespace loom::detail {

// Writes `text` to `dir`/`kernel`.NN.`stage`.`ext`, creating `dir` if needed.
// A file that cannot be written is a warning on loom's logger, never an error:
// dumping must not stop the program.
void dump_stage_file(const std::string& dir, std::string_view kernel, std::string_view stage,
                     std::string_view ext, const std::string& text);

}  // namespace loom::detail
