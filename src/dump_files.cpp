#include "src/dump_files.hpp"

#include "ir/log.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

namespace loom::detail {

namespace {
std::mutex mu;
std::map<std::string, int> next_number;  // per (dir, kernel): the next stage's number
}  // namespace

void dump_stage_file(const std::string& dir, std::string_view kernel, std::string_view stage,
                     std::string_view ext, const std::string& text) {
  int number = 0;
  {
    std::lock_guard lock(mu);
    number = next_number[fmt::format("{}/{}", dir, kernel)]++;
  }
  const std::filesystem::path path =
      std::filesystem::path(dir) / fmt::format("{}.{:02}.{}.{}", kernel, number, stage, ext);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << text;
  if (!text.empty() && text.back() != '\n') out << '\n';
  if (!out) log().warn("LOOM_DUMP_DIR: cannot write '{}'", path.string());
}

}  // namespace loom::detail
