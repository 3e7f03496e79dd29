//! Typed indices. Every kind of id is its own newtype so that a block index can never be used
//! where an edge index is meant (the Cranelift `entity_impl!` idea, without the macro crate).

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            /// The id with the given dense index.
            pub const fn new(index: usize) -> Self {
                assert!(index < u32::MAX as usize, "id index overflows u32");
                Self(index as u32)
            }
            /// The dense index of this id, for indexing side tables.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A vertex of a [`Cfg`](crate::Cfg): a basic block, or the virtual EXIT vertex
    /// (whose index is the number of blocks).
    NodeId,
    "n"
);
id_type!(
    /// An edge of a [`Cfg`](crate::Cfg). Parallel edges have distinct ids.
    EdgeId,
    "e"
);
id_type!(
    /// A counter slot of a placement: index into the counter array of one function.
    CounterId,
    "c"
);

/// A dense map from an id type to values, indexed by the id (Cranelift's `SecondaryMap`, minimal).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct IdVec<I, T> {
    items: Vec<T>,
    _marker: std::marker::PhantomData<fn(I) -> I>,
}

/// Ids that can index an [`IdVec`].
pub trait Idx: Copy {
    /// Builds the id from its dense index.
    fn from_index(index: usize) -> Self;
    /// The dense index of the id.
    fn to_index(self) -> usize;
}

impl Idx for NodeId {
    fn from_index(index: usize) -> Self {
        NodeId::new(index)
    }
    fn to_index(self) -> usize {
        self.index()
    }
}
impl Idx for EdgeId {
    fn from_index(index: usize) -> Self {
        EdgeId::new(index)
    }
    fn to_index(self) -> usize {
        self.index()
    }
}
impl Idx for CounterId {
    fn from_index(index: usize) -> Self {
        CounterId::new(index)
    }
    fn to_index(self) -> usize {
        self.index()
    }
}

impl<I: Idx, T: Clone> IdVec<I, T> {
    /// A map with `len` entries, all `value`.
    pub fn filled(len: usize, value: T) -> Self {
        Self::from_vec(vec![value; len])
    }
}

impl<I: Idx, T> IdVec<I, T> {
    /// Wraps a vector whose position `i` holds the value of the id with index `i`.
    pub fn from_vec(items: Vec<T>) -> Self {
        Self {
            items,
            _marker: std::marker::PhantomData,
        }
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Iterates `(id, &value)` pairs in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (I, &T)> + '_ {
        self.items
            .iter()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }
    /// The values in id order.
    pub fn values(&self) -> &[T] {
        &self.items
    }
    /// Consumes the map, returning the values in id order.
    pub fn into_vec(self) -> Vec<T> {
        self.items
    }
}

impl<I: Idx, T> std::ops::Index<I> for IdVec<I, T> {
    type Output = T;
    fn index(&self, id: I) -> &T {
        &self.items[id.to_index()]
    }
}

impl<I: Idx, T> std::ops::IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.to_index()]
    }
}
