// loom::dist::DataParallel: rank 0's parameters everywhere, then gradients
// averaged across ranks by lazy all-reduces (docs/distributed.md).
#include <loom/dist.hpp>

#include <utility>

namespace loom::dist {

DataParallel::DataParallel(std::vector<Tensor> parameters) : parameters_(std::move(parameters)) {
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (!parameters_[i].defined())
      throw Error("DataParallel: parameter " + std::to_string(i) + " is an undefined tensor");
  for (Tensor& p : parameters_) p.assign(broadcast(p, 0));
  realize(parameters_);
}

void DataParallel::average_gradients() {
  for (const Tensor& p : parameters_) {
    Tensor g = p.grad();  // shares the gradient's node: the assign below is the parameter's gradient
    if (g.defined()) g.assign(all_reduce(g, Op::Mean));
  }
}

}  // namespace loom::dist
