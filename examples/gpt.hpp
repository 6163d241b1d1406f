#pragma once
// A character-level GPT (Radford et al., 2018; the layout of Karpathy's nanoGPT)
// written as a PyTorch user writes it, and the text it learns: the fortune
// cookies of Debian's `fortunes` package (about 2.6 MB of English).
//
//   tokens [B, T] -> token embedding + position embedding -> dropout
//     -> n_layer blocks: x + attn(ln_1(x)), then x + mlp(ln_2(x))
//        attn: causal multi-head self-attention (n_head heads), projection, dropout
//        mlp:  d -> 4d, GELU, 4d -> d, dropout
//     -> ln_f -> head (the token embedding's matrix: weight tying) -> logits [B, T, vocab]
//
// examples/gpt.cpp trains and samples it; tests/examples/gpt.cmake runs it small.
#include <loom/loom.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

using loom::Tensor;

struct Config {
  int64_t vocab_size = 0;    // characters known: the corpus's
  int64_t block_size = 256;  // the longest context, and the training windows' length
  int64_t n_layer = 4, n_head = 4, d_model = 256;
  double dropout = 0.1;
};

// Causal self-attention over all heads at once: one linear layer makes the
// queries, keys and values, scaled_dot_product_attention mixes them (each token
// sees itself and the tokens before it), a second one projects back. Dropout
// acts on the projected result only: loom's scaled_dot_product_attention has no
// dropout_p, so the attention weights are not dropped (nanoGPT drops both).
struct CausalSelfAttention : loom::nn::Module {
  loom::nn::Linear c_attn, c_proj;
  loom::nn::Dropout resid_dropout;
  int64_t n_head;

  explicit CausalSelfAttention(const Config& c)
      : Module("CausalSelfAttention"),
        c_attn(c.d_model, 3 * c.d_model),
        c_proj(c.d_model, c.d_model),
        resid_dropout(c.dropout),
        n_head(c.n_head) {
    register_module("c_attn", &CausalSelfAttention::c_attn);
    register_module("c_proj", &CausalSelfAttention::c_proj);
    register_module("resid_dropout", &CausalSelfAttention::resid_dropout);
  }

  Tensor forward(const Tensor& x) const override {  // [B, T, d] -> [B, T, d]
    const int64_t b = x.shape()[0], t = x.shape()[1], d = x.shape()[2];
    const Tensor qkv = c_attn(x);
    const auto heads = [&](int64_t part) {  // -> [B, n_head, T, d / n_head]
      return qkv.slice(2, part * d, (part + 1) * d).reshape({b, t, n_head, d / n_head}).permute({0, 2, 1, 3});
    };
    const Tensor y = loom::nn::scaled_dot_product_attention(heads(0), heads(1), heads(2), {}, std::nullopt,
                                                            /*is_causal=*/true);
    return resid_dropout(c_proj(y.permute({0, 2, 1, 3}).reshape({b, t, d})));
  }

  // One token x [1, 1, d] at the position whose row of the caches `at` marks ([1, 1, block,
  // 1], Bool): its key and value are written into that row of k and v ([1, n_head, block,
  // d / n_head]), and its query attends to the rows `seen` allows ([1, 1, 1, block], Bool:
  // the positions up to its own). The shapes are the same at every position.
  Tensor decode(const Tensor& x, const Tensor& at, const Tensor& seen, Tensor& k, Tensor& v) const {
    const int64_t d = x.shape()[2];
    const Tensor qkv = c_attn(x);
    const auto head = [&](int64_t part) {  // -> [1, n_head, 1, d / n_head]
      return qkv.slice(2, part * d, (part + 1) * d).reshape({1, 1, n_head, d / n_head}).permute({0, 2, 1, 3});
    };
    k.assign(loom::where(at, head(1), k));
    v.assign(loom::where(at, head(2), v));
    const Tensor y = loom::nn::scaled_dot_product_attention(head(0), k, v, seen);
    return resid_dropout(c_proj(y.permute({0, 2, 1, 3}).reshape({1, 1, d})));
  }
};

struct MLP : loom::nn::Module {
  loom::nn::Linear c_fc, c_proj;
  loom::nn::GELU gelu;  // the exact (erf) form, as nanoGPT's nn.GELU()
  loom::nn::Dropout dropout;

  explicit MLP(const Config& c)
      : Module("MLP"), c_fc(c.d_model, 4 * c.d_model), c_proj(4 * c.d_model, c.d_model), dropout(c.dropout) {
    register_module("c_fc", &MLP::c_fc);
    register_module("gelu", &MLP::gelu);
    register_module("c_proj", &MLP::c_proj);
    register_module("dropout", &MLP::dropout);
  }
  Tensor forward(const Tensor& x) const override { return dropout(c_proj(gelu(c_fc(x)))); }
};

// Pre-LayerNorm: each sub-layer reads a normalised copy of the residual stream
// and adds its result back.
struct Block : loom::nn::Module {
  loom::nn::LayerNorm ln_1;
  CausalSelfAttention attn;
  loom::nn::LayerNorm ln_2;
  MLP mlp;

  explicit Block(const Config& c) : Module("Block"), ln_1(c.d_model), attn(c), ln_2(c.d_model), mlp(c) {
    register_module("ln_1", &Block::ln_1);
    register_module("attn", &Block::attn);
    register_module("ln_2", &Block::ln_2);
    register_module("mlp", &Block::mlp);
  }
  Tensor forward(const Tensor& x) const override {
    const Tensor h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }
  // One token, through the cached keys and values (CausalSelfAttention::decode).
  Tensor decode(const Tensor& x, const Tensor& at, const Tensor& seen, Tensor& k, Tensor& v) const {
    const Tensor h = x + attn.decode(ln_1(x), at, seen, k, v);
    return h + mlp(ln_2(h));
  }
};

// The keys and values of every layer at every position of a block, for decoding one
// token at a time: [1, n_head, block_size, d_model / n_head] each, zeros at first.
// Model::decode writes a position's row and reads the rows up to it, so a token
// costs one position's work, not a forward pass over its whole context.
struct KVCache {
  std::vector<Tensor> k, v;  // one per layer
  explicit KVCache(const Config& c) {
    const loom::Shape shape{1, c.n_head, c.block_size, c.d_model / c.n_head};
    for (int64_t i = 0; i < c.n_layer; ++i) {
      k.push_back(Tensor::zeros(shape).realize());
      v.push_back(Tensor::zeros(shape).realize());
    }
  }
};

class Model : public loom::nn::Module {
 public:
  Config config;
  loom::nn::Embedding wte, wpe;
  loom::nn::Dropout drop;
  loom::nn::Sequential h;
  loom::nn::LayerNorm ln_f;
  loom::nn::Linear lm_head;

  // Draws the initial weights from loom's generator (manual_seed first for a
  // reproducible model): N(0, 0.02) for every matrix, N(0, 0.02 / sqrt(2 n_layer))
  // for the projections that write into the residual stream (GPT-2's scaling, so
  // the stream's variance does not grow with depth), zero biases.
  explicit Model(const Config& c)
      : Module("GPT"),
        config(c),
        wte(c.vocab_size, c.d_model),
        wpe(c.block_size, c.d_model),
        drop(c.dropout),
        ln_f(c.d_model),
        lm_head(c.d_model, c.vocab_size, /*bias=*/false) {
    if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 1 || c.n_head < 1 || c.d_model % c.n_head != 0)
      throw std::invalid_argument(
          "gpt::Config: vocab_size, block_size, n_layer, n_head >= 1 and d_model a "
          "multiple of n_head are needed");
    for (int64_t i = 0; i < c.n_layer; ++i) h.push_back(Block(c));
    // Weight tying (Press and Wolf, 2017): the head scores a hidden state against
    // every token's embedding. One tensor, so its gradient sums both uses and
    // parameters() lists it once, as wte.weight.
    lm_head.weight = wte.weight;
    register_module("wte", &Model::wte);
    register_module("wpe", &Model::wpe);
    register_module("drop", &Model::drop);
    register_module("h", &Model::h);
    register_module("ln_f", &Model::ln_f);
    register_module("lm_head", &Model::lm_head);
    init_weights();
  }

  // tokens [B, T] (Int32, T <= block_size) -> the final hidden states [B, T, d], after ln_f.
  Tensor hidden(const Tensor& tokens) const {
    const int64_t t = tokens.shape()[1];
    if (t > config.block_size)
      throw std::invalid_argument("gpt::Model: " + std::to_string(t) + " tokens exceed block_size " +
                                  std::to_string(config.block_size));
    return ln_f(h(drop(wte(tokens) + wpe(Tensor::arange(t)))));
  }
  // tokens [B, T] -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& tokens) const override { return lm_head(hidden(tokens)); }

  // The logits [vocab_size] after `token` ([1, 1], Int32) at `position` ([1], Int32, below
  // block_size), the tokens before it already decoded into `cache` at positions 0 to
  // position - 1: equal to forward's at that position over the whole sequence. The
  // position is a tensor, so every token runs the kernels compiled for the first.
  Tensor decode(const Tensor& token, const Tensor& position, KVCache& cache) const {
    const Tensor rows = Tensor::arange(config.block_size);
    const Tensor at = rows.eq(position).reshape({1, 1, config.block_size, 1});
    const Tensor seen = rows.le(position).reshape({1, 1, 1, config.block_size});
    Tensor x = drop(wte(token) + wpe(position).reshape({1, 1, config.d_model}));
    for (int64_t i = 0; i < config.n_layer; ++i)
      x = h.at<Block>(static_cast<size_t>(i)).decode(x, at, seen, cache.k[i], cache.v[i]);
    return lm_head(ln_f(x)).reshape({config.vocab_size});
  }

  // nanoGPT's rule: every parameter of two or more axes (the embeddings and the
  // linear layers' matrices) decays; biases and LayerNorm's gains and shifts do
  // not. AdamW has no parameter groups in loom, so each list gets an optimizer.
  std::pair<std::vector<Tensor>, std::vector<Tensor>> decay_groups() const {
    std::pair<std::vector<Tensor>, std::vector<Tensor>> groups;
    for (const Tensor& p : parameters()) (p.ndim() >= 2 ? groups.first : groups.second).push_back(p);
    return groups;
  }

 private:
  void init_weights() {
    loom::NoGrad no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
    for (auto [name, p] : named_parameters()) {
      if (name.starts_with("ln_") || name.find(".ln_") != std::string::npos) continue;  // ones and zeros
      if (p.ndim() >= 2)
        loom::nn::normal_(p, 0, name.ends_with("c_proj.weight") ? residual_std : 0.02);
      else
        p.assign(Tensor::zeros(p.shape())).realize();
    }
  }
};

// Model::decode with its logits and the caches' new rows realized together: one token's
// step, as a loom::Capture records it (every later token then replays its kernels).
inline Tensor decode_realized(const Model& model, const Tensor& token, const Tensor& position,
                              KVCache& cache) {
  Tensor logits = model.decode(token, position, cache);
  std::vector<Tensor> computed{logits};
  for (size_t i = 0; i < cache.k.size(); ++i) computed.push_back(cache.k[i]), computed.push_back(cache.v[i]);
  loom::realize(computed);
  return logits;
}

// Decodes one token at a time through its own KVCache. By default each token's step
// (decode_realized) runs under a loom::Capture: every token after the second replays the
// first's kernels with its own token and position, no graph built. Positions start at
// 0; decoding from position 0 again overwrites the cache's rows as it goes (the rows
// past a position are masked), so a full cache is rebuilt by feeding its kept tokens anew.
class Decoder {
 public:
  // Steps::built builds each token's graph anew, as written without a Capture (its
  // kernels come from the kernel cache after the first token).
  enum class Steps { replayed, built };
  explicit Decoder(const Model& model, Steps steps = Steps::replayed)
      : model_(model), cache_(model.config), steps_(steps), replay_([this](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{decode_realized(model_, in[0], in[1], cache_)};
        }) {}
  Decoder(const Decoder&) = delete;  // the Capture's step refers to this decoder's cache
  Decoder& operator=(const Decoder&) = delete;

  // The logits [vocab_size] after `token` at `position`.
  Tensor operator()(int32_t token, int32_t position) {
    const std::vector<Tensor> in = inputs(token, position);
    return steps_ == Steps::replayed ? replay_(in)[0] : decode_realized(model_, in[0], in[1], cache_);
  }
  // Whether decoding `token` at `position` now replays recorded kernels.
  bool replays(int32_t token, int32_t position) const {
    return steps_ == Steps::replayed && replay_.captured(inputs(token, position));
  }

 private:
  static std::vector<Tensor> inputs(int32_t token, int32_t position) {
    return {Tensor::from_vector<int32_t>({token}, {1, 1}), Tensor::from_vector<int32_t>({position}, {1})};
  }
  const Model& model_;
  KVCache cache_;
  Steps steps_;
  loom::Capture replay_;
};

// Where Debian's fortunes package puts its files.
inline const std::filesystem::path default_dir = "/usr/share/games/fortunes";

// The fortune files as tokens: each byte value the files hold is a token. Each
// file's first part goes to the training text and its last `val_fraction`
// (cut at a fortune's end, the "%" line) to the validation text, so both see
// every file's kind of humour.
struct Corpus {
  std::vector<uint8_t> vocab;  // token id -> byte, ascending
  std::vector<int32_t> train, val;
  std::vector<std::filesystem::path> files;

  int64_t vocab_size() const { return static_cast<int64_t>(vocab.size()); }
  std::string decode(const std::vector<int32_t>& tokens) const {
    std::string s;
    for (const int32_t t : tokens) s += static_cast<char>(vocab.at(static_cast<size_t>(t)));
    return s;
  }
  // Bytes the corpus never holds are an error.
  std::vector<int32_t> encode(const std::string& text) const {
    std::vector<int32_t> out;
    for (const char ch : text) {
      const auto it = std::lower_bound(vocab.begin(), vocab.end(), static_cast<uint8_t>(ch));
      if (it == vocab.end() || *it != static_cast<uint8_t>(ch))
        throw std::invalid_argument("byte " + std::to_string(static_cast<uint8_t>(ch)) +
                                    " is not in the corpus");
      out.push_back(static_cast<int32_t>(it - vocab.begin()));
    }
    return out;
  }
};

// The plain-text fortune files of `dir` in name order: the strfile indexes
// (.dat) and the .u8 links to the same files are skipped.
inline std::vector<std::filesystem::path> fortune_files(const std::filesystem::path& dir = default_dir) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (entry.is_symlink() || !entry.is_regular_file() || ext == ".dat" || ext == ".u8") continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline bool installed(const std::filesystem::path& dir = default_dir) { return !fortune_files(dir).empty(); }

inline Corpus load(const std::filesystem::path& dir = default_dir, double val_fraction = 0.1) {
  Corpus c;
  c.files = fortune_files(dir);
  if (c.files.empty()) throw std::runtime_error("no fortune files in " + dir.string());
  std::string train, val;
  for (const auto& path : c.files) {
    std::ifstream in(path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.good() && !in.eof()) throw std::runtime_error("cannot read " + path.string());
    const auto at = static_cast<size_t>(static_cast<double>(text.size()) * (1 - val_fraction));
    size_t cut = text.find("\n%\n", at);
    cut = cut == std::string::npos ? at : cut + 3;
    train += text.substr(0, cut);
    val += text.substr(cut);
  }
  std::array<bool, 256> seen{};
  for (const std::string* s : {&train, &val})
    for (const char ch : *s) seen[static_cast<uint8_t>(ch)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<size_t>(b)]) c.vocab.push_back(static_cast<uint8_t>(b));
  c.train = c.encode(train);
  c.val = c.encode(val);
  return c;
}

}  // namespace gpt
