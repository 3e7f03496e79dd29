//! The structs the instrumenter emits have, under the target's own data layout, exactly the
//! offsets and sizes `tally_format::abi` gives them (which the runtime's build checks tally.h
//! against), and the descriptor carries the ABI version and flags of `tally_format::abi`.

use std::ffi::CString;
use std::process::Command;

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::target::{
    LLVMABIAlignmentOfType, LLVMABISizeOfType, LLVMGetModuleDataLayout, LLVMOffsetOfElement,
    LLVMTargetDataRef,
};
use tally_format::abi::{self, StructLayout};
use tally_format::Mode;

/// 12 diamonds, each calling a function that may not return: 4096 paths, so path mode hashes
/// them (home table, path tables) and keeps frame records with path sites.
const SRC: &str = r#"
extern void ext(int);
volatile int v;
int many(void) {
  if (v) ext(1); if (v) ext(2); if (v) ext(3); if (v) ext(4); if (v) ext(5); if (v) ext(6);
  if (v) ext(7); if (v) ext(8); if (v) ext(9); if (v) ext(10); if (v) ext(11); if (v) ext(12);
  return v;
}
"#;

fn bitcode(dir: &std::path::Path) -> Vec<u8> {
    let src = dir.join("t.c");
    std::fs::write(&src, SRC).unwrap();
    let out = dir.join("t.bc");
    let st = Command::new("clang-19")
        .args(["-O2", "-c", "-emit-llvm"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("clang-19 runs");
    assert!(st.success());
    std::fs::read(out).unwrap()
}

fn instrument(bc: &[u8], mode: Mode) -> Vec<u8> {
    tally_llvm::instrument(
        bc,
        &tally_llvm::Options {
            mode,
            source: "t.c".into(),
            atomic: false,
            oracle: false,
            shadow: true,
            weights: None,
            weighting: tally_llvm::Weighting::Loops,
            events: tally_llvm::EventKind::Insns,
            early_exits: tally_llvm::EarlyExits::Record,
            jump_cost: tally_llvm::DEFAULT_JUMP_COST,
            promote: true,
            promote_chain: tally_llvm::DEFAULT_PROMOTE_CHAIN,
            promote_max: tally_llvm::DEFAULT_PROMOTE_MAX,
            sese: tally_llvm::Sese::Off,
            path_cycles: tally_llvm::PathCycles::default(),
            path_slices: true,
            trace_plan: tally_llvm::TracePlan::Witness,
            trace_registers: false,
            trace_write_through: true,
            trace_floor: false,
            ipath_cuts: tally_llvm::IpathCuts::Hot,
            profile_dir: None,
            pgo: false,
            pgo_inline: true,
            pgo_targets: true,
        },
    )
    .unwrap_or_else(|e| panic!("{mode:?}: {e}"))
    .bitcode
}

/// Asserts that struct type `ty` lays out like `l` under `td`.
unsafe fn check_layout(td: LLVMTargetDataRef, ty: LLVMTypeRef, l: &StructLayout) {
    assert_eq!(
        c::LLVMCountStructElementTypes(ty) as usize,
        l.fields.len(),
        "struct {}: fields",
        l.name
    );
    assert_eq!(
        LLVMABISizeOfType(td, ty) as usize,
        l.size,
        "sizeof(struct {})",
        l.name
    );
    assert_eq!(
        LLVMABIAlignmentOfType(td, ty) as usize,
        l.align,
        "_Alignof(struct {})",
        l.name
    );
    for (i, f) in l.fields.iter().enumerate() {
        assert_eq!(
            LLVMOffsetOfElement(td, ty, i as u32) as usize,
            f.offset,
            "offsetof(struct {}, {})",
            l.name,
            f.name
        );
        let fty = c::LLVMStructGetTypeAtIndex(ty, i as u32);
        assert_eq!(
            LLVMABISizeOfType(td, fty) as usize,
            f.ty.size(),
            "sizeof struct {}.{}",
            l.name,
            f.name
        );
    }
}

/// The allocated type of the alloca named `name` in function `f`.
unsafe fn alloca_type(f: LLVMValueRef, name: &str) -> Option<LLVMTypeRef> {
    let mut bb = c::LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut i = c::LLVMGetFirstInstruction(bb);
        while !i.is_null() {
            if c::LLVMGetInstructionOpcode(i) == llvm_sys::LLVMOpcode::LLVMAlloca {
                let mut len = 0;
                let p = c::LLVMGetValueName2(i, &mut len);
                let n = std::slice::from_raw_parts(p as *const u8, len);
                if n == name.as_bytes() {
                    return Some(c::LLVMGetAllocatedType(i));
                }
            }
            i = c::LLVMGetNextInstruction(i);
        }
        bb = c::LLVMGetNextBasicBlock(bb);
    }
    None
}

unsafe fn global(m: LLVMModuleRef, name: &str) -> LLVMValueRef {
    let n = CString::new(name).unwrap();
    let g = c::LLVMGetNamedGlobal(m, n.as_ptr());
    assert!(!g.is_null(), "no global {name}");
    g
}

/// Field `name` of the constant struct initializer of `g`, as an integer.
unsafe fn init_field(g: LLVMValueRef, l: &StructLayout, name: &str) -> u64 {
    let init = c::LLVMGetInitializer(g);
    let i = l.index(name).unwrap();
    c::LLVMConstIntGetZExtValue(c::LLVMGetOperand(init, i))
}

#[test]
fn emitted_structs_have_the_abi_layout() {
    let dir = tempfile::tempdir().unwrap();
    let bc = bitcode(dir.path());
    for mode in [Mode::Path, Mode::Events] {
        let out = instrument(&bc, mode);
        let ctx = Context::create();
        let buf = MemoryBuffer::create_from_memory_range_copy(&out, "out");
        let module = ctx.create_module_from_ir(buf).unwrap();
        unsafe {
            let m = module.as_mut_ptr();
            let td = LLVMGetModuleDataLayout(m);
            let desc = global(m, "__tally_module");
            check_layout(td, c::LLVMGlobalGetValueType(desc), &abi::TALLY_MODULE);
            assert_eq!(
                init_field(desc, &abi::TALLY_MODULE, "abi_version"),
                u64::from(abi::ABI_VERSION)
            );
            let flags = init_field(desc, &abi::TALLY_MODULE, "flags");
            let want = if mode == Mode::Events {
                abi::MODULE_FLAG_EVENTS
            } else {
                0
            } | abi::MODULE_FLAG_PAGED;
            assert_eq!(flags, u64::from(want), "{mode:?}: flags");
            // Continuous mode maps whole pages over the counter array: aligned, whole pages,
            // at least num_counters entries.
            let counters = global(m, "__tally_counters");
            assert_eq!(
                u64::from(c::LLVMGetAlignment(counters)),
                abi::COUNTER_ALIGN,
                "{mode:?}"
            );
            let len = c::LLVMGetArrayLength2(c::LLVMGlobalGetValueType(counters));
            assert_eq!(
                (len * 8) % abi::COUNTER_ALIGN,
                0,
                "{mode:?}: {len} counters"
            );
            assert!(
                len >= init_field(desc, &abi::TALLY_MODULE, "num_counters"),
                "{mode:?}"
            );
            if mode == Mode::Path {
                let f = c::LLVMGetNamedFunction(m, c"many".as_ptr());
                assert!(!f.is_null());
                let frame = alloca_type(f, "tally.frame").expect("a frame record");
                check_layout(td, frame, &abi::TALLY_FRAME);
                let tables = c::LLVMGlobalGetValueType(global(m, "__tally_path_tables"));
                check_layout(td, c::LLVMGetElementType(tables), &abi::TALLY_PATH_TABLE);
                let home = c::LLVMGlobalGetValueType(global(m, "__tally_path_home"));
                assert_eq!(
                    c::LLVMGetArrayLength2(home),
                    2 * abi::PATH_HOME_SLOTS * c::LLVMGetArrayLength2(tables)
                );
                let site = alloca_type(f, "tally.pathsite").expect("a path site");
                check_layout(td, site, &abi::TALLY_PATH_SITE);
            }
        }
    }
}

/// The names other crates use keep meaning the one value of `tally_format::abi`.
#[test]
fn reexported_constants_are_the_abi_ones() {
    assert_eq!(tally_llvm::ABI_VERSION, abi::ABI_VERSION);
    assert_eq!(tally_llvm::PATH_HOME_BITS, abi::PATH_HOME_BITS);
    assert_eq!(tally_llvm::EV_SLACK, abi::EV_SLACK);
}
