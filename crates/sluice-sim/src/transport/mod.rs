//! Transports: TCP with a pluggable congestion controller.

pub mod tcp;
