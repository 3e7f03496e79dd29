//! # tally-runtime
//!
//! The C runtime linked into every program built by `tally cc` / `tally c++`: it registers the
//! instrumented modules, charges the early-exit counters of frames abandoned by `exit`, `longjmp`
//! or C++ unwinding, and writes the profile at exit. The C sources are `c/*.c` (`c/rt.h` lists what they share) and
//! `include/tally.h`; this crate only carries the built archive and the header as bytes (the
//! archive is never linked into a Rust binary).
#![deny(missing_docs)]

/// `libtally_rt.a`, built from `c/*.c` with `-O2 -fPIC`: the runtime of executables and of
/// shared objects with trace-mode code (initial-exec thread-locals).
pub const ARCHIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtally_rt.a"));

/// `libtally_rt_dyn.a`, the same sources with `-DTALLY_DYNAMIC_TLS`: the runtime of every other
/// shared object. Its thread-locals are general-dynamic, so it takes no static TLS and any
/// number of such objects can be `dlopen`ed (`TALLY_TLS_MODEL` in `tally.h`).
pub const ARCHIVE_DYN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dyn/libtally_rt_dyn.a"));

/// The contents of `tally.h`, the C declarations of the runtime ABI.
pub const HEADER: &str = include_str!("../include/tally.h");

// `pub const ABI_VERSION: u32`, written by build.rs from `tally_format::abi::ABI_VERSION`.
include!(concat!(env!("OUT_DIR"), "/abi.rs"));

/// The file name the archive conventionally has on disk.
pub const ARCHIVE_NAME: &str = "libtally_rt.a";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_is_an_ar_file() {
        assert!(ARCHIVE.starts_with(b"!<arch>\n"));
        assert!(ARCHIVE_DYN.starts_with(b"!<arch>\n"));
    }

    #[test]
    fn header_matches_abi_version() {
        assert!(HEADER.contains(&format!("#define TALLY_ABI_VERSION {ABI_VERSION}")));
    }
}
