// The gradient is scheduled with the forward graph and fuses with it: checked on
// the kernels the scheduler generates (kernel count, REDUCEs and their ranges,
// loads) and on the kernels a realize runs.
#include "check.hpp"

#include "schedule/schedule.hpp"
#include "support/tensor_schedule.hpp"

#include <loom/loom.hpp>

#include <algorithm>
#include <cmath>

using namespace loom;
using loom::test::kernel_asts_of;
using loom::test::nodes_of;

namespace {
// Elements one REDUCE runs over: the product of its reduce ranges' ends.
int64_t reduced_elements(const UOpPtr& reduce) {
  int64_t n = 1;
  for (size_t i = 1; i < reduce->src.size(); ++i) n *= reduce->src[i]->src[0]->const_int();
  return n;
}

Tensor ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 97) - 48) / 16.0f;
  return Tensor::from_vector<float>(v, {n});
}
}  // namespace

TEST_CASE("the gradient of x.sum() with respect to x is one fill kernel: no reduce, no load of x") {
  for (int64_t n : {int64_t{4096}, int64_t{1} << 20}) {
    const Tensor x = ramp(n);
    const Tensor g = gradient(x.sum(), {x})[0];
    const Schedule s = kernel_asts_of({g});
    CHECK(s.kernels.size() <= 1);
    CHECK(nodes_of(s, Op::REDUCE).empty());
    CHECK(nodes_of(s, Op::LOAD).empty());
    const auto before = counters().kernels_executed;
    const std::vector<float> v = g.to_vector<float>();
    CHECK(counters().kernels_executed - before <= 1);
    CHECK(std::all_of(v.begin(), v.end(), [](float f) { return f == 1; }));
  }
}

TEST_CASE("the L2 norm and its gradient together: at most 2 kernels and exactly one REDUCE over N") {
  for (int64_t n : {int64_t{4096}, int64_t{1} << 20}) {
    const Tensor x = ramp(n);
    const Tensor norm = x.square().sum().sqrt();
    const Tensor g = gradient(norm, {x})[0];
    const Schedule s = kernel_asts_of({norm, g});
    // From 32768 elements on, split_reduceop sums the squares in 256 parts
    // across threads, then the parts: one kernel and one REDUCE more, each
    // element still read once.
    const bool split = n >= 32768;
    CHECK(s.kernels.size() <= (split ? 3u : 2u));
    const std::vector<UOpPtr> reduces = nodes_of(s, Op::REDUCE);
    REQUIRE(reduces.size() == (split ? 2u : 1u));
    CHECK(reduced_elements(reduces[0]) == (split ? n / 256 : n));
    if (split) CHECK(reduced_elements(reduces[1]) == 256);
    // And what realize runs: two kernels (three split), the values x / |x|.
    const auto before = counters().kernels_executed;
    realize({norm, g});
    CHECK(counters().kernels_executed - before <= (split ? 3u : 2u));
    const std::vector<float> xs = x.to_vector<float>(), gs = g.to_vector<float>();
    double sq = 0;
    for (float f : xs) sq += static_cast<double>(f) * f;
    const float computed = norm.item<float>();
    CHECK(computed == doctest::Approx(std::sqrt(sq)).epsilon(1e-3));  // a Float32 sum of up to 2^20 terms
    for (size_t i = 0; i < xs.size(); i += 997)
      CHECK(gs[i] == doctest::Approx(xs[i] / computed).epsilon(1e-6));
  }
}

TEST_CASE("through backward() and grad(), as a training step reads them: the same kernels") {
  Tensor x = ramp(1 << 16).requires_grad_();
  const Tensor norm = x.square().sum().sqrt();
  norm.backward();
  const Schedule s = kernel_asts_of({norm, x.grad()});
  CHECK(s.kernels.size() <= 3);                // the sum of 65536 squares is split in 256 parts
  CHECK(nodes_of(s, Op::REDUCE).size() == 2);  // the parts, then their sum
  const auto before = counters().kernels_executed;
  realize({norm, x.grad()});
  CHECK(counters().kernels_executed - before <= 3);
}

TEST_CASE("backward of a matmul loss reuses the forward's reduce: one REDUCE per matmul, none recomputed") {
  // loss = sum(relu(x @ w)): the forward has one matmul reduce; the gradient w.r.t. w is x^T @ mask, one
  // more.
  const Tensor x = Tensor::rand({64, 32}), w = Tensor::rand({32, 16});
  const Tensor loss = x.matmul(w).relu().sum();
  const Tensor gw = gradient(loss, {w})[0];
  const Schedule s = kernel_asts_of({loss, gw});
  const std::vector<UOpPtr> reduces = nodes_of(s, Op::REDUCE);
  int64_t over_k = 0, over_m = 0;  // the forward's sum over 32, the gradient's over 64 rows
  for (const UOpPtr& r : reduces) {
    over_k += reduced_elements(r) == 32;
    over_m += reduced_elements(r) == 64;
  }
  CHECK(over_k == 1);
  CHECK(over_m == 1);
}

namespace {
// relu(v)'s second branch tests v < 0; its mask tests 0 < relu(v).
bool is_below_zero_test(const UOpPtr& n) {
  return n->op == Op::CMPLT && n->src[1]->is_const() && n->src[1]->const_value() == 0;
}
int64_t relus_in(const UOpPtr& u) {
  const std::vector<UOpPtr> nodes = toposort(u);
  return std::count_if(nodes.begin(), nodes.end(), is_below_zero_test);
}

// Each gradient against the reference interpreter, within `tolerance` of its largest element.
void check_against_reference(const std::vector<Tensor>& g, double tolerance) {
  for (const Tensor& gi : g) {
    const ref::RefTensor want = test::reference(gi);
    const std::vector<float> got = Tensor(gi).realize().to_vector<float>();
    REQUIRE(static_cast<int64_t>(got.size()) == want.size());
    double largest = 0;
    for (int64_t e = 0; e < want.size(); ++e) largest = std::max(largest, std::abs(want.at(e)));
    CHECK(largest > 0);
    for (int64_t e = 0; e < want.size(); ++e)
      CHECK(std::abs(got[static_cast<size_t>(e)] - want.at(e)) <= tolerance * largest);
  }
}
}  // namespace

TEST_CASE("relu's mask reads relu's output: no reduce recomputes relu, and the gradients are right") {
  // Two linear + relu layers on odd shapes. relu' = (0 < relu(v)) lets the forward store relu's
  // output alone; a mask (0 < v) kept the pre-activation v stored instead, and the next layer's
  // matmul recomputed relu(v) in its reduce, once per element and column block.
  const int64_t batch = 7, in = 5, hidden = 11, out = 3;
  manual_seed(1);
  auto draw = [](Shape shape) { return Tensor::randn(std::move(shape)).realize(); };
  const Tensor x = draw({batch, in}), w1 = draw({hidden, in}), b1 = draw({hidden});
  const Tensor w2 = draw({out, hidden}), b2 = draw({out}), weights = draw({batch, out});
  const Tensor h = (x.matmul(w1.transpose()) + b1).relu();
  const Tensor loss = ((h.matmul(w2.transpose()) + b2).relu() * weights).sum();
  const std::vector<Tensor> g = gradient(loss, {w1, b1, w2, b2});
  const Schedule s = kernel_asts_of({loss, g[0], g[1], g[2], g[3]});
  int64_t in_epilogues = 0;
  for (const auto& k : s.kernels) in_epilogues += relus_in(k.ast);
  for (const UOpPtr& r : nodes_of(s, Op::REDUCE)) {
    CHECK(relus_in(r->src[0]) == 0);
    in_epilogues -= relus_in(r->src[0]);
  }
  CHECK(in_epilogues == 2);  // each layer's relu, once, in its matmul's store
  // The masks (0 < relu's output) run in the matmul kernels, in the epilogue of the gradient
  // dY w2 or in the loads of the products that read it, never as an elementwise pass of their
  // own: 6 kernels, the 2 layers, the loss, dY w2, and one per weight's gradient, which stores
  // its bias's gradient too (schedule/multi_output.hpp).
  CHECK(s.kernels.size() == 6);
  CHECK(std::count_if(s.kernels.begin(), s.kernels.end(), [](const auto& k) { return k.outputs == 2; }) == 2);
  for (const auto& k : s.kernels) {
    const std::vector<UOpPtr> nodes = toposort(k.ast);
    const bool masks = std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& n) {
      return n->op == Op::CMPLT && n->src[0]->is_const() && n->src[0]->const_value() == 0;
    });
    const bool sums =
        std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& n) { return n->op == Op::REDUCE; });
    CHECK((!masks || sums));
  }
  // Float32 sums of at most 11 products, in whatever order and contraction the kernels chose:
  // within 1e-5 of the gradient's largest element (as the reference interpreter computes it).
  check_against_reference(g, 1e-5);
}

namespace {
// The largest buffer any kernel of `s` binds, in elements.
int64_t largest_buffer(const Schedule& s) {
  int64_t most = 0;
  for (const auto& k : s.kernels)
    for (const auto& b : k.buffers) most = std::max(most, b->get<std::vector<int64_t>>().at(1));
  return most;
}

// `blocks` pre-norm residual blocks x + fc2(relu(fc1(LayerNorm(x)))) on x [batch, dim]: the
// output and every parameter.
struct ResidualStack {
  Tensor out;
  std::vector<Tensor> params;
};
ResidualStack residual_stack(int64_t blocks, int64_t batch, int64_t dim, int64_t hidden, uint64_t seed) {
  manual_seed(seed);
  std::vector<nn::LayerNorm> norms;
  std::vector<nn::Linear> fc1, fc2;
  ResidualStack r;
  for (int64_t i = 0; i < blocks; ++i) {
    norms.emplace_back(dim);
    fc1.emplace_back(dim, hidden);
    fc2.emplace_back(hidden, dim);
    for (const auto& layer : {norms.back().parameters(), fc1.back().parameters(), fc2.back().parameters()})
      r.params.insert(r.params.end(), layer.begin(), layer.end());
  }
  r.out = Tensor::randn({batch, dim}).realize();
  for (int64_t i = 0; i < blocks; ++i) r.out = r.out + fc2[i](fc1[i](norms[i](r.out)).relu());
  return r;
}

}  // namespace

TEST_CASE("residual blocks x + fc2(relu(fc1(LayerNorm(x)))): no buffer of a product's iteration space") {
  // Four blocks make a graph past the kernel-size cap; the cap once ended regions at
  // fc1's and fc2's broadcast operands, [batch, hidden, dim] buffers (schedule/rangeify.hpp).
  const int64_t batch = 8, dim = 16, hidden = 64, blocks = 4;
  const ResidualStack r = residual_stack(blocks, batch, dim, hidden, 3);
  const std::vector<Tensor> g = gradient(r.out.square().mean(), r.params);
  const Schedule s = kernel_asts_of(g);
  CHECK(largest_buffer(s) <= std::max(batch * hidden, hidden * dim));
  check_against_reference(g, 1e-4);
}

TEST_CASE(
    "residual blocks past the kernel-size cap: the cap ends a region at a shared value, not inside relu") {
  // relu(x) is where(0 < x, x, where(x < 0, 0, x)): it reads x four times, so the cap's
  // estimate of it is four times x's. Ending the region at the source that happened to
  // pass the cap last made `where(x < 0, 0, x)` a kernel of its own from the third block
  // on, and every reader of relu computed relu again from two buffers; the largest source
  // ends first now (schedule/rangeify.cpp, RegionSizes).
  const auto stores_relus_rest = [](const UOpPtr& ast) {
    for (const UOpPtr& u : toposort(ast)) {
      if (u->op != Op::STORE) continue;
      const UOpPtr& v = u->src[1];
      if (v->op == Op::WHERE && v->src[0]->op == Op::CMPLT && v->src[0]->src[0] == v->src[2] &&
          v->src[2]->op == Op::LOAD && v->src[1]->op == Op::CONST && v->src[1]->const_value() == 0)
        return true;
    }
    return false;
  };
  for (const int64_t blocks : {3, 6}) {
    CAPTURE(blocks);
    const ResidualStack r = residual_stack(blocks, 8, 16, 64, 5);
    std::vector<Tensor> all = gradient(r.out.square().mean(), r.params);
    all.push_back(r.out);
    const Schedule s = kernel_asts_of(all);
    for (const auto& k : s.kernels) {
      CAPTURE(k.name);
      CHECK_FALSE(stores_relus_rest(k.ast));
    }
    check_against_reference(all, 1e-4);
  }
}

TEST_CASE(
    "an RNN unrolled in a loop: the recurrent weight's gradient is a sum over the batch, no [B, H, H] "
    "buffer per step") {
  const int64_t batch = 16, hidden = 32, steps = 4;
  manual_seed(4);
  const Tensor w = (Tensor::randn({hidden, hidden}) * 0.2).realize().requires_grad_();
  Tensor h = Tensor::zeros({batch, hidden});
  for (int64_t t = 0; t < steps; ++t) h = (Tensor::randn({batch, hidden}).realize() + h.matmul(w)).tanh();
  const std::vector<Tensor> g = gradient(h.square().sum(), {w});
  const Schedule s = kernel_asts_of(g);
  CHECK(largest_buffer(s) <= hidden * hidden);
  check_against_reference(g, 1e-5);
}
