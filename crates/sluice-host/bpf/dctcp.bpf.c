// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * DCTCP (RFC 8257) as BPF struct_ops, for kernels built without tcp_dctcp. The window is cut by
 * alpha / 2 once per window of CE-marked data; growth and loss handling are Reno's.
 */
#include "vmlinux.h"
#include "cc_common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* g = 2^-shift_g (4: 1/16, the simulator's default); alpha starts at 1.0 as in RFC 8257. */
const volatile __u32 shift_g = 4;
const volatile __u32 alpha_init = ALPHA_ONE;

SEC("struct_ops")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_est *ca = inet_csk_ca(sk);

	/*
	 * Before the handshake ends (a policy sets the algorithm while the SYN is being sent) ECN is
	 * not negotiated yet: initialise now, decide at the init that follows establishment.
	 */
	if (!(tp->ecn_flags & TCP_ECN_OK) && sk->__sk_common.skc_state == TCP_ESTABLISHED) {
		/* No ECN on this connection: DCTCP would never see a mark, so run Reno instead. */
		bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, "reno", sizeof("reno"));
		return;
	}
	dctcp_est_init(sk, ca, alpha_init);
}

SEC("struct_ops")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct dctcp_est *ca = inet_csk_ca(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	ca->loss_cwnd = cwnd;
	ca->ssthresh = cut_by_alpha(cwnd, ca->alpha);
	return ca->ssthresh;
}

SEC("struct_ops")
void BPF_PROG(dctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	dctcp_est_update(sk, inet_csk_ca(sk), shift_g);
}

SEC("struct_ops")
void BPF_PROG(dctcp_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Recovery && new_state != inet_csk(sk)->icsk_ca_state)
		react_to_loss(sk, inet_csk_ca(sk));
}

SEC("struct_ops")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct dctcp_est *ca = inet_csk_ca(sk);

	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		ece_ack_update(sk, ev, &ca->prior_rcv_nxt, &ca->ce_state);
		break;
	case CA_EVENT_LOSS:
		react_to_loss(sk, ca);
		break;
	default:
		break;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(dctcp_cwnd_undo, struct sock *sk)
{
	const struct dctcp_est *ca = inet_csk_ca(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	return cwnd > ca->loss_cwnd ? cwnd : ca->loss_cwnd;
}

SEC("struct_ops")
void BPF_PROG(dctcp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	cc_control(sk, inet_csk_ca(sk), ack, rs->acked_sacked);
}

/* Required by the kernel; not called while cong_control is set. */
SEC("struct_ops")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops dctcp = {
	.init = (void *)dctcp_init,
	.in_ack_event = (void *)dctcp_in_ack_event,
	.cwnd_event = (void *)dctcp_cwnd_event,
	.ssthresh = (void *)dctcp_ssthresh,
	.cong_avoid = (void *)dctcp_cong_avoid,
	.cong_control = (void *)dctcp_cong_control,
	.undo_cwnd = (void *)dctcp_cwnd_undo,
	.set_state = (void *)dctcp_set_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "dctcp",
};
