#include "tools/examples.hpp"

#include <loom/error.hpp>

namespace loom::tools {

const std::vector<Example>& examples() {
  static const std::vector<Example> table = {
      {"matmul", "a 512x512 by 512x512 matrix product",
       "a = randn(512, 512)\n"
       "b = randn(512, 512)\n"
       "out = a @ b\n"},
      {"softmax", "softmax over the rows of a 4096x1024 matrix",
       "x = randn(4096, 1024)\n"
       "out = x.softmax(-1)\n"},
      {"onehot-gather", "256 rows of a 65536x64 table, as a one-hot product and by index_select",
       "table = randn(65536, 64)\n"
       "idx = randint(0, 65536, 256)\n"
       "rows = (idx.one_hot(65536).cast(f32).unsqueeze(-1) * table).sum(1)  # [256, 64]\n"
       "picked = table.index_select(0, idx)\n"},
      {"mlp-step", "one SGD step of a two-layer MLP on a batch of 256: forward, backward, update",
       "x = randn(256, 64)\n"
       "labels = randint(0, 10, 256)\n"
       "w1 = randn(64, 128)\n"
       "b1 = zeros(128)\n"
       "w2 = randn(128, 10)\n"
       "b2 = zeros(10)\n"
       "h = (x @ w1 + b1).relu()\n"
       "logits = h @ w2 + b2\n"
       "loss = -(logits.log_softmax(-1) * labels.one_hot(10).cast(f32)).sum(1).mean()\n"
       "new_w1 = w1 - 0.01 * grad(loss, w1)\n"
       "new_b1 = b1 - 0.01 * grad(loss, b1)\n"
       "new_w2 = w2 - 0.01 * grad(loss, w2)\n"
       "new_b2 = b2 - 0.01 * grad(loss, b2)\n"},
      {"norm-grad", "the gradient of a layer norm over 512 rows of 768, by input and by weight",
       "x = randn(512, 768)\n"
       "weight = ones(768)\n"
       "upstream = randn(512, 768)  # the gradient arriving from the layers above\n"
       "mu = x.mean(1, keepdim=1)\n"
       "var = ((x - mu) ** 2).mean(1, keepdim=1)\n"
       "y = (x - mu) / (var + 1e-5).sqrt() * weight\n"
       "loss = (y * upstream).sum()\n"
       "dx = grad(loss, x)\n"
       "dweight = grad(loss, weight)\n"},
      {"mla", "multi-head latent attention, forward: 128 tokens, 4 heads of 64, a 64-wide latent",
       "x = randn(128, 256)\n"
       "wq = randn(256, 256)\n"
       "wdkv = randn(256, 64)  # down to the latent: what a KV cache holds\n"
       "wuk = randn(64, 256)\n"
       "wuv = randn(64, 256)\n"
       "wo = randn(256, 256)\n"
       "pos = arange(128)\n"
       "q = (x @ wq).reshape(128, 4, 64).permute(1, 0, 2)\n"
       "c = x @ wdkv\n"
       "k = (c @ wuk).reshape(128, 4, 64).permute(1, 0, 2)\n"
       "v = (c @ wuv).reshape(128, 4, 64).permute(1, 0, 2)\n"
       "s = (q @ k.transpose(1, 2)) * 0.125\n"
       "s = where(pos.reshape(1, 128) > pos.reshape(128, 1), -1e9, s)  # causal\n"
       "heads = s.softmax(-1) @ v\n"
       "out = heads.permute(1, 0, 2).reshape(128, 256) @ wo\n"},
      {"attention", "causal attention over 1024 tokens, 4 heads of 64: forward and the gradients of q, k, v",
       "q = randn(4, 1024, 64)\n"
       "k = randn(4, 1024, 64)\n"
       "v = randn(4, 1024, 64)\n"
       "upstream = randn(4, 1024, 64)  # the gradient arriving from the layers above\n"
       "pos = arange(1024)\n"
       "s = (q @ k.transpose(1, 2)) * 0.125\n"
       "s = where(pos.reshape(1, 1024) > pos.reshape(1024, 1), -1e9, s)  # causal\n"
       "out = s.softmax(-1) @ v\n"
       "loss = (out * upstream).sum()\n"
       "dq = grad(loss, q)\n"
       "dk = grad(loss, k)\n"
       "dv = grad(loss, v)\n"},
  };
  return table;
}

const Example& find_example(const std::string& name) {
  std::string names;
  for (const Example& e : examples()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw Error("no example is called '" + name + "'; the examples are " + names);
}

}  // namespace loom::tools
