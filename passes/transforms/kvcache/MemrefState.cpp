//===- MemrefState.cpp - state held in memref arguments, seen as tensors ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "passes/transforms/kvcache/MemrefState.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

#include <functional>

using namespace mlir;
using namespace mlir::kvq;

namespace {

// On the tensor form's arguments that were memrefs: the original argument
// number and type.
constexpr StringLiteral kArgAttr = "kvq.buffer_arg";
constexpr StringLiteral kTypeAttr = "kvq.buffer_type";
// On the tensor form's results: the result's index there, which the
// canonical copies' reshapes of the caches may move.
constexpr StringLiteral kResultAttr = "kvq.buffer_result";

bool isView(Operation *op) {
  return isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
             memref::CastOp>(op);
}

RankedTensorType tensorOf(Type memref) {
  auto m = cast<MemRefType>(memref);
  return RankedTensorType::get(m.getShape(), m.getElementType());
}

/// Buffers followed through the function's block, in program order: a root
/// (a memref argument, an allocation, a to_buffer) has a current tensor
/// value; a view is a chain of view ops over a root, read and written
/// through their tensor counterparts at the point of use.
class Tensorizer {
public:
  Tensorizer(func::FuncOp f) : f(f), b(f.getContext()) {}

  LogicalResult run(SmallVector<BufferResult> &results);
  std::optional<Refusal> refusal;

private:
  func::FuncOp f;
  OpBuilder b;
  DenseMap<Value, Value> current;      // root -> its value now
  DenseMap<Value, int> argOf;          // argument root -> original number
  SmallVector<Value> argRoots;         // in argument order
  llvm::SmallPtrSet<Value, 8> written; // roots written
  llvm::SmallPtrSet<Value, 8> readOnly;
  SmallVector<Operation *> dead;

  /// A refusal at `op` about the buffer `buf`: "argument #N is a buffer
  /// (memref) written and read back in place, and it <why>", or the same of
  /// a buffer the function allocates.
  LogicalResult refuse(Operation *op, Value buf, const Twine &why) {
    Value r = rootOf(buf);
    std::string msg =
        r && argOf.count(r)
            ? ("not adopted: argument #" + Twine(argOf.lookup(r)) +
               " is a buffer (memref) written and read back in place, and "
               "it " +
               why)
                  .str()
            : ("not adopted: the function keeps state in memref arguments, "
               "and a buffer it allocates " +
               why)
                  .str();
    refusal = Refusal{op->getLoc(), msg};
    return failure();
  }
  bool tracked(Value v) const { return static_cast<bool>(rootOf(v)); }
  Value rootOf(Value v) const {
    while (v) {
      if (current.count(v))
        return v;
      Operation *def = v.getDefiningOp();
      if (!def || !isView(def) || !views.count(v))
        return {};
      v = def->getOperand(0);
    }
    return {};
  }
  llvm::SmallPtrSet<Value, 16> views;
  /// The root of `v` through view ops not visited yet (those inside a loop
  /// body about to be read).
  Value syntacticRoot(Value v) const {
    while (v && !current.count(v)) {
      Operation *def = v.getDefiningOp();
      v = def && isView(def) ? def->getOperand(0) : Value();
    }
    return v;
  }

  Value read(Location loc, Value v);
  LogicalResult write(Operation *at, Value v, Value t);
  LogicalResult visit(Operation &op);
  LogicalResult visitLoop(scf::ForOp loop);
};

/// Whether `w` inserts at exactly the slice `sv` views.
bool sameSlice(tensor::InsertSliceOp w, memref::SubViewOp sv) {
  auto eq = [](ArrayRef<OpFoldResult> a, ArrayRef<OpFoldResult> b) {
    return a.size() == b.size() &&
           llvm::all_of(llvm::zip(a, b), [](auto p) {
             return isEqualConstantIntOrValue(std::get<0>(p), std::get<1>(p));
           });
  };
  return w && eq(w.getMixedOffsets(), sv.getMixedOffsets()) &&
         eq(w.getMixedSizes(), sv.getMixedSizes()) &&
         eq(w.getMixedStrides(), sv.getMixedStrides());
}

Value Tensorizer::read(Location loc, Value v) {
  if (auto it = current.find(v); it != current.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  Value s = read(loc, def->getOperand(0));
  RankedTensorType type = tensorOf(v.getType());
  // A slot read back right after it was written (llama2.c's matmul into the
  // cache row, after a fill) is the value written: one write, as the
  // tensor form has it.
  if (auto sv = dyn_cast<memref::SubViewOp>(def);
      sv && sameSlice(s.getDefiningOp<tensor::InsertSliceOp>(), sv) &&
      s.getDefiningOp<tensor::InsertSliceOp>().getSource().getType() == type)
    return s.getDefiningOp<tensor::InsertSliceOp>().getSource();
  if (auto sv = dyn_cast<memref::SubViewOp>(def))
    return tensor::ExtractSliceOp::create(b, loc, type, s, sv.getMixedOffsets(),
                                          sv.getMixedSizes(),
                                          sv.getMixedStrides());
  if (auto c = dyn_cast<memref::CollapseShapeOp>(def))
    return tensor::CollapseShapeOp::create(b, loc, type, s,
                                           c.getReassociationIndices());
  if (auto e = dyn_cast<memref::ExpandShapeOp>(def))
    return tensor::ExpandShapeOp::create(b, loc, type, s,
                                         e.getReassociationIndices(),
                                         e.getMixedOutputShape());
  if (type == s.getType())
    return s;
  return tensor::CastOp::create(b, loc, type, s);
}

LogicalResult Tensorizer::write(Operation *at, Value v, Value t) {
  Location loc = at->getLoc();
  if (current.count(v)) {
    if (readOnly.contains(v)) {
      refusal = Refusal{at->getLoc(),
                        "not adopted: the function writes a memref.get_global "
                        "buffer (module state); kvq adopts caches passed in "
                        "as arguments"};
      return failure();
    }
    if (t.getType() != current[v].getType())
      t = tensor::CastOp::create(b, loc, current[v].getType(), t);
    current[v] = t;
    written.insert(v);
    return success();
  }
  Operation *def = v.getDefiningOp();
  Value src = def->getOperand(0);
  RankedTensorType srcType = tensorOf(src.getType());
  Value next;
  if (auto sv = dyn_cast<memref::SubViewOp>(def)) {
    Value base = read(loc, src);
    // Writing a slot again replaces the earlier write.
    if (auto w = base.getDefiningOp<tensor::InsertSliceOp>();
        sameSlice(w, sv) && w->use_empty())
      base = w.getDest();
    next = tensor::InsertSliceOp::create(b, loc, t, base,
                                         sv.getMixedOffsets(),
                                         sv.getMixedSizes(),
                                         sv.getMixedStrides());
  } else if (auto c = dyn_cast<memref::CollapseShapeOp>(def)) {
    next = tensor::ExpandShapeOp::create(
        b, loc, srcType, t, c.getReassociationIndices(),
        tensor::getMixedSizes(b, loc, read(loc, src)));
  } else if (auto e = dyn_cast<memref::ExpandShapeOp>(def)) {
    next = tensor::CollapseShapeOp::create(b, loc, srcType, t,
                                           e.getReassociationIndices());
  } else {
    next = t.getType() == srcType
               ? t
               : tensor::CastOp::create(b, loc, srcType, t).getResult();
  }
  return write(at, src, next);
}

LogicalResult Tensorizer::visit(Operation &op) {
  Location loc = op.getLoc();
  b.setInsertionPoint(&op);
  auto firstTracked = [&](ValueRange vs) -> Value {
    for (Value v : vs)
      if (isa<BaseMemRefType>(v.getType()) && tracked(v))
        return v;
    return {};
  };
  if (isView(&op)) {
    if (tracked(op.getOperand(0))) {
      views.insert(op.getResult(0));
      dead.push_back(&op);
    }
    return success();
  }
  if (isa<memref::AllocOp, memref::AllocaOp>(&op)) {
    current[op.getResult(0)] = tensor::EmptyOp::create(
        b, loc, tensorOf(op.getResult(0).getType()), op.getOperands());
    dead.push_back(&op);
    return success();
  }
  if (auto tb = dyn_cast<bufferization::ToBufferOp>(&op)) {
    current[tb.getResult()] = tb.getTensor();
    dead.push_back(&op);
    return success();
  }
  if (auto g = dyn_cast<memref::GetGlobalOp>(&op)) {
    // Constants (weights) are read; writing one is module state.
    b.setInsertionPointAfter(&op);
    current[g.getResult()] = bufferization::ToTensorOp::create(
        b, loc, tensorOf(g.getType()), g.getResult(), /*restrict=*/true);
    readOnly.insert(g.getResult());
    return success();
  }
  // Any other op that takes a followed buffer must be one of the reads and
  // writes below, at the top of the block, or in the body of an scf.for.
  Value used = firstTracked(op.getOperands());
  if (auto loop = dyn_cast<scf::ForOp>(&op); loop && !used)
    return visitLoop(loop);
  if (!used && op.getNumRegions() &&
      !isa<linalg::LinalgOp, DestinationStyleOpInterface>(op)) {
    Operation *inner = nullptr;
    op.walk([&](Operation *n) {
      if (!inner && n != &op && firstTracked(n->getOperands())) {
        inner = n;
        used = firstTracked(n->getOperands());
      }
    });
    if (inner)
      return refuse(&op, used,
                    "is used inside '" + op.getName().getStringRef() +
                        "'; kvq follows buffer state in the function's block "
                        "and in scf.for bodies only");
  }
  if (!used)
    return success();
  if (auto copy = dyn_cast<memref::CopyOp>(&op)) {
    if (!tracked(copy.getSource()) || !tracked(copy.getTarget()))
      return refuse(&op, used,
                    "is copied from or to a buffer kvq does not follow (one "
                    "an op it does not read as a tensor made)");
    if (failed(write(&op, copy.getTarget(), read(loc, copy.getSource()))))
      return failure();
    dead.push_back(&op);
    return success();
  }
  if (auto ld = dyn_cast<memref::LoadOp>(&op)) {
    Value t = read(loc, ld.getMemRef());
    ld.getResult().replaceAllUsesWith(
        tensor::ExtractOp::create(b, loc, t, ld.getIndices()));
    dead.push_back(&op);
    return success();
  }
  if (auto st = dyn_cast<memref::StoreOp>(&op)) {
    Value t = read(loc, st.getMemRef());
    if (failed(write(&op, st.getMemRef(),
                     tensor::InsertOp::create(b, loc, st.getValueToStore(), t,
                                              st.getIndices()))))
      return failure();
    dead.push_back(&op);
    return success();
  }
  if (auto tt = dyn_cast<bufferization::ToTensorOp>(&op)) {
    Value t = read(loc, tt.getBuffer());
    if (t.getType() != tt.getType())
      t = tensor::CastOp::create(b, loc, tt.getType(), t);
    tt.getResult().replaceAllUsesWith(t);
    dead.push_back(&op);
    return success();
  }
  if (auto mat = dyn_cast<bufferization::MaterializeInDestinationOp>(&op);
      mat && isa<BaseMemRefType>(mat.getDest().getType())) {
    if (failed(write(&op, mat.getDest(), mat.getSource())))
      return failure();
    dead.push_back(&op);
    return success();
  }
  if (isa<memref::DeallocOp>(&op)) {
    dead.push_back(&op);
    return success();
  }
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(&op);
      dps && dps.hasPureBufferSemantics()) {
    // The same op on tensors; each init's result is that buffer's next value.
    SmallVector<Value> operands;
    auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
    for (OpOperand &use : op.getOpOperands()) {
      Value v = use.get();
      if (!isa<BaseMemRefType>(v.getType())) {
        operands.push_back(v);
        continue;
      }
      // An init the op overwrites (a fill, a copying generic) is not a read
      // of the buffer: a cache slot zeroed before its matmul is not read.
      auto type = tensorOf(v.getType());
      if (linalgOp && linalgOp.isDpsInit(&use) && type.hasStaticShape() &&
          !linalgOp.payloadUsesValueFromOperand(&use) && tracked(v)) {
        operands.push_back(tensor::EmptyOp::create(b, loc, type.getShape(),
                                                   type.getElementType()));
        continue;
      }
      if (!tracked(v))
        return refuse(&op, used,
                      "is used by '" + op.getName().getStringRef() +
                          "' with a buffer kvq does not follow (one an op it "
                          "does not read as a tensor made)");
      operands.push_back(read(loc, v));
    }
    SmallVector<Type> types;
    for (OpOperand &init : dps.getDpsInitsMutable())
      types.push_back(tensorOf(init.get().getType()));
    Operation *onTensors = mlir::clone(b, &op, types, operands);
    // An elementwise update in place (llama2.c scales its scores so) reads
    // its init: on tensors the old value is an input and the init empty,
    // the form the matcher follows.
    if (auto g = dyn_cast<linalg::GenericOp>(onTensors);
        g && g.getNumDpsInputs() == 0 && g.getNumDpsInits() == 1 &&
        g.getNumParallelLoops() == g.getNumLoops() &&
        g.getIndexingMapsArray()[0].isIdentity()) {
      Value old = g.getDpsInits()[0];
      // Sized from what `old` was computed into: a tensor.dim of the scores
      // would read as a use of them outside the attention.
      Value sized = old;
      while (auto d = sized.getDefiningOp<DestinationStyleOpInterface>())
        sized = d.getDpsInits()[cast<OpResult>(sized).getResultNumber()];
      Value init = tensor::EmptyOp::create(
          b, loc, tensor::getMixedSizes(b, loc, sized),
          getElementTypeOrSelf(old.getType()));
      AffineMap id = g.getIndexingMapsArray()[0];
      auto moved = linalg::GenericOp::create(
          b, loc, TypeRange{old.getType()}, ValueRange{old}, ValueRange{init},
          ArrayRef<AffineMap>{id, id}, g.getIteratorTypesArray());
      moved.getRegion().takeBody(g.getRegion());
      Block &nb = moved.getRegion().front();
      // The new init's block argument is never read.
      nb.addArgument(nb.getArgument(0).getType(), loc);
      g->erase();
      onTensors = moved;
    }
    for (auto [i, init] : llvm::enumerate(dps.getDpsInits()))
      if (failed(write(&op, init, onTensors->getResult(i))))
        return failure();
    dead.push_back(&op);
    return success();
  }
  if (isa<func::CallOp, func::CallIndirectOp>(&op))
    return refuse(&op, used,
                  "is passed to a call, where kvq cannot follow it (the "
                  "buffer escapes the function)");
  return refuse(&op, used,
                "is used by '" + op.getName().getStringRef() +
                    "', which kvq does not read as a tensor (it follows "
                    "subviews, reshapes, casts, memref.copy, load/store, "
                    "linalg ops, to_tensor and materialize_in_destination)");
}

/// A loop whose body reads and writes followed buffers (llama2.c's loop over
/// layers): on tensors, each buffer the body writes is carried by the loop
/// (an iter_arg from its value before the loop, yielded at its value after
/// the body), and the body is read in program order as the function's block
/// is. A loop the body writes nothing of is read the same way, with no
/// carried values.
LogicalResult Tensorizer::visitLoop(scf::ForOp loop) {
  SmallVector<Value> carried;
  loop.getBody()->walk([&](Operation *n) {
    SmallVector<Value> targets;
    if (auto c = dyn_cast<memref::CopyOp>(n))
      targets.push_back(c.getTarget());
    else if (auto st = dyn_cast<memref::StoreOp>(n))
      targets.push_back(st.getMemRef());
    else if (auto m = dyn_cast<bufferization::MaterializeInDestinationOp>(n))
      targets.push_back(m.getDest());
    else if (auto d = dyn_cast<DestinationStyleOpInterface>(n))
      llvm::append_range(targets, d.getDpsInits());
    for (Value t : targets)
      if (Value r = isa<BaseMemRefType>(t.getType()) ? syntacticRoot(t)
                                                     : Value();
          r && !llvm::is_contained(carried, r))
        carried.push_back(r);
  });
  Location loc = loop.getLoc();
  b.setInsertionPoint(loop);
  SmallVector<Value> inits(loop.getInitArgs());
  for (Value r : carried)
    inits.push_back(current[r]);
  auto next = scf::ForOp::create(b, loc, loop.getLowerBound(),
                                 loop.getUpperBound(), loop.getStep(), inits);
  Block *body = next.getBody(), *old = loop.getBody();
  if (!body->empty())
    body->back().erase(); // the terminator built for a loop without results
  const unsigned kept = old->getNumArguments();
  for (unsigned i = 0; i < kept; ++i)
    old->getArgument(i).replaceAllUsesWith(body->getArgument(i));
  body->getOperations().splice(body->end(), old->getOperations());
  for (auto [i, r] : llvm::enumerate(carried))
    current[r] = body->getArgument(kept + i);
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  for (Operation &op : llvm::make_early_inc_range(body->without_terminator()))
    if (failed(visit(op)))
      return failure();
  b.setInsertionPoint(yield);
  SmallVector<Value> yielded(yield.getOperands());
  for (Value r : carried)
    yielded.push_back(current[r]);
  scf::YieldOp::create(b, yield.getLoc(), yielded);
  yield.erase();
  for (auto [i, r] : llvm::enumerate(carried))
    current[r] = next.getResult(loop.getNumResults() + i);
  loop.replaceAllUsesWith(
      next.getResults().take_front(loop.getNumResults()));
  dead.push_back(loop);
  return success();
}

LogicalResult Tensorizer::run(SmallVector<BufferResult> &results) {
  // In one block, program order is the order of the reads and writes.
  auto ret = f.getBody().hasOneBlock()
                 ? dyn_cast<func::ReturnOp>(f.getBody().front().getTerminator())
                 : func::ReturnOp();
  if (!ret) {
    refusal = Refusal{f.getLoc(),
                      "not adopted: the function keeps state in memref "
                      "arguments across several blocks; kvq follows buffer "
                      "state in one block"};
    return failure();
  }
  Block &entry = f.getBody().front();
  // Each memref argument gets a tensor argument right after it; the memref
  // ones go once nothing uses them.
  SmallVector<BlockArgument> old;
  for (BlockArgument a : entry.getArguments())
    if (isa<MemRefType>(a.getType()))
      old.push_back(a);
  for (BlockArgument a : llvm::reverse(old)) {
    unsigned n = a.getArgNumber();
    auto dict = DictionaryAttr::get(
        f.getContext(),
        {NamedAttribute(kArgAttr, b.getI64IntegerAttr(n)),
         NamedAttribute(kTypeAttr, TypeAttr::get(a.getType()))});
    if (failed(f.insertArgument(n + 1, tensorOf(a.getType()), dict,
                                a.getLoc())))
      llvm_unreachable("inserting a function argument cannot fail");
  }
  for (BlockArgument a : old) {
    // Original numbering: the arguments before it, less the tensor ones
    // inserted before it.
    int n = 0;
    for (BlockArgument o : old)
      n += o.getArgNumber() < a.getArgNumber();
    argOf[a] = a.getArgNumber() - n;
    current[a] = entry.getArgument(a.getArgNumber() + 1);
    argRoots.push_back(a);
  }
  for (Operation &op : llvm::make_early_inc_range(entry.without_terminator()))
    if (failed(visit(op)))
      return failure();
  // The results, then the final value of each argument written and not
  // returned as itself.
  b.setInsertionPoint(ret);
  SmallVector<Value> operands;
  llvm::SmallPtrSet<Value, 8> returned;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    BufferResult r;
    r.originalResult = i;
    // A buffer that is not state (one a call returned) is returned as is.
    if (isa<BaseMemRefType>(v.getType()) && tracked(v)) {
      Value base = v;
      while (auto c = base.getDefiningOp<memref::CastOp>())
        base = c.getSource();
      if (argOf.count(base)) {
        r.stateOf = argOf[base];
        returned.insert(base);
      }
      v = read(ret.getLoc(), v);
    }
    operands.push_back(v);
    results.push_back(r);
  }
  for (Value a : argRoots)
    if (written.contains(a) && !returned.contains(a)) {
      operands.push_back(current[a]);
      results.push_back({-1, argOf[a]});
    }
  func::ReturnOp::create(b, ret.getLoc(), operands);
  ret.erase();
  f.setType(FunctionType::get(f.getContext(), entry.getArgumentTypes(),
                              ValueRange(operands).getTypes()));
  for (unsigned i = 0; i < operands.size(); ++i)
    f.setResultAttr(i, kResultAttr, b.getI64IntegerAttr(i));
  for (Operation *op : llvm::reverse(dead))
    op->erase();
  for (BlockArgument a : old)
    if (!a.use_empty())
      return refuse(*a.getUsers().begin(), a,
                    "is used by '" +
                        a.getUsers().begin()->getName().getStringRef() +
                        "', which kvq does not read as a tensor (it follows "
                        "subviews, reshapes, casts, memref.copy, load/store, "
                        "linalg ops, to_tensor and materialize_in_destination)");
  llvm::BitVector drop(entry.getNumArguments());
  for (BlockArgument a : old)
    drop.set(a.getArgNumber());
  if (failed(f.eraseArguments(drop)))
    llvm_unreachable("erasing unused arguments cannot fail");
  IRRewriter rewriter(f.getContext());
  (void)runRegionDCE(rewriter, f->getRegions());
  return success();
}

} // namespace

bool mlir::kvq::isStateBuffer(Value buf) {
  bool written = false, read = false;
  std::function<void(Value, int)> visit = [&](Value v, int d) {
    if (d > 8)
      return;
    for (OpOperand &use : v.getUses()) {
      Operation *u = use.getOwner();
      // Every view, also those the tensor form cannot follow
      // (reinterpret_cast), so that state behind one gets its remark.
      if (isView(u) || (isa<ViewLikeOpInterface>(u) && u->getNumResults() == 1 &&
                        isa<BaseMemRefType>(u->getResult(0).getType()))) {
        visit(u->getResult(0), d + 1);
      } else if (auto copy = dyn_cast<memref::CopyOp>(u)) {
        (copy.getTarget() == v ? written : read) = true;
      } else if (isa<memref::StoreOp>(u)) {
        written = true;
      } else if (isa<memref::LoadOp, bufferization::ToTensorOp>(u)) {
        read = true;
      } else if (auto m =
                     dyn_cast<bufferization::MaterializeInDestinationOp>(u)) {
        written = true;
      } else if (auto l = dyn_cast<DestinationStyleOpInterface>(u)) {
        (l.isDpsInit(&use) ? written : read) = true;
      }
    }
  };
  visit(buf, 0);
  return written && read;
}

bool mlir::kvq::holdsBufferState(func::FuncOp f) {
  if (f.isExternal())
    return false;
  return llvm::any_of(f.getArguments(), [](BlockArgument a) {
    return isa<MemRefType>(a.getType()) && isStateBuffer(a);
  });
}

FailureOr<func::FuncOp>
mlir::kvq::tensorizeBufferState(func::FuncOp f,
                                SmallVector<BufferResult> &results,
                                std::optional<Refusal> &refusal) {
  auto copy = cast<func::FuncOp>(f->clone());
  Tensorizer t(copy);
  if (succeeded(t.run(results)))
    return copy;
  refusal = t.refusal;
  // The refusal points into the copy; its locations are the original's.
  copy->dropAllReferences();
  copy->erase();
  return failure();
}

int mlir::kvq::tensorFormResult(func::FuncOp f, unsigned i) {
  auto n = f.getResultAttrOfType<IntegerAttr>(i, kResultAttr);
  return n ? static_cast<int>(n.getInt()) : -1;
}

void mlir::kvq::dropTensorFormResultTags(func::FuncOp f) {
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    f.removeResultAttr(i, StringAttr::get(f.getContext(), kResultAttr));
}

void mlir::kvq::restoreBufferBoundary(func::FuncOp f,
                                      ArrayRef<BufferResult> results,
                                      const llvm::BitVector &dropped,
                                      FunctionType original) {
  MLIRContext *ctx = f.getContext();
  Block &entry = f.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  DenseMap<int, BlockArgument> argByOriginal;
  for (BlockArgument a : entry.getArguments()) {
    auto type = f.getArgAttrOfType<TypeAttr>(a.getArgNumber(), kTypeAttr);
    auto n = f.getArgAttrOfType<IntegerAttr>(a.getArgNumber(), kArgAttr);
    if (!type || !n)
      continue;
    f.removeArgAttr(a.getArgNumber(), kTypeAttr);
    f.removeArgAttr(a.getArgNumber(), kArgAttr);
    Type tensorType = a.getType();
    a.setType(type.getValue());
    argByOriginal[n.getInt()] = a;
    if (a.use_empty())
      continue;
    // The caller's buffer: read once here, as the tensor form read it.
    auto t = bufferization::ToTensorOp::create(b, a.getLoc(), tensorType, a,
                                               /*restrict=*/true);
    a.replaceAllUsesExcept(t.getResult(), t.getOperation());
  }
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  SmallVector<Value> kept;
  unsigned next = 0;
  for (auto [i, r] : llvm::enumerate(results)) {
    if (dropped.test(i))
      continue;
    Value v = ret.getOperand(next++);
    if (r.stateOf >= 0) {
      // Written back into the caller's buffer, which is the result when
      // the original returned it.
      BlockArgument a = argByOriginal.lookup(r.stateOf);
      bufferization::MaterializeInDestinationOp::create(
          b, ret.getLoc(), TypeRange{}, v, a, /*restrict=*/true,
          /*writable=*/true);
      if (r.originalResult >= 0) {
        Type want = original.getResult(r.originalResult);
        kept.push_back(a.getType() == want
                           ? Value(a)
                           : memref::CastOp::create(b, ret.getLoc(), want, a)
                                 .getResult());
      }
      continue;
    }
    if (r.originalResult >= 0 && isa<RankedTensorType>(v.getType()) &&
        isa<MemRefType>(original.getResult(r.originalResult)))
      v = bufferization::ToBufferOp::create(
          b, ret.getLoc(), original.getResult(r.originalResult), v);
    kept.push_back(v);
  }
  func::ReturnOp::create(b, ret.getLoc(), kept);
  ret.erase();
  f.setType(FunctionType::get(ctx, entry.getArgumentTypes(),
                              ValueRange(kept).getTypes()));
}
