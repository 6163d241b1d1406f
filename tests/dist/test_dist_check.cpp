// LOOM_DIST_CHECK: the ranks compare each collective's call, shape and dtype
// before it joins the graph. Here rank 1 deliberately differs from rank 0; every
// rank must throw (none may be left waiting in a collective) with a message
// naming the collective, its own shape and dtype, and the other rank's.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <functional>
#include <string>

using namespace loom;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("LOOM_DIST_CHECK: a shape that differs across ranks is an error on every rank, naming both") {
  const int me = dist::rank(), n = dist::world_size();
  Context check{{"DIST_CHECK", true}};
  // The same call everywhere passes, and the collective still gives its value.
  CHECK(dist::all_reduce(Tensor::full({2, 3}, 1.0f)).to_vector<float>() == std::vector<float>(6, float(n)));
  if (n < 2) return;  // nothing to disagree with

  const Shape mine = me == 1 ? Shape{4, 3} : Shape{2, 3};
  const std::string err = error_of([&] { dist::all_reduce(Tensor::full(mine, 1.0f), dist::Op::Mean); });
  const int other = me == 1 ? 0 : 1;
  const std::string me_says = me == 1 ? "f32 [4, 3]" : "f32 [2, 3]";
  const std::string other_says = me == 1 ? "f32 [2, 3]" : "f32 [4, 3]";
  INFO(err);
  CHECK(err.starts_with("all_reduce(mean): the ranks disagree (LOOM_DIST_CHECK)"));
  CHECK(err.find(fmt::format("rank {} (this one) calls all_reduce(mean) of {}", me, me_says)) !=
        std::string::npos);
  CHECK(err.find(fmt::format("rank {} calls all_reduce(mean) of {}", other, other_says)) !=
        std::string::npos);

  // The ranks are still in step: a collective after the error works.
  CHECK(dist::all_reduce(Tensor::full({1}, 2.0f)).item<float>() == 2.0f * n);
}

TEST_CASE("LOOM_DIST_CHECK: a dtype, a collective or a root that differs is an error too") {
  const int me = dist::rank(), n = dist::world_size();
  if (n < 2) return;
  Context check{{"DIST_CHECK", true}};
  const std::string dtype = error_of(
      [&] { dist::broadcast(Tensor::full({3}, 1.0f).cast(me == 1 ? DType::Float64 : DType::Float32), 0); });
  CHECK(dtype.find(me == 1 ? "calls broadcast(root 0) of f64 [3]" : "calls broadcast(root 0) of f32 [3]") !=
        std::string::npos);
  CHECK(dtype.find(me == 1 ? "rank 0 calls broadcast(root 0) of f32 [3]"
                           : "rank 1 calls broadcast(root 0) of f64 [3]") != std::string::npos);

  const Tensor x = Tensor::full({2, 2}, 1.0f);
  const std::string kind = error_of([&] {
    if (me == 1)
      dist::all_gather(x, 1);
    else
      dist::all_reduce(x, dist::Op::Max);
  });
  CHECK(kind.find(me == 1 ? "rank 0 calls all_reduce(max) of f32 [2, 2]"
                          : "rank 1 calls all_gather(dim 1) of f32 [2, 2]") != std::string::npos);

  const std::string root = error_of([&] { dist::broadcast(x, me == 1 ? 1 : 0); });
  CHECK(root.find("the ranks disagree") != std::string::npos);
  // Without the check the same mismatched root is not caught when the graph is built.
  Context off{{"DIST_CHECK", false}};
  CHECK(error_of([&] { dist::broadcast(x, me == 1 ? 1 : 0); }).empty());
}
