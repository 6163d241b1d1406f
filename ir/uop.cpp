#include "ir/uop.hpp"

#include <loom/half.hpp>

#include "ir/infer.hpp"
#include "ir/node_index.hpp"

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace loom {

// ---- op tables -------------------------------------------------------------------
namespace {
// clang-format off
constexpr std::array<std::string_view, kNumOps> kOpNames = {
    "BUFFER", "CONST", "DEFINE_VAR", "IOTA", "RESHAPE", "PERMUTE", "EXPAND", "PAD", "SHRINK", "FLIP",
    "REDUCE_AXIS", "NEG", "EXP", "EXP2", "LOG2", "SIN", "COS", "TANH", "SIGMOID", "ERF", "SQRT", "RECIP", "TRUNC", "ADD", "SUB", "MUL",
    "FDIV", "IDIV", "MOD", "MAX", "POW", "CMPLT", "CMPNE", "CMPEQ", "AND", "OR", "XOR", "SHL", "SHR", "LDEXP",
    "WHERE", "MULACC", "CAST", "BITCAST", "CONTIGUOUS", "DETACH", "ASSIGN", "COPY", "COLLECTIVE", "DEFINE_GLOBAL",
    "RANGE", "INDEX", "LOAD", "STORE", "REDUCE", "END", "BUFFERIZE", "AFTER", "SINK", "VECTORIZE",
    "GEP", "DEFINE_REG", "DOT2", "BIND"};
// clang-format on

bool in(Op op, Op lo, Op hi) { return op >= lo && op <= hi; }
}  // namespace

std::string_view op_name(Op op) { return kOpNames.at(static_cast<size_t>(op)); }
std::optional<Op> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return static_cast<Op>(i);
  return std::nullopt;
}
bool is_unary(Op op) { return in(op, Op::NEG, Op::TRUNC); }
bool is_binary(Op op) { return in(op, Op::ADD, Op::LDEXP); }
bool is_ternary(Op op) { return op == Op::WHERE || op == Op::MULACC; }
bool is_alu(Op op) { return is_unary(op) || is_binary(op) || is_ternary(op); }
bool is_comparison(Op op) { return in(op, Op::CMPLT, Op::CMPEQ); }
bool is_movement(Op op) { return in(op, Op::RESHAPE, Op::FLIP); }
bool is_transcendental(Op op) {
  return op == Op::EXP || op == Op::EXP2 || op == Op::LOG2 || op == Op::SIN || op == Op::COS ||
         op == Op::TANH || op == Op::SIGMOID || op == Op::ERF || op == Op::SQRT;
}
bool is_commutative(Op op) {
  switch (op) {
    case Op::ADD:
    case Op::MUL:
    case Op::MAX:
    case Op::CMPNE:
    case Op::CMPEQ:
    case Op::AND:
    case Op::OR:
    case Op::XOR: return true;
    default: return false;
  }
}
std::string_view axis_kind_name(AxisKind k) {
  constexpr std::array<std::string_view, 6> names = {"loop",   "parallel", "reduce",
                                                     "upcast", "unroll",   "pair"};
  return names.at(static_cast<size_t>(k));
}

bool takes_sizes(Op op) {
  return op == Op::RESHAPE || op == Op::EXPAND || op == Op::PAD || op == Op::SHRINK || op == Op::IOTA ||
         op == Op::BUFFERIZE;
}

// ---- hashing and arg equality -----------------------------------------------------
namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}
uint64_t hash_str(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}
uint64_t hash_ints(uint64_t h, const std::vector<int64_t>& v) {
  for (int64_t x : v) h = mix(h, static_cast<uint64_t>(x));
  return mix(h, v.size());
}
}  // namespace

bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b));
  return a == b;
}

uint64_t arg_hash(const Arg& a) {
  uint64_t h = mix(0x1234, a.index());
  return std::visit(
      [h](const auto& v) -> uint64_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return h;
        else if constexpr (std::is_same_v<T, int64_t>)
          return mix(h, static_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<T, double>)
          return mix(h, std::bit_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return hash_ints(h, v);
        else if constexpr (std::is_same_v<T, std::string>)
          return mix(h, hash_str(v));
        else if constexpr (std::is_same_v<T, AxisArg>)
          return mix(mix(h, static_cast<uint64_t>(v.id)), static_cast<uint64_t>(v.kind));
        else if constexpr (std::is_same_v<T, VarArg>)
          return mix(mix(mix(h, hash_str(v.name)), static_cast<uint64_t>(v.min)),
                     static_cast<uint64_t>(v.max));
        else if constexpr (std::is_same_v<T, ReduceArg>)
          return hash_ints(mix(h, static_cast<uint64_t>(v.op)), v.axes);
        else {
          uint64_t s = mix(h, v.size());
          for (const Dim& d : v)  // a symbolic size by its expression's structure, bindings included
            s = d.is_symbolic() ? mix(mix(s, 0x5D), d.expr()->hash())
                                : mix(s, static_cast<uint64_t>(d.value()));
          return s;
        }
      },
      a);
}

namespace {
uint64_t node_hash(Op op, DType dt, const std::vector<UOpPtr>& src, const Arg& arg) {
  uint64_t h = mix(static_cast<uint64_t>(op), static_cast<uint64_t>(dt.scalar));
  h = mix(h, dt.lanes * 2u + (dt.ptr ? 1u : 0u));
  h = mix(h, arg_hash(arg));
  for (const auto& s : src) h = mix(h, s->hash());
  return mix(h, src.size());
}
}  // namespace

// ---- interning ----------------------------------------------------------------------
// Sharded by hash so threads building unrelated graphs rarely contend. Each
// shard is an open-addressing table of (hash, node) pairs: a lookup compares
// stored hashes in one array before it touches a node. The table holds raw
// pointers: a node erases its own entry when it dies (leaving a tombstone),
// and a lookup that finds a dying node (lock() fails) makes a fresh one beside it.
struct InternTable {
  static constexpr size_t kShards = 64;
  class Shard {
   public:
    std::mutex mu;
    // The live node equal to (op, dtype, src, arg) with hash h, or null.
    UOpPtr find(uint64_t h, Op op, DType dt, const std::vector<UOpPtr>& src, const Arg& arg) const {
      if (entries_.empty()) return nullptr;
      for (size_t i = slot(h);; i = (i + 1) & mask_) {
        const Entry& e = entries_[i];
        if (!e.node) return nullptr;
        if (e.node != tombstone() && e.hash == h && same(e.node, op, dt, src, arg))
          if (auto alive = e.node->weak_from_this().lock()) return alive;
      }
    }
    void insert(uint64_t h, UOp* n) {
      if (2 * (used_ + 1) > entries_.size()) rehash(size_ + 1);
      size_t i = slot(h);
      while (entries_[i].node && entries_[i].node != tombstone()) i = (i + 1) & mask_;
      if (!entries_[i].node) ++used_;
      entries_[i] = {h, n};
      ++size_;
    }
    // A node another thread's equal one beat to the table was never inserted.
    void erase(const UOp* n) {
      if (entries_.empty()) return;
      for (size_t i = slot(n->hash_); entries_[i].node; i = (i + 1) & mask_)
        if (entries_[i].node == n) {
          entries_[i].node = tombstone();
          --size_;
          return;
        }
    }
    size_t size() const { return size_; }
    size_t bytes() const { return entries_.capacity() * sizeof(Entry); }
    // Drops the tombstones and shrinks the array to fit the live entries.
    void trim() { rehash(size_); }

   private:
    struct Entry {
      uint64_t hash = 0;
      UOp* node = nullptr;  // null: never used; tombstone(): erased
    };
    static UOp* tombstone() { return reinterpret_cast<UOp*>(alignof(UOp)); }
    // The shard came from the hash's low bits; the slot takes its high ones.
    size_t slot(uint64_t h) const { return static_cast<size_t>(h >> 32) & mask_; }
    // Rebuilds without tombstones at the smallest power of two (from 64) that
    // `live` entries fill at most a quarter of: a table grows with its live nodes and
    // shrinks again once they have died, and at least a quarter of the table's
    // slots are inserted between two rebuilds. A table with no live entries
    // gives its array back.
    void rehash(size_t live) {
      if (live == 0) {
        std::vector<Entry>().swap(entries_);
        mask_ = used_ = 0;
        return;
      }
      size_t capacity = 64;
      while (4 * live > capacity) capacity *= 2;
      std::vector<Entry> old(capacity);
      old.swap(entries_);
      mask_ = capacity - 1;
      used_ = size_ = 0;
      for (const Entry& e : old)
        if (e.node && e.node != tombstone()) insert(e.hash, e.node);
    }
    std::vector<Entry> entries_;
    size_t mask_ = 0;
    size_t used_ = 0;  // live entries and tombstones
    size_t size_ = 0;  // live entries
  };
  std::array<Shard, kShards> shards;

  static InternTable& get() {
    static InternTable* table = new InternTable();  // never destroyed: nodes may outlive statics
    return *table;
  }
  Shard& shard(uint64_t h) { return shards[h % kShards]; }

  static bool same(const UOp* n, Op op, DType dt, const std::vector<UOpPtr>& src, const Arg& arg) {
    if (n->op != op || !(n->dtype == dt) || n->src.size() != src.size()) return false;
    for (size_t i = 0; i < src.size(); ++i)
      if (n->src[i] != src[i]) return false;
    return arg_equal(n->arg, arg);
  }

  void erase(UOp* n) {
    Shard& s = shard(n->hash_);
    std::lock_guard lock(s.mu);
    s.erase(n);
  }
};

UOp::UOp(Built, Op op_, DType dtype_, std::vector<UOpPtr> src_, Arg arg_, uint64_t hash)
    : op(op_), dtype(dtype_), src(std::move(src_)), arg(std::move(arg_)), hash_(hash) {
  validate_uop(op, dtype, src, arg);
  shape_ = infer_shape(op, src, arg);
  check_size(op, dtype, shape_);
  std::tie(vmin_, vmax_) = infer_bounds(op, dtype, src, arg);
  ranges_ = infer_open_ranges(op, src, this);
}

// Runs before any member is destroyed, so a lookup racing with this node's death
// still finds it whole (and lock() fails). The outermost destructor drains the
// worklist; the ones it triggers only add to it.
UOp::~UOp() {
  thread_local std::vector<UOpPtr> pending;
  thread_local bool draining = false;
  InternTable::get().erase(this);
  for (auto& s : src) pending.push_back(std::move(s));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    UOpPtr last = std::move(pending.back());
    pending.pop_back();
    last.reset();
  }
  draining = false;
}

// A malformed node (wrong source count, wrong arg kind) fails inside shape or
// bounds inference with a standard exception; it surfaces as a loom::Error.
std::shared_ptr<UOp> UOp::construct(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg, uint64_t hash) {
  const size_t n = src.size();
  try {
    return std::allocate_shared<UOp>(std::allocator<UOp>(), Built(), op, dtype, std::move(src),
                                     std::move(arg), hash);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("UOp::make: cannot build " + std::string(op_name(op)) + " " + to_string(dtype) + " from " +
                std::to_string(n) + " source(s) and this arg: " + e.what());
  }
}

UOpPtr UOp::make(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg) {
  for (const auto& s : src)
    if (!s) throw Error("UOp::make: " + std::string(op_name(op)) + " given a null source");
  // Sizes are Dims: numbers given as sizes are taken as them, so a node has one form.
  if (const auto* numbers = std::get_if<std::vector<int64_t>>(&arg); numbers && takes_sizes(op))
    arg = Shape(*numbers);
  if (const auto* sizes = std::get_if<Shape>(&arg); sizes && (op == Op::PERMUTE || op == Op::FLIP))
    arg = concrete(*sizes, op_name(op));  // an order and axes are numbers
  const uint64_t h = node_hash(op, dtype, src, arg);
  InternTable& table = InternTable::get();
  auto& shard = table.shard(h);
  {
    std::lock_guard lock(shard.mu);
    if (UOpPtr alive = shard.find(h, op, dtype, src, arg)) return alive;
  }
  // Built outside the lock: shape and bounds inference may be non-trivial.
  std::shared_ptr<UOp> fresh = construct(op, dtype, std::move(src), std::move(arg), h);
  std::lock_guard lock(shard.mu);
  if (UOpPtr alive = shard.find(h, op, dtype, fresh->src, fresh->arg)) return alive;  // another thread won
  shard.insert(h, fresh.get());
  return fresh;
}

UOpPtr UOp::make_buffer(DType dtype, int64_t id, int64_t size, std::shared_ptr<void> storage) {
  UOpPtr buf = make(Op::BUFFER, dtype, {}, std::vector<int64_t>{id, size});
  if (buf->storage_ && buf->storage_ != storage)
    throw Error("UOp::make_buffer: buffer id " + std::to_string(id) + " already has storage");
  // Set once, before any other thread can know this fresh id.
  const_cast<UOp&>(*buf).storage_ = std::move(storage);
  return buf;
}

int64_t UOp::next_buffer_id() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1);
}

size_t intern_table_size() {
  size_t n = 0;
  for (auto& s : InternTable::get().shards) {
    std::lock_guard lock(s.mu);
    n += s.size();
  }
  return n;
}

size_t intern_table_bytes() {
  size_t bytes = 0;
  for (auto& s : InternTable::get().shards) {
    std::lock_guard lock(s.mu);
    bytes += s.bytes();
  }
  return bytes;
}

void trim_intern_table() {
  for (auto& s : InternTable::get().shards) {
    std::lock_guard lock(s.mu);
    s.trim();
  }
}

UOpPtr UOp::with_src(std::vector<UOpPtr> new_src) const { return make(op, dtype, std::move(new_src), arg); }

double UOp::const_value() const {
  if (const double* d = std::get_if<double>(&arg)) return *d;
  return static_cast<double>(std::get<int64_t>(arg));
}
int64_t UOp::const_int() const {
  if (const int64_t* i = std::get_if<int64_t>(&arg)) return *i;
  return static_cast<int64_t>(std::get<double>(arg));
}

// ---- builders ------------------------------------------------------------------------
// Integers wrap to the dtype's width, as a C++ integral conversion (and
// PyTorch, for an out-of-range scalar) would: a UInt8 300 is 44.
UOpPtr const_int(DType dt, int64_t v) {
  if (dt.is_float()) return const_float(dt, static_cast<double>(v));
  switch (dt.scalar) {
    case Scalar::Bool: v = v != 0; break;
    case Scalar::UInt8: v = static_cast<uint8_t>(static_cast<uint64_t>(v)); break;
    case Scalar::Int32: v = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); break;
    default: break;
  }
  return UOp::make(Op::CONST, dt, {}, v);
}
UOpPtr const_float(DType dt, double v) {
  if (!dt.is_float()) throw Error("const_float: dtype " + to_string(dt) + " is not a float type");
  if (dt.scalar == Scalar::Float32) v = static_cast<double>(static_cast<float>(v));
  // Through float first, as every conversion to a half type (docs/semantics.md).
  if (dt.scalar == Scalar::BFloat16) v = static_cast<float>(bfloat16(static_cast<float>(v)));
  if (dt.scalar == Scalar::Float16) v = static_cast<float>(float16(static_cast<float>(v)));
  return UOp::make(Op::CONST, dt, {}, v);
}
// A whole number within int64 converts like an integer (wrapping); anything
// else like a float-to-integer cast: truncated, saturated, NaN gives 0.
UOpPtr const_like(DType dt, double v) {
  if (dt.is_float()) return const_float(dt, v);
  if (dt.is_bool()) return const_int(dt, v != 0.0);
  if (std::isnan(v)) return const_int(dt, 0);
  const double t = std::trunc(v);
  if (t == v && t >= -0x1p63 && t < 0x1p63) return const_int(dt, static_cast<int64_t>(t));
  const double lo = dt.scalar == Scalar::UInt8 ? 0.0 : dt.scalar == Scalar::Int32 ? -0x1p31 : -0x1p63;
  const double hi = dt.scalar == Scalar::UInt8 ? 255.0 : dt.scalar == Scalar::Int32 ? 0x1p31 - 1 : 0x1p63;
  if (t >= hi) return const_int(dt, dt.scalar == Scalar::Int64 ? INT64_MAX : static_cast<int64_t>(hi));
  if (t <= lo) return const_int(dt, static_cast<int64_t>(lo));
  return const_int(dt, static_cast<int64_t>(t));
}
std::optional<int64_t> trip(const UOpPtr& range) {
  if (range->op != Op::RANGE || !range->src.at(0)->is_const()) return std::nullopt;
  return range->src[0]->const_int();
}

int64_t trip_bound(const UOpPtr& range) {
  if (range->op != Op::RANGE) return 0;
  return std::max<int64_t>(range->src.at(0)->vmax(), 0);
}

UOpPtr make_range(int64_t end, int64_t axis_id, AxisKind kind) {
  return UOp::make(Op::RANGE, DType::Int64, {const_int(DType::Int64, end)}, AxisArg{axis_id, kind});
}
UOpPtr make_range(UOpPtr end, int64_t axis_id, AxisKind kind) {
  return UOp::make(Op::RANGE, DType::Int64, {std::move(end)}, AxisArg{axis_id, kind});
}
UOpPtr make_range(const Dim& end, int64_t axis_id, AxisKind kind) {
  return end.is_symbolic() ? make_range(end.expr(), axis_id, kind) : make_range(end.value(), axis_id, kind);
}
UOpPtr make_var(const std::string& name, int64_t min, int64_t max) {
  return UOp::make(Op::DEFINE_VAR, DType::Int64, {}, VarArg{name, min, max});
}
UOpPtr alu(Op op, std::vector<UOpPtr> src) {
  if (src.empty()) throw Error(std::string("alu: ") + std::string(op_name(op)) + " needs sources");
  DType dt = is_comparison(op) ? DType::Bool.vec(src[0]->dtype.lanes)
             : op == Op::WHERE ? src.at(1)->dtype
                               : src[0]->dtype;
  return UOp::make(op, dt, std::move(src));
}

namespace {
UOpPtr cst(const UOpPtr& like, int64_t v) { return const_like(like->dtype.base(), static_cast<double>(v)); }
}  // namespace
UOpPtr operator+(const UOpPtr& a, const UOpPtr& b) { return alu(Op::ADD, {a, b}); }
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b) { return alu(Op::SUB, {a, b}); }
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b) { return alu(Op::MUL, {a, b}); }
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b) {
  return alu(a->dtype.is_float() ? Op::FDIV : Op::IDIV, {a, b});
}
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b) { return alu(Op::MOD, {a, b}); }
UOpPtr operator-(const UOpPtr& a) { return alu(Op::NEG, {a}); }
UOpPtr operator<(const UOpPtr& a, const UOpPtr& b) { return alu(Op::CMPLT, {a, b}); }
UOpPtr operator+(const UOpPtr& a, int64_t b) { return a + cst(a, b); }
UOpPtr operator-(const UOpPtr& a, int64_t b) { return a - cst(a, b); }
UOpPtr operator*(const UOpPtr& a, int64_t b) { return a * cst(a, b); }
UOpPtr operator/(const UOpPtr& a, int64_t b) { return a / cst(a, b); }
UOpPtr operator%(const UOpPtr& a, int64_t b) { return a % cst(a, b); }
UOpPtr operator<(const UOpPtr& a, int64_t b) { return a < cst(a, b); }
UOpPtr umax(const UOpPtr& a, const UOpPtr& b) { return alu(Op::MAX, {a, b}); }
UOpPtr eq(const UOpPtr& a, const UOpPtr& b) { return alu(Op::CMPEQ, {a, b}); }
UOpPtr ne(const UOpPtr& a, const UOpPtr& b) { return alu(Op::CMPNE, {a, b}); }
UOpPtr land(const UOpPtr& a, const UOpPtr& b) { return alu(Op::AND, {a, b}); }
UOpPtr where(const UOpPtr& c, const UOpPtr& a, const UOpPtr& b) { return alu(Op::WHERE, {c, a, b}); }
UOpPtr cast(const UOpPtr& a, DType dt) {
  if (a->dtype == dt) return a;
  return UOp::make(Op::CAST, dt, {a});
}

// ---- traversal -------------------------------------------------------------------------
namespace {
std::vector<UOpPtr> toposort_into(const std::vector<UOpPtr>& roots, NodeIndex* index) {
  std::vector<UOpPtr> order;
  NodeIndex local;
  NodeIndex& seen = index ? *index : local;  // a node maps to its place in `order` once it is there
  std::vector<std::pair<const UOpPtr*, size_t>> stack;  // node, next source to visit
  const auto visit = [&](const UOpPtr& n) {
    if (!seen.insert(n.get(), NodeIndex::kMissing)) return false;
    stack.emplace_back(&n, 0);
    return true;
  };
  for (const auto& root : roots) {
    if (!root || !visit(root)) continue;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < (*node)->src.size()) {
        visit((*node)->src[next++]);
        continue;
      }
      if (index) index->set(node->get(), static_cast<uint32_t>(order.size()));
      order.push_back(*node);
      stack.pop_back();
    }
  }
  return order;
}
}  // namespace

std::vector<UOpPtr> toposort(const std::vector<UOpPtr>& roots) { return toposort_into(roots, nullptr); }
std::vector<UOpPtr> toposort(const std::vector<UOpPtr>& roots, NodeIndex& index) {
  return toposort_into(roots, &index);
}
std::vector<UOpPtr> toposort(const UOpPtr& root) { return toposort(std::vector<UOpPtr>{root}); }

// A walk that stops at the target: no order to keep, no node held.
bool reaches(const UOpPtr& root, const UOpPtr& target) {
  NodeIndex seen;
  std::vector<const UOp*> stack{root.get()};
  seen.insert(root.get(), 0);
  while (!stack.empty()) {
    const UOp* n = stack.back();
    stack.pop_back();
    if (n == target.get()) return true;
    for (const auto& s : n->src)
      if (seen.insert(s.get(), 0)) stack.push_back(s.get());
  }
  return false;
}

namespace {
// A node's heap bytes: its block (made by allocate_shared: the node and its
// reference counts), its sources, its arg's and shape's arrays, its open-range
// set (shared between nodes with equal sets, so an upper bound) and its share
// of the intern table (an entry of 16 bytes at a load of a quarter to a half).
size_t node_bytes(const UOp& n) {
  constexpr size_t kControlBlock = 16, kTableShare = 48;
  size_t bytes = sizeof(UOp) + kControlBlock + kTableShare + n.src.capacity() * sizeof(UOpPtr) +
                 n.ranges().size() * sizeof(OpenRanges::Item);
  if (n.shape()) bytes += n.shape()->capacity() * sizeof(Dim);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          bytes += v.capacity() * sizeof(int64_t);
        else if constexpr (std::is_same_v<T, std::string>)
          bytes += v.capacity() > 15 ? v.capacity() + 1 : 0;
        else if constexpr (std::is_same_v<T, VarArg>)
          bytes += v.name.capacity() > 15 ? v.name.capacity() + 1 : 0;
        else if constexpr (std::is_same_v<T, ReduceArg>)
          bytes += v.axes.capacity() * sizeof(int64_t);
        else if constexpr (std::is_same_v<T, Shape>)
          bytes += v.capacity() * sizeof(Dim);
      },
      n.arg);
  return bytes;
}
}  // namespace

size_t graph_bytes(const std::vector<UOpPtr>& roots) {
  size_t bytes = 0;
  for (const auto& n : toposort(roots)) bytes += node_bytes(*n);
  return bytes;
}

std::vector<UOpPtr> ranges_of(const UOpPtr& root) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(root))
    if (n->op == Op::RANGE) out.push_back(n);
  return out;
}

}  // namespace loom
