//! Path counts added over linkonce copies ([`add_paths`]).

use crate::{PathProfile, PathRow};

/// Adds the path counts of another copy of a linkonce function; `None` on overflow.
pub(super) fn add_paths(mine: &mut PathProfile, theirs: &PathProfile) -> Option<()> {
    use std::collections::BTreeMap;
    let mut all: BTreeMap<u128, u64> = mine.counts.iter().copied().collect();
    for &(p, c) in &theirs.counts {
        let v = all.entry(p).or_default();
        *v = v.checked_add(c)?;
    }
    mine.counts = all.into_iter().collect();
    mine.lost = mine.lost.checked_add(theirs.lost)?;
    let mut rows: BTreeMap<u128, PathRow> = mine.rows.drain(..).map(|r| (r.number, r)).collect();
    for r in &theirs.rows {
        match rows.get_mut(&r.number) {
            Some(m) => m.count = m.count.checked_add(r.count)?,
            None => {
                rows.insert(r.number, r.clone());
            }
        }
    }
    mine.rows = rows.into_values().collect();
    Some(())
}
