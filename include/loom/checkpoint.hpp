#pragma once
// Checkpoints in the safetensors format (https://huggingface.co/docs/safetensors):
// an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw little-endian data. Files written
// here load in PyTorch (safetensors.torch.load_file) and the other way round.
#include <loom/tensor.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loom {

// Tensors with names, in order (what nn modules' named_parameters() return).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Realizes the tensors (one schedule) and writes them to `path`, replacing the
// file only once it is complete. Names must be unique and non-empty; dtypes map
// to BOOL, U8, I32, I64, F32, F64, BF16, F16. Any failure is a loom::Error naming the path.
void save(const std::filesystem::path& path, const NamedTensors& tensors);
void save(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors);

// Reads every tensor of a safetensors file into a buffer of its own. I8, I16 and U16
// load as Int32, U32 and U64 as Int64 (every value exact; a U64 of 2^63 or more is an
// error). A file that is truncated, malformed, or holds a dtype loom cannot read (F8_E4M3,
// ...) is a loom::Error naming the path and what is wrong; `__metadata__` is ignored.
std::map<std::string, Tensor> load(const std::filesystem::path& path);

}  // namespace loom
