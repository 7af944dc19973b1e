//! The BPF programs' TCP-INT codec (`bpf/tcp_int.h`) compiled for userspace, exposed in the
//! simulator codec's types so both can be checked against the same vectors.

use sluice_sim::packet::tcp_int::{DecodeError, IntEncoding, TcpInt};

#[repr(C)]
#[derive(Default)]
struct Fields {
    int_val: u8,
    int_ecr: u8,
    id: u8,
    id_ecr: u8,
    lat: u32,
    lat_ecr: u32,
}

extern "C" {
    fn sluice_tcp_int_decode(b: *const u8, n: u32, f: *mut Fields) -> i32;
    fn sluice_tcp_int_encode(f: *const Fields, o: *mut [u8; 12]);
    fn sluice_tcp_int_hop_val(q: u64, util: u64, threshold: u64, qshift: u32, ushift: u32) -> u8;
}

/// Decodes with the BPF parser; errors carry what the simulator's codec would report.
pub fn bpf_decode(b: &[u8]) -> Result<TcpInt, DecodeError> {
    let mut f = Fields::default();
    // SAFETY: the C decoder reads at most `n` bytes of `b` and writes only `f`.
    let rc = unsafe { sluice_tcp_int_decode(b.as_ptr(), b.len() as u32, &mut f) };
    match rc {
        0 => Ok(TcpInt { int_val: f.int_val, int_ecr: f.int_ecr, id: f.id, id_ecr: f.id_ecr, lat: f.lat, lat_ecr: f.lat_ecr }),
        1 => Err(DecodeError::WrongKind(b[0])),
        2 => Err(DecodeError::WrongLength(b[1])),
        _ => Err(DecodeError::Truncated(b.len())),
    }
}

/// Encodes with the BPF encoder.
pub fn bpf_encode(o: &TcpInt) -> [u8; 12] {
    let f = Fields { int_val: o.int_val, int_ecr: o.int_ecr, id: o.id, id_ecr: o.id_ecr, lat: o.lat, lat_ecr: o.lat_ecr };
    let mut out = [0u8; 12];
    // SAFETY: the C encoder writes exactly 12 bytes.
    unsafe { sluice_tcp_int_encode(&f, &mut out) };
    out
}

/// The INTval one hop reports, computed by the BPF switch's function.
pub fn bpf_hop_int_val(qdepth: u64, util: u64, cfg: &IntEncoding) -> u8 {
    // SAFETY: a pure function of its arguments.
    unsafe { sluice_tcp_int_hop_val(qdepth, util, cfg.qdepth_threshold, cfg.qdepth_shift, cfg.util_shift) }
}
