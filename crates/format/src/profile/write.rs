//! Writing a profile in exactly the layout the runtime writes (`crates/runtime/c/write.c`).

use super::read::counter_checksum;
use super::*;

impl Profile {
    /// The header flags this profile is written with: what [`Profile::read`] read from them
    /// (a signal number that does not fit [`PROFILE_SIGNAL_MASK`] is written as 255).
    pub fn header_flags(&self) -> u32 {
        let mut flags = PROFILE_FLAGS;
        if self.unfinished {
            flags |= PROFILE_CONTINUOUS;
        }
        if self.raced {
            flags |= PROFILE_RACED;
        }
        if self.delta {
            flags |= PROFILE_DELTA;
        }
        if let Some(sig) = self.signal {
            let max = PROFILE_SIGNAL_MASK >> PROFILE_SIGNAL_SHIFT;
            flags |= PROFILE_SIGNALED | (sig.clamp(1, max) << PROFILE_SIGNAL_SHIFT);
        }
        flags
    }

    /// Serializes in exactly the layout the runtime writes: version 5 with the run record for
    /// a profile of one run, version 4 for a merged one (every record holding its metadata).
    /// Each module is written with its `hash` and `meta_blob` as they are.
    pub fn write(&self) -> Vec<u8> {
        let body: usize = self
            .modules
            .iter()
            .map(|m| {
                MODULE_HEADER_LEN
                    + m.meta_blob.len().next_multiple_of(8)
                    + 8 * m.counters.len()
                    + PATH_ENTRY_LEN * m.paths.len()
                    + CHECKSUM_LEN
            })
            .sum();
        let (kind, id): (u32, Vec<u8>) = match &self.program.build_id {
            BuildId::None => (BUILD_ID_NONE, Vec::new()),
            BuildId::Gnu(b) => (BUILD_ID_GNU, b.clone()),
            BuildId::Modules(h) => (BUILD_ID_MODULES, h.to_le_bytes().to_vec()),
        };
        let path = &self.program.path;
        let program = PROGRAM_HEADER_LEN + (path.len() + id.len()).next_multiple_of(8);
        let mut out = Vec::with_capacity(HEADER_LEN + program + body + TRAILER_LEN);
        out.extend_from_slice(PROFILE_MAGIC);
        let version = match self.run {
            Some(_) => PROFILE_VERSION_RUN,
            None => PROFILE_VERSION,
        };
        out.extend_from_slice(&version.to_le_bytes());
        let flags = self.header_flags();
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&(self.modules.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&(path.len() as u64).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(id.len() as u32).to_le_bytes());
        out.extend_from_slice(path);
        out.extend_from_slice(&id);
        out.resize(out.len().next_multiple_of(8), 0);
        if let Some(run) = &self.run {
            let (kind, status) = match (run.snapshot, run.exit_status) {
                (Some(n), _) => (RUN_STATUS_SNAPSHOT, n),
                (None, Some(s)) => (RUN_STATUS_EXITED, s as u32),
                (None, None) => (RUN_STATUS_UNKNOWN, 0),
            };
            let at = out.len();
            for w in [run.start_ns, run.end_ns] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            for w in [kind, status, run.host.len() as u32, run.labels.len() as u32] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            debug_assert_eq!(out.len() - at, RUN_HEADER_LEN);
            out.extend_from_slice(&run.host);
            out.extend_from_slice(&run.labels);
            out.resize(out.len().next_multiple_of(8), 0);
        }
        for m in &self.modules {
            out.extend_from_slice(MODULE_MAGIC);
            out.extend_from_slice(&m.hash.to_le_bytes());
            out.extend_from_slice(&(m.meta_blob.len() as u64).to_le_bytes());
            out.extend_from_slice(&(m.counters.len() as u64).to_le_bytes());
            out.extend_from_slice(&(m.paths.len() as u64).to_le_bytes());
            out.extend_from_slice(&m.meta_blob);
            out.resize(out.len().next_multiple_of(8), 0);
            let counts_at = out.len();
            for c in &m.counters {
                out.extend_from_slice(&c.to_le_bytes());
            }
            for p in &m.paths {
                out.extend_from_slice(&p.function.to_le_bytes());
                let kind: u32 = match p.kind {
                    PathEntryKind::Count => PATH_ENTRY_COUNT,
                    PathEntryKind::Lost => PATH_ENTRY_LOST,
                };
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&p.path.to_le_bytes());
                out.extend_from_slice(&p.count.to_le_bytes());
            }
            let checksum = counter_checksum(&out[counts_at..], &[]);
            out.extend_from_slice(&checksum.to_le_bytes());
        }
        out.extend_from_slice(TRAILER_MAGIC);
        let total = (out.len() + 8) as u64;
        out.extend_from_slice(&total.to_le_bytes());
        out
    }

    /// Writes the profile to `path` (through a temporary file renamed into place).
    pub fn write_file(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let path = path.as_ref();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        std::fs::write(&tmp, self.write())?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}
