// What the C API cannot say of a debug location: the call-site probe its discriminator holds.
// In a build with pseudo-probes, the probe pass packs each call's probe id into the
// discriminator of the call's location (`PseudoProbeDwarfDiscriminator`, whose layout LLVM
// has changed between releases: decoded here with LLVM's own functions), and an inlined
// instruction's `inlinedAt` chain is made of such locations: the call-site probes that name a
// nested sample-profile record.
#include "llvm-c/DebugInfo.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/PseudoProbe.h"

using namespace llvm;

extern "C" unsigned tally_call_probe(LLVMMetadataRef loc) {
    const auto *dl = dyn_cast_or_null<DILocation>(unwrap(loc));
    if (!dl)
        return 0;
    unsigned d = dl->getDiscriminator();
    if (!DILocation::isPseudoProbeDiscriminator(d))
        return 0;
    uint32_t type = PseudoProbeDwarfDiscriminator::extractProbeType(d);
    if (type != uint32_t(PseudoProbeType::DirectCall) &&
        type != uint32_t(PseudoProbeType::IndirectCall))
        return 0;
    return PseudoProbeDwarfDiscriminator::extractProbeIndex(d);
}
