//! The Ultra Ethernet transport (UET), as the UEC's reference simulator (uet-htsim) models it:
//! NIC-resident packet delivery with out-of-order receive and selective acknowledgement, NACKs
//! for trimmed packets, and per-packet path selection (`paths.rs`).

pub mod paths;
