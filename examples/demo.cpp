// A small tour of loom: lazy tensors, fused kernels, reductions, movement ops.
// Run with LOOM_DEBUG=2 to see each kernel, LOOM_DEBUG=4 for its LLVM IR.
#include <loom/loom.hpp>

#include <iostream>

int main() {
  using loom::Tensor;
  auto a = Tensor::from_vector<float>({1, -2, 3, 0.5f, -1, 2}, {2, 3});
  auto b = Tensor::from_vector<float>({2, 1, -1, 4, 0.5f, 1}, {2, 3});

  Tensor fused = (a * b + 1.0f).relu().exp();  // one kernel
  Tensor probs = a.softmax(1);                 // the row max and sum run once each
  Tensor moved = a.transpose().flip(0).pad({{1, 0}, {0, 1}});
  Tensor product = a.matmul(b.transpose());       // [2,3] @ [3,2]
  loom::realize({fused, probs, moved, product});  // one schedule for all four

  std::cout << "(a*b+1).relu().exp() =\n" << fused << "\n\n";
  std::cout << "a.softmax(1) =\n" << probs << "\n\n";
  std::cout << "a.T.flip(0).pad(...) =\n" << moved << "\n\n";
  std::cout << "a @ b.T =\n" << product << "\n\n";
  auto c = loom::counters();
  std::cout << "kernels compiled " << c.kernels_compiled << ", executed " << c.kernels_executed
            << ", schedules " << c.schedules_built << '\n';
}
