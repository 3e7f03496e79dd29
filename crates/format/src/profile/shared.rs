//! `TALLY_META=shared` profiles (container version 5): the sparse counters of a record that
//! names its metadata ([`crate::abi::REF_MAGIC`]) and the metadata file it names, next to the profile
//! (docs/design/profile.md, "Shared metadata").

use super::read::Reader;
use super::*;
use crate::abi::{META_FILE_HEADER_LEN, META_FILE_MAGIC, META_FILE_VERSION, SPARSE_GROUP};

/// The counters of a [`crate::abi::REF_MAGIC`] record, stored sparse (per group of [`SPARSE_GROUP`]: a
/// mask of the non-zero ones, then those), as dense little-endian words. The masks are checked
/// before the dense array is allocated: it is at most `SPARSE_GROUP` times the bytes they take.
pub(super) fn read_sparse(
    r: &mut Reader<'_>,
    index: usize,
    n: u64,
) -> Result<Vec<u8>, ProfileError> {
    let start = r.pos;
    let groups = n.div_ceil(SPARSE_GROUP);
    let mut left = n;
    for _ in 0..groups {
        let k = left.min(SPARSE_GROUP);
        left -= k;
        let mask = r.u64("a sparse counter mask")?;
        if k < SPARSE_GROUP && mask >> k != 0 {
            return Err(ProfileError::BadSparse { index });
        }
        r.take("the sparse counters", u64::from(mask.count_ones()) * 8)?;
    }
    let end = r.pos;
    r.pos = start;
    let mut dense =
        vec![0u8; usize::try_from(n * 8).map_err(|_| ProfileError::BadSparse { index })?];
    for g in 0..groups {
        let mut mask = r.u64("a sparse counter mask")?;
        while mask != 0 {
            let i = u64::from(mask.trailing_zeros());
            mask &= mask - 1;
            let at = ((g * SPARSE_GROUP + i) * 8) as usize;
            dense[at..at + 8].copy_from_slice(r.take("the sparse counters", 8)?);
        }
    }
    debug_assert_eq!(r.pos, end);
    Ok(dense)
}

/// The metadata blob of module `hash` from its file in `dir` (`TALLY_META=shared`): a regular
/// file, its header naming the module and the length the record gives, the blob hashing to it.
pub(super) fn read_meta_file(dir: &Path, hash: u64, len: u64) -> Result<Vec<u8>, ProfileError> {
    let path = dir.join(format!("{hash:016x}{META_FILE_SUFFIX}"));
    let bad = |why: String| ProfileError::MetaFile {
        path: path.clone(),
        why,
    };
    let want = len
        .checked_add(META_FILE_HEADER_LEN)
        .ok_or_else(|| bad("too long".into()))?;
    let bytes = Profile::file_bytes(&path, want.min(MAX_PROFILE_BYTES)).map_err(|e| match e {
        ProfileError::Io { error, .. } => bad(error.to_string()),
        ProfileError::NotRegular { kind, .. } => bad(format!("not a regular file ({kind})")),
        ProfileError::TooLarge { len, .. } => bad(format!("{len} bytes, expected {want}")),
        e => bad(e.to_string()),
    })?;
    let mut r = Reader {
        bytes: &bytes,
        pos: 0,
    };
    let head = (|| {
        let magic = r.take("the magic", 8)?;
        Ok::<_, ProfileError>((
            magic == META_FILE_MAGIC,
            r.u32("")?,
            r.u32("")?,
            r.u64("")?,
            r.u64("")?,
        ))
    })();
    match head {
        Ok((true, META_FILE_VERSION, 0, h, l)) if h == hash && l == len => {}
        Ok((true, META_FILE_VERSION, 0, h, l)) => {
            return Err(bad(format!(
                "it holds module {h:016x} ({l} bytes), not {hash:016x} ({len} bytes)"
            )))
        }
        Ok((true, v, ..)) => {
            return Err(bad(format!("metadata file version {v} is not supported")))
        }
        _ => return Err(bad("not a tally metadata file".into())),
    }
    let blob = &bytes[META_FILE_HEADER_LEN as usize..];
    if blob.len() as u64 != len || fnv64(blob) != hash {
        return Err(bad("its contents do not hash to the module's hash".into()));
    }
    Ok(blob.to_vec())
}

/// The directory where the metadata files of the profile at `path` are (`TALLY_META=shared`):
/// the profile's own.
pub fn meta_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
