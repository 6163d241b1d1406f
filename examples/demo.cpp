// A small tour of loom's first slice: lazy tensors, fused kernels, reductions.
#include <loom/loom.hpp>

#include <iostream>

int main() {
  using loom::Tensor;
  auto a = Tensor::from_vector<float>({1, -2, 3, 0.5f, -1, 2}, {2, 3});
  auto b = Tensor::from_vector<float>({2, 1, -1, 4, 0.5f, 1}, {2, 3});

  Tensor fused = (a * b + 1.0f).relu().exp();    // one kernel
  Tensor norm = a.exp() / a.exp().sum(1, true);  // softmax rows: reduce once, then divide
  Tensor moved = a.permute({1, 0}).flip(0).pad({{1, 0}, {0, 1}});
  loom::realize({fused, norm, moved});

  auto print = [](const char* name, const Tensor& t) {
    std::cout << name << " [";
    for (auto s : t.shape()) std::cout << ' ' << s;
    std::cout << " ] =";
    for (float v : t.to_vector<float>()) std::cout << ' ' << v;
    std::cout << '\n';
  };
  print("(a*b+1).relu().exp()", fused);
  print("softmax(a, axis 1)  ", norm);
  print("pad(flip(a.T))      ", moved);
  auto c = loom::counters();
  std::cout << "kernels compiled " << c.kernels_compiled << ", executed " << c.kernels_executed
            << ", schedules " << c.schedules_built << '\n';
}
