//! The parts of a process that took snapshots ([`Profile::delta`], `runtime/c/snapshot.c`):
//! which process and which part each is, and whether a set of parts is whole processes, whose
//! sum is then each process's profile as it would have been written without snapshots (its
//! early exits counts again, not changes).

use super::read::parse;
use super::*;

/// Where a part belongs: its process and its place in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The process's pid, ...
    pub pid: u64,
    /// ... host, ...
    pub host: Vec<u8>,
    /// ... and program.
    pub program: Program,
    /// Its snapshot number; `None` for the last part, written at the process's end.
    pub snapshot: Option<u32>,
    /// When its counts start (the previous snapshot; the process's start for snapshot 1) ...
    pub start_ns: u64,
    /// ... and end.
    pub end_ns: u64,
}

impl Profile {
    /// The part this profile is, when it is a part of one process (the delta flag and a run
    /// record); `None` for any other profile, a sum of parts included.
    pub fn part(&self) -> Option<Part> {
        let run = self.run.as_ref().filter(|_| self.delta)?;
        Some(Part {
            pid: self.pid,
            host: run.host.clone(),
            program: self.program.clone(),
            snapshot: run.snapshot,
            start_ns: run.start_ns,
            end_ns: run.end_ns,
        })
    }

    /// [`Profile::part`] of a profile file's `bytes`, without decoding its metadata.
    pub fn part_of(bytes: &[u8]) -> Result<Option<Part>, ProfileError> {
        Ok(part_of_raw(&parse(bytes)?))
    }
}

/// [`Profile::part`] of a parsed profile file.
pub(super) fn part_of_raw(raw: &super::read::RawProfile<'_>) -> Option<Part> {
    let run = raw.run.as_ref().filter(|_| raw.delta)?;
    Some(Part {
        pid: raw.pid,
        host: run.host.clone(),
        program: raw.program.clone(),
        snapshot: run.snapshot,
        start_ns: run.start_ns,
        end_ns: run.end_ns,
    })
}

/// Whether `parts` are whole processes: each process (pid, host, program) with snapshots 1 to
/// n, n at least 1, each once, each starting where the one before ended, and one last part
/// starting where snapshot n ended. A process's parts that stop short (a part missing, or
/// only a fork child's last part, which holds its parent's counts since the parent's last
/// snapshot) are not whole.
pub fn whole_processes(parts: &[Part]) -> bool {
    let mut by_process: std::collections::HashMap<(u64, &[u8], &Program), Vec<&Part>> =
        std::collections::HashMap::new();
    for p in parts {
        by_process
            .entry((p.pid, p.host.as_slice(), &p.program))
            .or_default()
            .push(p);
    }
    by_process.values_mut().all(|ps| {
        ps.sort_by_key(|p| p.snapshot.map_or(u64::MAX, u64::from));
        let n = ps.len() - 1;
        n >= 1
            && ps[n].snapshot.is_none()
            && ps[..n]
                .iter()
                .enumerate()
                .all(|(i, p)| p.snapshot == Some(i as u32 + 1))
            && ps.windows(2).all(|w| w[1].start_ns == w[0].end_ns)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(pid: u64, snapshot: Option<u32>, start_ns: u64, end_ns: u64) -> Part {
        Part {
            pid,
            host: b"h".to_vec(),
            program: Program::default(),
            snapshot,
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn whole_processes_need_every_part_in_order() {
        let a = [
            part(1, Some(1), 0, 10),
            part(1, Some(2), 10, 20),
            part(1, None, 20, 25),
        ];
        let b = [part(2, Some(1), 5, 7), part(2, None, 7, 9)];
        let both: Vec<Part> = a.iter().chain(&b).cloned().collect();
        assert!(whole_processes(&a) && whole_processes(&b) && whole_processes(&both));
        // In any order.
        assert!(whole_processes(&[a[2].clone(), a[0].clone(), a[1].clone()]));
        // A part missing, the last missing, a gap, a number twice, a last part alone (a fork
        // child's), two last parts.
        assert!(!whole_processes(&[a[0].clone(), a[2].clone()]));
        assert!(!whole_processes(&a[..2]));
        assert!(!whole_processes(&[
            a[0].clone(),
            part(1, Some(2), 11, 20),
            a[2].clone()
        ]));
        assert!(!whole_processes(&[
            a[0].clone(),
            a[0].clone(),
            a[2].clone()
        ]));
        assert!(!whole_processes(&[part(3, None, 0, 5)]));
        assert!(!whole_processes(&[
            a[0].clone(),
            a[1].clone(),
            a[2].clone(),
            a[2].clone()
        ]));
        assert!(!whole_processes(
            &[both.clone(), vec![part(3, None, 0, 5)]].concat()
        ));
    }
}
