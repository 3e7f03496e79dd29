// What the C API cannot say of a global value: whether it is dso_local (resolved within its
// linkage unit: addressed directly, not through the GOT). Trace mode's second entries
// (tally-llvm's `wtrace::split_entries`) give the new public function its original's.
#include "llvm-c/Core.h"
#include "llvm/IR/GlobalValue.h"

using namespace llvm;

extern "C" void tally_copy_dso_local(LLVMValueRef from, LLVMValueRef to) {
    unwrap<GlobalValue>(to)->setDSOLocal(unwrap<GlobalValue>(from)->isDSOLocal());
}
