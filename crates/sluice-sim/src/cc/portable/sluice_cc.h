/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The portable form of a congestion-control algorithm (docs/writing-a-cc.md).
 *
 * An algorithm is pure functions over (state, parameters, signals, window) in integer arithmetic
 * that the BPF verifier accepts: fixed-size integers, no floats, loops with a constant bound, no
 * libc. The same file is compiled by the system C compiler into the simulator (crates/sluice-sim
 * build.rs) and by clang -target bpf into a struct_ops program (crates/sluice-host build.rs, glue
 * in bpf/scc_kernel.h). Windows and acked amounts are bytes on both sides; fractions are fixed
 * point with SCC_ONE = 1.0; sequence numbers are 32-bit and compared modulo 2^32.
 */
#ifndef SLUICE_CC_H
#define SLUICE_CC_H

#ifdef __bpf__
/* vmlinux.h, included first by the kernel glue, defines the __uN types. */
typedef __u8 scc_u8;
typedef __u32 scc_u32;
typedef __s32 scc_s32;
typedef __u64 scc_u64;
#define SCC_FN static __always_inline
#define SCC_INLINE static __always_inline
#else
#include <stdint.h>
typedef uint8_t scc_u8;
typedef uint32_t scc_u32;
typedef int32_t scc_s32;
typedef uint64_t scc_u64;
/* An algorithm's entry points keep external linkage natively: the simulator calls them through FFI. */
#define SCC_FN
#define SCC_INLINE static inline
#endif

/* Fractions (alpha, gains) are fixed point: SCC_ONE is 1.0. */
#define SCC_SHIFT 16
#define SCC_ONE ((scc_u64)1 << SCC_SHIFT)
/* A slow-start threshold that is not set yet. */
#define SCC_INFINITE (~(scc_u64)0)
/* The most a window may grow by in one ACK, in segments (bounds scc_reno_grow's loop). */
#define SCC_GROW_MAX 64

/* A loss multiplies the window by 2^-SCC_LOSS_SHIFT (RFC 5681: halve it). */
#ifndef SCC_LOSS_SHIFT
#define SCC_LOSS_SHIFT 1
#endif

/* What an algorithm asks of the transport (the flags argument of SCC_ALGORITHM). */
#define SCC_ECN_CLASSIC 1    /* RFC 3168: an ECE is an SCC_ECN event, once per window */
#define SCC_ECN_PER_PACKET 2 /* DCTCP's echo: each ACK's ECE and CE-marked bytes are exact */
#define SCC_NEEDS_INT 4      /* reads the TCP-INT echo */

/* What one ACK tells the sender: the signal block (the mapping of both sides is in the guide). */
struct scc_signals {
	scc_u64 acked;      /* bytes newly acknowledged, cumulatively or by SACK */
	scc_u64 ce;         /* of those, bytes the receiver echoed as CE-marked */
	scc_u32 snd_una;    /* first unacknowledged sequence number, after this ACK */
	scc_u32 snd_nxt;    /* next sequence number to send */
	scc_u32 rtt_us;     /* RTT sample of this ACK in microseconds; 0: none */
	scc_u32 int_queue;  /* bytes queued at the bottleneck hop, when int_is_queue */
	scc_u8 ece;         /* the ACK carried ECE */
	scc_u8 circuit;     /* a circuit is up on the path (fed from ECE where no circuit signal exists) */
	scc_u8 in_recovery; /* the sender is in fast recovery */
	scc_u8 int_echo;    /* the ACK brought a TCP-INT echo */
	scc_u8 int_is_queue;/* that echo reports a queue depth (else a utilization) */
	scc_u8 cwnd_limited;/* the window, not the application, limited sending (RFC 7661) */
	scc_u8 pad[2];
};

/* The window the algorithm reads and writes, in bytes. */
struct scc_window {
	scc_u64 cwnd;
	scc_u64 ssthresh; /* SCC_INFINITE until the first reduction */
	scc_u64 mss;
};

/* The congestion events that are not an ACK. */
enum scc_event {
	SCC_LOSS = 1,    /* loss detected by duplicate ACKs or SACK: fast recovery starts */
	SCC_TIMEOUT = 2, /* the retransmission timer expired */
	SCC_ECN = 3,     /* a classic ECN echo (SCC_ECN_CLASSIC only) */
};

/* A state variable an algorithm names for the simulator's cwnd.csv: value / one. */
struct scc_var {
	const char *name;
	scc_u64 value;
	scc_u64 one;
};
/* The most variables an algorithm names. */
#define SCC_VARS_MAX 4

/* One step an algorithm took, as the kernel records it for the differential test. */
struct scc_record {
	scc_u64 flow;      /* which connection, numbered as they start */
	scc_u32 kind;      /* SCC_REC_* */
	scc_u32 event;     /* enum scc_event for SCC_REC_EVENT */
	struct scc_signals sig;
	struct scc_window in;
	struct scc_window out;
};
#define SCC_REC_INIT 0
#define SCC_REC_ACK 1
#define SCC_REC_EVENT 2

/* seq1 comes before seq2, modulo 2^32. */
SCC_INLINE int scc_before(scc_u32 seq1, scc_u32 seq2)
{
	return (scc_s32)(seq1 - seq2) < 0;
}

SCC_INLINE scc_u64 scc_max(scc_u64 a, scc_u64 b)
{
	return a > b ? a : b;
}

SCC_INLINE scc_u64 scc_min(scc_u64 a, scc_u64 b)
{
	return a < b ? a : b;
}

/* x <- (1 - g) x + g sample, for a gain g in (0, SCC_ONE]. */
SCC_INLINE scc_u64 scc_ewma(scc_u64 x, scc_u64 sample, scc_u64 g)
{
	return (x * (SCC_ONE - g) + sample * g) >> SCC_SHIFT;
}

/* The smallest window outside a timeout: two segments (RFC 5681). */
SCC_INLINE scc_u64 scc_min_cwnd(const struct scc_window *w)
{
	return 2 * w->mss;
}

/*
 * Reno growth by the ACK's acked bytes: slow start up to ssthresh, then one MSS per cwnd bytes
 * acked, the remainder carried in *acc so no growth is lost to rounding (RFC 3465 byte counting).
 * A window the application did not fill does not grow (RFC 7661).
 */
SCC_INLINE void scc_reno_grow(scc_u64 *acc, const struct scc_signals *sig, struct scc_window *w)
{
	scc_u64 acked = sig->acked;

	if (!sig->cwnd_limited)
		return;
	if (w->cwnd < w->ssthresh) {
		scc_u64 inc = scc_min(acked, w->ssthresh - w->cwnd);

		w->cwnd += inc;
		acked -= inc;
	}
	*acc += acked;
	for (int i = 0; i < SCC_GROW_MAX && *acc >= w->cwnd; i++) {
		*acc -= w->cwnd;
		w->cwnd += w->mss;
	}
}

/* Reno's reaction to loss: ssthresh = cwnd / 2 (at least two segments); a timeout restarts from one. */
SCC_INLINE void scc_reno_cut(scc_u64 *acc, enum scc_event ev, struct scc_window *w)
{
	*acc = 0;
	w->ssthresh = scc_max(w->cwnd >> SCC_LOSS_SHIFT, scc_min_cwnd(w));
	w->cwnd = ev == SCC_TIMEOUT ? w->mss : w->ssthresh;
}

/*
 * SCC_ALGORITHM(name, defaults, flags) closes an algorithm's file. Natively it exports the
 * defaults, flags and state size for the simulator's adapter; the kernel glue defines it to emit
 * the struct_ops program.
 */
#ifndef SCC_ALGORITHM
#define SCC_ALGORITHM(name, defaults, flags)                                   \
	const struct name##_params name##_defaults = defaults;                 \
	const scc_u32 name##_flags = (flags);                                  \
	const scc_u32 name##_state_size = sizeof(struct name##_state);
#endif

#endif /* SLUICE_CC_H */
