#pragma once
// The UOp: an immutable, hash-consed IR node (op, dtype, sources, arg).
// Building the same node twice yields the same object, so equality is pointer
// equality and rewrites memoise by pointer. See docs/ir.md.
#include <loom/dtype.hpp>
#include <loom/error.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace loom {

// clang-format off: the ops read best grouped, as in docs/ir.md
enum class Op : uint8_t {
  // tensor level
  BUFFER,
  CONST,
  DEFINE_VAR,
  IOTA,  // 1-D index tensor: element i is i; arg = {n}; the source of arange, eye, one_hot, random counters
  RESHAPE,
  PERMUTE,
  EXPAND,
  PAD,
  SHRINK,
  FLIP,
  REDUCE_AXIS,
  // ALU: unary
  NEG,
  EXP,
  EXP2,
  LOG2,
  SIN,
  COS,
  TANH,     // Float32 only: codegen lowers it to ir/float_math.hpp's tanh_f32
  SIGMOID,  // Float32 only: 1 / (1 + e^-x), lowered to sigmoid_f32
  ERF,      // Float32 only: lowered to erf_f32
  SQRT,
  RECIP,
  TRUNC,
  // ALU: binary
  ADD,
  SUB,
  MUL,
  FDIV,
  IDIV,
  MOD,
  MAX,
  POW,
  CMPLT,
  CMPNE,
  CMPEQ,
  AND,
  OR,
  XOR,
  SHL,
  SHR,
  LDEXP,  // (x, n), n a whole float: x * 2^n rounded once (exp's scaling, ir/float_math.hpp)
  // ALU: ternary
  WHERE,
  MULACC,
  CAST,
  BITCAST,
  CONTIGUOUS,
  DETACH,
  ASSIGN,
  COPY,
  COLLECTIVE,  // src = (x), arg = CollectiveArg's ints: a collective across processes (ir/collective.hpp)
  // kernel level
  DEFINE_GLOBAL,  // kernel buffer parameter: arg = argument slot, dtype = element pointer
  RANGE,          // src = (end), arg = AxisArg
  INDEX,          // src = (buffer, linear index[, valid]) -> element pointer
  LOAD,           // src = (INDEX) -> value; 0 where the index is not valid
  STORE,          // src = (INDEX, value); skipped where the index is not valid
  REDUCE,         // src = (value, ranges...), arg = ReduceArg{op}
  END,            // src = (value, ranges...): closes the loops of `ranges`
  BUFFERIZE,      // src = (value, ranges...): a buffer rangeify proposes
  AFTER,          // src = (value, deps...): value, ordered after deps
  SINK,           // src = roots
  VECTORIZE,      // src = scalars -> one vector value
  GEP,            // src = (vector), arg = lane
  DEFINE_REG,     // accumulator register, arg = size
  DOT2,  // src = (a, b, c), a and b of 2n lanes, c of n: lane i is (c[i] + a[2i+1] b[2i+1]) + a[2i] b[2i]
         // (a register tile's sum over a pair range; docs/kernel-ir.md)
  BIND,  // src = (DEFINE_VAR, CONST value): a variable bound to a value, a leaf of a symbolic size
         // (loom::Dim); the schedule takes the values out (docs/symbolic.md)
  COUNT_
};
// clang-format on
constexpr int kNumOps = static_cast<int>(Op::COUNT_);

std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);

bool is_unary(Op op);
bool is_binary(Op op);
bool is_ternary(Op op);
bool is_alu(Op op);          // unary, binary or ternary arithmetic/logic
bool is_commutative(Op op);  // ADD MUL MAX CMPNE CMPEQ AND OR XOR
bool is_comparison(Op op);   // CMPLT CMPNE CMPEQ
bool is_movement(Op op);     // RESHAPE PERMUTE EXPAND PAD SHRINK FLIP
bool takes_sizes(Op op);     // RESHAPE EXPAND PAD SHRINK IOTA BUFFERIZE: the arg is a Shape
// EXP EXP2 LOG2 SIN COS TANH SIGMOID ERF SQRT: unary ops that cost many times a load and a store,
// so the schedule computes each value of one once (docs/pipeline.md).
bool is_transcendental(Op op);

// Pair: the two iterations of a float sum's range that one step of a pair-dot instruction adds
// (OptKind::PairDot); summed per step, the later iteration in the even lane (docs/kernel-ir.md).
enum class AxisKind : uint8_t { Loop, Parallel, Reduce, Upcast, Unroll, Pair };
std::string_view axis_kind_name(AxisKind k);

struct AxisArg {
  int64_t id = 0;
  AxisKind kind = AxisKind::Loop;
  friend bool operator==(const AxisArg&, const AxisArg&) = default;
};
struct VarArg {  // DEFINE_VAR: a bounded symbolic integer
  std::string name;
  int64_t min = 0, max = 0;
  friend bool operator==(const VarArg&, const VarArg&) = default;
};
struct ReduceArg {  // REDUCE_AXIS (op + axes) and REDUCE (op, axes empty)
  Op op = Op::ADD;
  std::vector<int64_t> axes;
  friend bool operator==(const ReduceArg&, const ReduceArg&) = default;
};

// BUFFER: {id, size}. Movement ops: new shape (RESHAPE EXPAND IOTA) / order (PERMUTE) /
// flat (lo, hi) pairs (PAD SHRINK) / flipped axes (FLIP). Sizes are Dims (a Shape), so
// they may be symbolic; orders and axes are numbers.
using Arg = std::variant<std::monostate, int64_t, double, std::vector<int64_t>, std::string, AxisArg, VarArg,
                         ReduceArg, Shape>;
// Doubles compare bitwise: -0.0 != 0.0 and a NaN equals itself.
bool arg_equal(const Arg& a, const Arg& b);
uint64_t arg_hash(const Arg& a);

class UOp;
using UOpPtr = std::shared_ptr<const UOp>;

// The RANGEs a node's value varies with, "open" at that node: its sources'
// open ranges, minus those it closes (REDUCE, END and BUFFERIZE close the
// ranges they list); a RANGE is open in itself. Computed once per node when it
// is built, like vmin/vmax, so "does x depend on r" is a lookup, never a graph
// walk. Sorted by axis id (then structural hash), so iterating is deterministic.
// The pointers live as long as the node that holds the set.
class OpenRanges {
 public:
  using Item = const UOp*;
  OpenRanges() = default;
  explicit OpenRanges(std::vector<Item> sorted);
  bool empty() const { return !v_ || v_->empty(); }
  size_t size() const { return v_ ? v_->size() : 0; }
  const Item* begin() const { return v_ ? v_->data() : nullptr; }
  const Item* end() const { return v_ ? v_->data() + v_->size() : nullptr; }
  bool contains(const UOp* range) const;
  bool contains(const UOpPtr& range) const { return contains(range.get()); }
  // Does this set share a range with `other`?
  bool intersects(const OpenRanges& other) const;
  // Has a range of this kind (e.g. inside a reduce's body: AxisKind::Reduce).
  bool has_kind(AxisKind kind) const;
  // The order of the sets: by axis id, then structural hash, then address.
  static bool before(const UOp* a, const UOp* b);
  friend bool operator==(const OpenRanges& a, const OpenRanges& b);

 private:
  std::shared_ptr<const std::vector<Item>> v_;  // null: empty; shared between nodes with equal sets
  friend OpenRanges infer_open_ranges(Op op, const std::vector<UOpPtr>& src, const UOp* self);
};

class UOp : public std::enable_shared_from_this<UOp> {
 public:
  // Not declared const: every UOp is reached through a pointer-to-const, and
  // the deleter must move `src` out to destroy deep graphs without recursion.
  Op op;
  DType dtype;
  std::vector<UOpPtr> src;
  Arg arg;

  // The one way to make a node: returns the existing node if an equal one is alive.
  static UOpPtr make(Op op, DType dtype, std::vector<UOpPtr> src = {}, Arg arg = {});

  // Structural hash: depends on (op, dtype, arg, sources' hashes) only, never on
  // addresses, so it is the same from run to run.
  uint64_t hash() const { return hash_; }
  // Tensor-level nodes carry a shape; kernel-level nodes do not.
  const std::optional<Shape>& shape() const { return shape_; }
  // Integer range analysis, computed at construction (ir/bounds.cpp). For
  // float dtypes these are the int64 extremes (unknown).
  int64_t vmin() const { return vmin_; }
  int64_t vmax() const { return vmax_; }
  // The ranges open at this node (see OpenRanges).
  const OpenRanges& ranges() const { return ranges_; }

  UOpPtr ptr() const { return shared_from_this(); }
  template <class T>
  const T& get() const {
    return std::get<T>(arg);
  }
  int64_t arg_int() const { return std::get<int64_t>(arg); }
  bool is_const() const { return op == Op::CONST; }
  // CONST value as double / int64 (bools are 0/1).
  double const_value() const;
  int64_t const_int() const;

  // A BUFFER whose node owns `storage` (device memory): the memory lives exactly
  // as long as some graph uses the node. `id` must be fresh (see next_buffer_id).
  static UOpPtr make_buffer(DType dtype, int64_t id, int64_t size, std::shared_ptr<void> storage);
  static int64_t next_buffer_id();
  const std::shared_ptr<void>& storage() const { return storage_; }

  // Same op/dtype/arg with other sources.
  UOpPtr with_src(std::vector<UOpPtr> new_src) const;

  // Only make() can name Built, so only make() builds nodes (the constructor is
  // public for std::allocate_shared, which puts node and count in one block).
  class Built {
    explicit Built() = default;
    friend class UOp;
  };
  UOp(Built, Op op, DType dtype, std::vector<UOpPtr> src, Arg arg, uint64_t hash);
  // Leaves the table and hands its sources to a per-thread worklist, so a
  // 100,000-deep chain is destroyed without recursion.
  ~UOp();
  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

 private:
  static std::shared_ptr<UOp> construct(Op op, DType dtype, std::vector<UOpPtr> src, Arg arg, uint64_t hash);
  uint64_t hash_;
  std::optional<Shape> shape_;
  int64_t vmin_, vmax_;
  OpenRanges ranges_;
  std::shared_ptr<void> storage_;  // not part of identity; BUFFER ids are unique
  friend struct InternTable;
};

// Number of live interned nodes (for leak tests).
size_t intern_table_size();
// Bytes of the table's own arrays (not the nodes). The table holds nodes
// weakly: a node leaves it when its last user drops it.
size_t intern_table_bytes();
// Rebuilds the table to fit its live nodes (loom::empty_cache): its arrays
// otherwise stay at their largest until the next insert rebuilds them.
void trim_intern_table();
// The heap bytes of the nodes `roots` reach (each node, its sources and arg
// and shape), counted once per walk: what holding these graphs costs.
size_t graph_bytes(const std::vector<UOpPtr>& roots);

// ---- builders ----------------------------------------------------------------
UOpPtr const_int(DType dt, int64_t v);
inline UOpPtr const_i64(int64_t v) { return const_int(DType::Int64, v); }
UOpPtr const_float(DType dt, double v);
// A constant of `dt` holding `v` (integers and bools are converted from v).
UOpPtr const_like(DType dt, double v);
UOpPtr make_range(int64_t end, int64_t axis_id, AxisKind kind = AxisKind::Loop);
// A RANGE whose end is an index expression (a DEFINE_VAR, or arithmetic on one).
UOpPtr make_range(UOpPtr end, int64_t axis_id, AxisKind kind = AxisKind::Loop);
// A RANGE over a size: a constant end, or the symbolic size's expression.
UOpPtr make_range(const Dim& end, int64_t axis_id, AxisKind kind = AxisKind::Loop);
// A RANGE's trip count when its end is a constant (nullopt otherwise, or for a non-RANGE).
std::optional<int64_t> trip(const UOpPtr& range);
// The most iterations a RANGE can run: its constant end, or the upper bound of a
// symbolic one (what a choice made for every binding plans for); 0 for a non-RANGE.
int64_t trip_bound(const UOpPtr& range);
// Is `range` open at u (does u's value change along it)?
inline bool depends_on(const UOpPtr& u, const UOpPtr& range) { return u->ranges().contains(range); }
// The elements of a tensor of this shape (symbolic when a size is).
inline Dim element_count(const Shape& s) {
  Dim n = 1;
  for (const Dim& d : s) n *= d;
  return n;
}
UOpPtr make_var(const std::string& name, int64_t min, int64_t max);
// ALU node with its dtype derived: comparisons give Bool, WHERE takes src[1]'s, others src[0]'s.
UOpPtr alu(Op op, std::vector<UOpPtr> src);

// Arithmetic sugar for building index expressions and tests: `r * 4 + c`.
UOpPtr operator+(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b);  // IDIV on ints, FDIV on floats
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a);
UOpPtr operator<(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator+(const UOpPtr& a, int64_t b);
UOpPtr operator-(const UOpPtr& a, int64_t b);
UOpPtr operator*(const UOpPtr& a, int64_t b);
UOpPtr operator/(const UOpPtr& a, int64_t b);
UOpPtr operator%(const UOpPtr& a, int64_t b);
UOpPtr operator<(const UOpPtr& a, int64_t b);
UOpPtr umax(const UOpPtr& a, const UOpPtr& b);
UOpPtr eq(const UOpPtr& a, const UOpPtr& b);
UOpPtr ne(const UOpPtr& a, const UOpPtr& b);
UOpPtr land(const UOpPtr& a, const UOpPtr& b);
UOpPtr where(const UOpPtr& c, const UOpPtr& a, const UOpPtr& b);
UOpPtr cast(const UOpPtr& a, DType dt);

// ---- traversal -----------------------------------------------------------------
// Sources before users, each node once; iterative (no recursion), deterministic.
std::vector<UOpPtr> toposort(const UOpPtr& root);
std::vector<UOpPtr> toposort(const std::vector<UOpPtr>& roots);
// Does `root` reach `target`?
bool reaches(const UOpPtr& root, const UOpPtr& target);
// All RANGE nodes `root` reaches, closed or open, in toposort order (a graph
// walk; UOp::ranges() is the cached set of the open ones).
std::vector<UOpPtr> ranges_of(const UOpPtr& root);

}  // namespace loom
