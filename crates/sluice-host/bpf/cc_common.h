/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the kernel glue of the portable algorithms needs: socket accessors and DCTCP's
 * receiver-side exact CE echo.
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
