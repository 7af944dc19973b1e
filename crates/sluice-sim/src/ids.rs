//! Typed ids for the world's arenas and its event list: a host, a port, a flow and a partition
//! each have a type of their own, so that one cannot be passed for another, and an arena is
//! indexed by its own id rather than by a bare integer cast to `usize`.

/// Declares an id: a transparent wrapper of its integer, which is what the event list stores.
macro_rules! id {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        pub struct $name(pub $int);

        impl $name {
            /// Its place in the arena it indexes.
            #[inline(always)]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

/// Lets an arena of `$elem` (a `Vec` or a slice) be indexed by `$id`.
macro_rules! indexed_by {
    ($id:ty => $elem:ty) => {
        impl std::ops::Index<$id> for [$elem] {
            type Output = $elem;
            #[inline(always)]
            fn index(&self, id: $id) -> &$elem {
                &self[id.index()]
            }
        }
        impl std::ops::IndexMut<$id> for [$elem] {
            #[inline(always)]
            fn index_mut(&mut self, id: $id) -> &mut $elem {
                &mut self[id.index()]
            }
        }
        impl std::ops::Index<$id> for Vec<$elem> {
            type Output = $elem;
            #[inline(always)]
            fn index(&self, id: $id) -> &$elem {
                &self[id.index()]
            }
        }
        impl std::ops::IndexMut<$id> for Vec<$elem> {
            #[inline(always)]
            fn index_mut(&mut self, id: $id) -> &mut $elem {
                &mut self[id.index()]
            }
        }
    };
}
pub(crate) use indexed_by;

id!(
    /// A host: its ordinal, its place in the host list of the topology and of `Hosts`.
    HostId(u32)
);
id!(
    /// A port: its global id, its place in the fabric's port arena.
    PortId(u32)
);
id!(
    /// A flow: its place in the flow specs and the flow table.
    FlowId(u32)
);
id!(
    /// A partition of the fabric: its place in the per-partition counters, random streams and
    /// event sequences. The run's own source (samples, the end) takes the id after the last.
    PartId(u16)
);

// The partition each host belongs to, by host.
indexed_by!(HostId => PartId);

