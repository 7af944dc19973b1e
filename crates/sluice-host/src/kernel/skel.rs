//! The generated libbpf-rs skeletons of the programs in `bpf/`.
#![allow(clippy::all, missing_docs, non_camel_case_types, non_upper_case_globals, dead_code)]

macro_rules! skel {
    ($m:ident, $f:literal) => {
        /// Skeleton of `bpf/` program.
        pub mod $m {
            include!(concat!(env!("OUT_DIR"), "/", $f));
        }
    };
}

skel!(agent, "agent.skel.rs");
skel!(cc_select, "cc_select.skel.rs");
skel!(int_switch, "int_switch.skel.rs");
skel!(newreno, "newreno.skel.rs");
skel!(dctcp, "dctcp.skel.rs");
skel!(ecn_int, "ecn_int.skel.rs");
skel!(retcp, "retcp.skel.rs");
