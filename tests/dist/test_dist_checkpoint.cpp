// loom::dist::save: rank 0 writes, every rank reads after it returns. The
// tensors saved hold a collective (every rank must realize it, or rank 0 would
// wait forever), and each rank's own tensor differs, so what every rank loads
// shows whose was written.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>

using namespace loom;

namespace {
// One path for the whole job: rank 0's process id, broadcast.
std::filesystem::path job_path(const std::string& stem) {
  const auto pid =
      dist::broadcast(Tensor::scalar(static_cast<double>(getpid()), DType::Int64), 0).item<int64_t>();
  return std::filesystem::temp_directory_path() / fmt::format("loom_{}_{}.safetensors", stem, pid);
}
}  // namespace

TEST_CASE("dist::save: rank 0's tensors are written once, complete, and every rank loads them") {
  const int me = dist::rank(), n = dist::world_size();
  const std::filesystem::path path = job_path("dist_save");
  const Tensor own = Tensor::full({2, 2}, 10.0 + me);
  dist::save(path, {{"own", own}, {"sum", dist::all_reduce(Tensor::full({3}, me + 1.0))}});
  const auto loaded = load(path);  // right after save returns: the file is whole on every rank
  CHECK(loaded.at("own").to_vector<float>() == std::vector<float>(4, 10.0f));  // rank 0's
  CHECK(loaded.at("sum").to_vector<float>() == std::vector<float>(3, static_cast<float>(n * (n + 1) / 2)));
  dist::barrier();  // every rank has read it
  if (me == 0) std::filesystem::remove(path);
}

TEST_CASE("dist::save: a write that fails on rank 0 is an error on every rank") {
  const std::filesystem::path path = job_path("no_such_dir") / "x.safetensors";
  std::string err;
  try {
    dist::save(path, {{"x", Tensor::full({1}, 1.0)}});
  } catch (const Error& e) {
    err = e.what();
  }
  INFO(err);
  if (dist::rank() == 0)
    CHECK(err.find("cannot open") != std::string::npos);
  else
    CHECK(err.find("rank 0 failed to write it") != std::string::npos);
}
