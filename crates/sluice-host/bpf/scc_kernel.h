/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel glue for the portable algorithms (crates/sluice-sim/src/cc/portable): defines
 * SCC_ALGORITHM so that an algorithm's C file, compiled by clang -target bpf after this header,
 * becomes a tcp_congestion_ops struct_ops of the same name. The glue maps tcp_sock and the
 * TCP-INT agent's socket storage to the signal block (docs/writing-a-cc.md), owns the window the
 * kernel would otherwise move (cong_control; see docs/host.md), and when the loader sets
 * scc_record it writes every step (signals, window in, window out) to the scc_trace ring buffer
 * for the differential test.
 */
#ifndef SLUICE_SCC_KERNEL_H
#define SLUICE_SCC_KERNEL_H

#include "cc_common.h"
#include "tcp_int.h"
#include "sluice_cc.h"

/* sluice_cc.h's native SCC_ALGORITHM gives way to the struct_ops one below. */
#undef SCC_ALGORITHM

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader: record every step to scc_trace. */
const volatile __u32 scc_record = 0;
/* The fabric's INTval queue unit, 2^13 = 8 KiB (the agent's and the software switch's). */
const volatile __u32 scc_qdepth_shift = 13;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} scc_trace SEC(".maps");

/* The agent's map: same definition, reused by file descriptor at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct int_sk);
} int_sk_store SEC(".maps");

/* Set by the loader: this algorithm's id in the class table's parameters (0: none). */
const volatile __u32 scc_alg_id = 0;

/* The agent's class maps (class_maps.h), reused by file descriptor at load time. */
#include "class_maps.h"

/* Connections numbered as they start, for the trace. */
__u64 scc_flows = 0;

/* What the glue keeps beside the algorithm's state in icsk_ca_priv. */
struct scc_glue {
	__u64 flow;
	__u64 cwnd;         /* the window the algorithm left, in bytes */
	__u64 ssthresh;     /* the threshold it left, in bytes (SCC_INFINITE: none) */
	__u64 ecr_seen;     /* the agent's echo count last read */
	__u32 cwnd_segs;    /* snd_cwnd as the glue set it; another value means the kernel moved it */
	__u32 delivered_ce; /* tp->delivered_ce at the last ACK */
	__u32 prior_rcv_nxt;/* receiver side of the exact CE echo */
	__u8 ce_state;
	__u8 ece;           /* the ACK being processed carried ECE (from in_ack_event) */
	__u8 class_id;      /* the socket's class in the agent's table (0: none) */
};

/* The socket's class id, as the CC policy program recorded it. */
static __always_inline __u8 scc_class_of(struct sock *sk)
{
	struct sluice_class_sk *cs = bpf_sk_storage_get(&class_sk, sk, 0, 0);

	return cs && cs->id < SLUICE_CLASS_IDS ? cs->id : 0;
}

/* Overwrites `p` (the compiled defaults) with the parameters of class `class_id`, when the class
 * names this algorithm. */
#define SCC_CLASS_PARAMS(class_id, p)                                                              \
	do {                                                                                       \
		__u32 k_ = (class_id);                                                             \
		const struct scc_class_params *cp_ = k_ ? bpf_map_lookup_elem(&class_params, &k_) : 0; \
		if (cp_ && scc_alg_id && cp_->alg == scc_alg_id)                                   \
			__builtin_memcpy(&(p), cp_->params, sizeof(p));                            \
	} while (0)

static __always_inline void scc_trace_step(struct scc_glue *g, __u32 kind, __u32 event, const struct scc_signals *sig,
					   const struct scc_window *in, const struct scc_window *out)
{
	struct scc_record *r;

	if (!scc_record)
		return;
	r = bpf_ringbuf_reserve(&scc_trace, sizeof(*r), 0);
	if (!r)
		return;
	r->flow = g->flow;
	r->kind = kind;
	r->event = event;
	if (sig)
		r->sig = *sig;
	else
		__builtin_memset(&r->sig, 0, sizeof(r->sig));
	r->in = *in;
	r->out = *out;
	bpf_ringbuf_submit(r, 0);
}

/* The window as the algorithm sees it: its own byte-exact value unless the kernel moved cwnd. */
static __always_inline struct scc_window scc_window_in(const struct sock *sk, const struct scc_glue *g)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct scc_window w;

	w.mss = tp->mss_cache ? tp->mss_cache : 1;
	w.cwnd = tp->snd_cwnd == g->cwnd_segs && g->cwnd ? g->cwnd : (__u64)tp->snd_cwnd * w.mss;
	w.ssthresh = g->ssthresh;
	return w;
}

/* Hands the algorithm's window to the kernel, in whole segments within the kernel's limits. */
static __always_inline void scc_window_out(struct sock *sk, struct scc_glue *g, const struct scc_window *w)
{
	struct tcp_sock *tp = tcp_sk(sk);
	/* Rounded up, as the simulator's sender reads a byte window: a segment may leave while fewer
	 * bytes than cwnd are in flight. Rounding down would turn DCTCP's small cuts of a window of a
	 * few jumbo frames into cuts of a whole segment. */
	__u64 segs = (w->cwnd + w->mss - 1) / w->mss;
	__u64 ss = w->ssthresh == SCC_INFINITE ? TCP_INFINITE_SSTHRESH : (w->ssthresh + w->mss - 1) / w->mss;

	if (segs > tp->snd_cwnd_clamp)
		segs = tp->snd_cwnd_clamp;
	if (segs < 1)
		segs = 1;
	if (ss > TCP_INFINITE_SSTHRESH)
		ss = TCP_INFINITE_SSTHRESH;
	if (ss < 2)
		ss = 2;
	tp->snd_cwnd = segs;
	tp->snd_ssthresh = ss;
	g->cwnd = w->cwnd;
	g->ssthresh = w->ssthresh;
	g->cwnd_segs = segs;
}

/*
 * The pacing rate the kernel sets after each ACK for an algorithm without cong_control
 * (tcp_update_pacing_rate, net/ipv4/tcp_input.c) and skips for one with it: twice the window's
 * rate in slow start, 1.2 times after (tcp_pacing_ss_ratio and tcp_pacing_ca_ratio at their
 * defaults). Nothing paces by it without fq, but TCP small queues (tcp_small_queue_check) and
 * TSO autosizing (tcp_tso_autosize) read it; left at its initial ~0, a portable algorithm's
 * socket could queue its whole window below TCP where the kernel's own algorithms queue a
 * millisecond of it.
 */
static __always_inline void scc_pacing_rate(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd, out = tp->packets_out;
	__u64 rate = (__u64)tp->mss_cache * ((1000000 / 100) << 3);

	rate *= cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= cwnd > out ? cwnd : out;
	if (tp->srtt_us)
		rate /= tp->srtt_us;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

/* The per-ACK signal block from tcp_sock, the rate sample and (when `flags` ask for it) the agent's
 * TCP-INT storage. */
static __always_inline void scc_signals_of(struct sock *sk, struct scc_glue *g, const struct rate_sample *rs,
					   __u64 mss, __u32 flags, struct scc_signals *sig)
{
	struct tcp_sock *tp = tcp_sk(sk);
	/* Only an algorithm that reads the TCP-INT echo pays for the socket-storage lookup. */
	struct int_sk *st = flags & SCC_NEEDS_INT ? bpf_sk_storage_get(&int_sk_store, sk, 0, 0) : 0;
	__u32 dce = tp->delivered_ce - g->delivered_ce;
	__s32 acked = rs->acked_sacked;

	g->delivered_ce = tp->delivered_ce;
	sig->acked = acked > 0 ? (__u64)acked * mss : 0;
	sig->ce = (__u64)dce * mss;
	sig->snd_una = tp->snd_una;
	sig->snd_nxt = tp->snd_nxt;
	sig->rtt_us = rs->rtt_us > 0 ? rs->rtt_us : 0;
	sig->ece = g->ece;
	/* No circuit signal reaches a Linux host: circuit state rides on ECE, as Etalon's ToRs mark it. */
	sig->circuit = g->ece;
	sig->in_recovery = inet_csk(sk)->icsk_ca_state == TCP_CA_Recovery;
	/* tcp_is_cwnd_limited(): in slow start, also while cwnd is under twice what was in flight. */
	sig->cwnd_limited = tp->is_cwnd_limited ||
			    (tp->snd_cwnd < tp->snd_ssthresh && tp->snd_cwnd < 2 * tp->max_packets_out);
	if (st && st->ecr_count != g->ecr_seen) {
		g->ecr_seen = st->ecr_count;
		sig->int_echo = 1;
		if (st->ecr_int_val & TCP_INT_QDEPTH_FLAG) {
			sig->int_is_queue = 1;
			sig->int_queue = (__u32)(st->ecr_int_val & 0x7f) << (scc_qdepth_shift & 31);
		}
	}
}

/*
 * The struct_ops program of algorithm `alg`. Every callback but cong_control only keeps the
 * kernel's view consistent: the window changes in the algorithm's on_ack (per ACK, cong_control)
 * and on_event (set_state to Recovery: SCC_LOSS; CA_EVENT_LOSS: SCC_TIMEOUT; set_state to CWR:
 * SCC_ECN for a classic-ECN algorithm).
 */
#define SCC_ALGORITHM(alg, alg_defaults, alg_flags)                                                         \
	const volatile struct alg##_params alg##_params = alg_defaults;                                  \
	struct alg##_ca {                                                                             \
		struct scc_glue g;                                                                     \
		struct alg##_state s;                                                                 \
	};                                                                                             \
	_Static_assert(sizeof(struct alg##_ca) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv), \
		       #alg ": state and glue exceed icsk_ca_priv");                                \
	_Static_assert(sizeof(struct alg##_params) <= sizeof(((struct scc_class_params *)0)->params), \
		       #alg ": parameters exceed the class table's room");                        \
                                                                                                       \
	static __always_inline void alg##_event(struct sock *sk, __u32 ev)                            \
	{                                                                                              \
		struct alg##_ca *ca = inet_csk_ca(sk);                                                \
		struct alg##_params p = alg##_params;                                                \
		struct scc_window in = scc_window_in(sk, &ca->g), w = in;                              \
                                                                                                       \
		SCC_CLASS_PARAMS(ca->g.class_id, p);                                                   \
		alg##_on_event(&ca->s, &p, ev, &w);                                                   \
		scc_window_out(sk, &ca->g, &w);                                                        \
		scc_trace_step(&ca->g, SCC_REC_EVENT, ev, 0, &in, &w);                                 \
	}                                                                                              \
                                                                                                       \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_init, struct sock *sk)                                                 \
	{                                                                                              \
		const struct tcp_sock *tp = tcp_sk(sk);                                                \
		struct alg##_ca *ca = inet_csk_ca(sk);                                                \
		struct alg##_params p = alg##_params;                                                \
		struct scc_window w = {};                                                              \
                                                                                                       \
		/* Before the handshake ends ECN is not negotiated yet: decide at the init after it. */ \
		if (((alg_flags) & SCC_ECN_PER_PACKET) && !(tp->ecn_flags & TCP_ECN_OK) &&                 \
		    sk->__sk_common.skc_state == TCP_ESTABLISHED) {                                    \
			bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, "reno", sizeof("reno"));           \
			return;                                                                        \
		}                                                                                      \
		__builtin_memset(&ca->g, 0, sizeof(ca->g));                                            \
		ca->g.flow = __sync_fetch_and_add(&scc_flows, 1);                                      \
		ca->g.ssthresh = SCC_INFINITE;                                                         \
		ca->g.delivered_ce = tp->delivered_ce;                                                 \
		ca->g.prior_rcv_nxt = tp->rcv_nxt;                                                     \
		ca->g.class_id = scc_class_of(sk);                                                     \
		SCC_CLASS_PARAMS(ca->g.class_id, p);                                                   \
		alg##_init(&ca->s, &p);                                                               \
		scc_trace_step(&ca->g, SCC_REC_INIT, 0, 0, &w, &w);                                    \
	}                                                                                              \
                                                                                                       \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_in_ack_event, struct sock *sk, __u32 ev_flags)                         \
	{                                                                                              \
		struct alg##_ca *ca = inet_csk_ca(sk);                                                \
                                                                                                       \
		ca->g.ece = ev_flags & CA_ACK_ECE ? 1 : 0;                                             \
	}                                                                                              \
                                                                                                       \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_cong_control, struct sock *sk, __u32 ack, int flag,                    \
		      const struct rate_sample *rs)                                                    \
	{                                                                                              \
		struct alg##_ca *ca = inet_csk_ca(sk);                                                \
		struct alg##_params p = alg##_params;                                                \
		struct scc_signals sig = {};                                                           \
		struct scc_window in = scc_window_in(sk, &ca->g), w = in;                              \
                                                                                                       \
		scc_signals_of(sk, &ca->g, rs, in.mss, (alg_flags), &sig);                                          \
		SCC_CLASS_PARAMS(ca->g.class_id, p);                                                   \
		alg##_on_ack(&ca->s, &p, &sig, &w);                                                   \
		scc_window_out(sk, &ca->g, &w);                                                        \
		scc_pacing_rate(sk);                                                                   \
		scc_trace_step(&ca->g, SCC_REC_ACK, 0, &sig, &in, &w);                                 \
	}                                                                                              \
                                                                                                       \
	/* The kernel's own threshold request: the algorithm's, unchanged (events set it). */          \
	SEC("struct_ops")                                                                              \
	__u32 BPF_PROG(alg##_so_ssthresh, struct sock *sk)                                            \
	{                                                                                              \
		return tcp_sk(sk)->snd_ssthresh;                                                       \
	}                                                                                              \
                                                                                                       \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_set_state, struct sock *sk, __u8 new_state)                            \
	{                                                                                              \
		__u8 old = inet_csk(sk)->icsk_ca_state;                                                \
                                                                                                       \
		if (new_state == TCP_CA_Recovery && old != TCP_CA_Recovery)                            \
			alg##_event(sk, SCC_LOSS);                                                    \
		else if (new_state == TCP_CA_CWR && old != TCP_CA_CWR && ((alg_flags) & SCC_ECN_CLASSIC))  \
			alg##_event(sk, SCC_ECN);                                                     \
	}                                                                                              \
                                                                                                       \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_cwnd_event, struct sock *sk, enum tcp_ca_event ev)                     \
	{                                                                                              \
		struct alg##_ca *ca = inet_csk_ca(sk);                                                \
                                                                                                       \
		if (ev == CA_EVENT_LOSS)                                                               \
			alg##_event(sk, SCC_TIMEOUT);                                                 \
		else if ((alg_flags) & SCC_ECN_PER_PACKET &&                                               \
			 (ev == CA_EVENT_ECN_IS_CE || ev == CA_EVENT_ECN_NO_CE)) {                     \
			__u32 ce = ca->g.ce_state, prior = ca->g.prior_rcv_nxt;                        \
                                                                                                       \
			ece_ack_update(sk, ev, &prior, &ce);                                           \
			ca->g.ce_state = ce;                                                           \
			ca->g.prior_rcv_nxt = prior;                                                   \
		}                                                                                      \
	}                                                                                              \
                                                                                                       \
	/* No undo: the simulator's transport has none either, and the algorithm owns the window. */  \
	SEC("struct_ops")                                                                              \
	__u32 BPF_PROG(alg##_so_undo_cwnd, struct sock *sk)                                           \
	{                                                                                              \
		return tcp_sk(sk)->snd_cwnd;                                                           \
	}                                                                                              \
                                                                                                       \
	/* Required by the kernel; not called while cong_control is set. */                           \
	SEC("struct_ops")                                                                              \
	void BPF_PROG(alg##_so_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)                   \
	{                                                                                              \
	}                                                                                              \
                                                                                                       \
	SEC(".struct_ops.link")                                                                        \
	struct tcp_congestion_ops alg = {                                                             \
		.init = (void *)alg##_so_init,                                                        \
		.in_ack_event = (void *)alg##_so_in_ack_event,                                        \
		.cwnd_event = (void *)alg##_so_cwnd_event,                                            \
		.ssthresh = (void *)alg##_so_ssthresh,                                                \
		.cong_avoid = (void *)alg##_so_cong_avoid,                                            \
		.cong_control = (void *)alg##_so_cong_control,                                        \
		.undo_cwnd = (void *)alg##_so_undo_cwnd,                                              \
		.set_state = (void *)alg##_so_set_state,                                              \
		.flags = (alg_flags) & SCC_ECN_PER_PACKET ? TCP_CONG_NEEDS_ECN : 0,                        \
		.name = #alg,                                                                         \
	};

#endif /* SLUICE_SCC_KERNEL_H */
