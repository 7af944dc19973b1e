/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the BPF congestion-control algorithms share: kernel TCP helpers callable from struct_ops,
 * DCTCP's marked-fraction estimate and its receiver-side CE echo.
 */
#ifndef SLUICE_CC_COMMON_H
#define SLUICE_CC_COMMON_H

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define TCP_ECN_OK 1
#define TCP_ECN_DEMAND_CWR 4
#define ICSK_ACK_TIMER 2
#define ICSK_ACK_NOW 8
#define TCP_CONG_NEEDS_ECN 0x2
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define SOL_TCP 6
#define TCP_CONGESTION 13

/* Fixed point for alpha: 1024 = 1.0 (the kernel DCTCP's scale). */
#define ALPHA_ONE 1024u

/* Kernel TCP functions exported to struct_ops congestion control. */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}

/* DCTCP's estimator: the fraction of delivered segments that were CE-marked, per window. */
struct dctcp_est {
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 next_seq;
	__u32 alpha; /* ALPHA_ONE = every segment marked */
	__u32 prior_rcv_nxt;
	__u32 ce_state; /* receiver: CE state of the last data segment */
	__u32 loss_cwnd;
	__u32 ssthresh;  /* the threshold this algorithm chose last (see cc_control) */
	__u32 last_cwnd; /* the window cc_control left, to spot a jump it did not make */
};

static __always_inline void dctcp_est_reset(const struct tcp_sock *tp, struct dctcp_est *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

static __always_inline void dctcp_est_init(struct sock *sk, struct dctcp_est *ca, __u32 alpha_init)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->alpha = alpha_init > ALPHA_ONE ? ALPHA_ONE : alpha_init;
	ca->loss_cwnd = 0;
	ca->ce_state = 0;
	ca->ssthresh = TCP_INFINITE_SSTHRESH;
	ca->last_cwnd = 0;
	dctcp_est_reset(tp, ca);
	/*
	 * A policy sets the algorithm at TCP_CONNECT_CB, which runs before tcp_connect_init() has set
	 * snd_nxt (still 0 then). Against a random ISN, snd_una would then be "before" 0 for half of
	 * all connections until the sequence space wraps, and alpha would never update. The SYN's
	 * sequence number is already write_seq.
	 */
	if (sk->__sk_common.skc_state == TCP_SYN_SENT)
		ca->next_seq = tp->write_seq;
}

/*
 * Once per window of data (snd_una passing next_seq): alpha <- (1 - g) alpha + g F, with g =
 * 2^-shift_g and F the marked fraction. Returns true when a window closed.
 */
static __always_inline bool dctcp_est_update(struct sock *sk, struct dctcp_est *ca, __u32 shift_g)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (before(tp->snd_una, ca->next_seq))
		return false;

	__u32 delivered = tp->delivered - ca->old_delivered;
	__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
	__u32 alpha = ca->alpha;
	__u32 dec = alpha >> shift_g;

	/* At least 1 while alpha is positive, so alpha can decay all the way to 0. */
	alpha -= dec ? dec : alpha;
	if (delivered_ce) {
		delivered_ce <<= (10 - shift_g);
		delivered_ce /= delivered > 1 ? delivered : 1;
		alpha = alpha + delivered_ce > ALPHA_ONE ? ALPHA_ONE : alpha + delivered_ce;
	}
	ca->alpha = alpha;
	dctcp_est_reset(tp, ca);
	return true;
}

/* The window after a cut of alpha / 2: W (1 - alpha / 2), never below 2 segments. */
static __always_inline __u32 cut_by_alpha(__u32 cwnd, __u32 alpha)
{
	__u32 w = cwnd - ((cwnd * alpha) >> 11);

	return w > 2 ? w : 2;
}

/* A loss halves the window like Reno, whatever alpha says (RFC 8257 section 3.5). */
static __always_inline void react_to_loss(struct sock *sk, struct dctcp_est *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1;

	ca->loss_cwnd = tp->snd_cwnd;
	ca->ssthresh = half > 2 ? half : 2;
	tp->snd_ssthresh = ca->ssthresh;
}

/*
 * The kernel's per-ACK window update (tcp_congestion_ops.cong_control), taken over.
 *
 * On Linux 6.18 a BPF algorithm's ssthresh result does not always reach tp->snd_ssthresh: now and
 * then the field holds the low half of a kernel return address (0x81104110,
 * srso_alias_return_thunk+5 on this machine) although the program returned a few segments. The
 * kernel's proportional rate reduction divides by that and sets cwnd to ~10^9; the sender then
 * empties its buffer into the bottleneck and never comes back. A kernel-built algorithm is not
 * affected, and neither is one whose window the BPF side owns: here the threshold is always the
 * one this algorithm computed (ca->ssthresh), a cut is applied at once (RFC 8257's
 * cwnd <- cwnd (1 - alpha/2)) instead of by PRR, and a window jump this code did not make is
 * undone.
 */
static __always_inline void cc_control(struct sock *sk, struct dctcp_est *ca, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u8 st = inet_csk(sk)->icsk_ca_state;
	__u32 clamp = tp->snd_cwnd_clamp;

	if (ca->last_cwnd && tp->snd_cwnd > 2 * ca->last_cwnd + 16)
		tp->snd_cwnd = ca->last_cwnd;
	if (st == TCP_CA_CWR || st == TCP_CA_Recovery) {
		tp->snd_ssthresh = ca->ssthresh;
		if (tp->snd_cwnd > ca->ssthresh)
			tp->snd_cwnd = ca->ssthresh;
	} else {
		if (tp->snd_ssthresh != TCP_INFINITE_SSTHRESH && tp->snd_ssthresh > clamp)
			tp->snd_ssthresh = ca->ssthresh;
		tcp_reno_cong_avoid(sk, ack, acked);
	}
	if (tp->snd_cwnd > clamp)
		tp->snd_cwnd = clamp;
	if (tp->snd_cwnd < 2)
		tp->snd_cwnd = 2;
	ca->last_cwnd = tp->snd_cwnd;
}

static __always_inline void ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/*
 * Receiver side: echo the CE state of each data segment exactly (ECE set while CE arrives),
 * rather than classic ECN's latch until CWR. On a change, a delayed ACK is sent first with the
 * old state, then an immediate one with the new.
 */
static __always_inline void ece_ack_update(struct sock *sk, enum tcp_ca_event evt, __u32 *prior_rcv_nxt,
					   __u32 *ce_state)
{
	__u32 new_ce_state = evt == CA_EVENT_ECN_IS_CE ? 1 : 0;

	if (*ce_state != new_ce_state) {
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
			ece_ack_cwr(sk, *ce_state);
			bpf_tcp_send_ack(sk, *prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	*prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
	*ce_state = new_ce_state;
	ece_ack_cwr(sk, new_ce_state);
}

#endif /* SLUICE_CC_COMMON_H */
