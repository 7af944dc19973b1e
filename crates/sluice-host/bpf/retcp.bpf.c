// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * reTCP as BPF struct_ops: for reconfigurable networks whose ToRs signal circuit state through
 * ECN. The sender multiplies cwnd by alpha when ECE turns on (the circuit is coming up) and
 * divides it when ECE turns off (the circuit went away). ECE is a circuit signal here, not
 * congestion, so it never cuts the window; losses are handled like Reno.
 */
#include "vmlinux.h"
#include "cc_common.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The cwnd multiplier, e.g. the circuit-to-packet bandwidth ratio. */
const volatile __u32 alpha = 2;

struct retcp {
	struct dctcp_est est; /* receiver-side exact CE echo; loss_cwnd for undo */
	__u32 ece;            /* ECE state of the last ACK */
};

SEC("struct_ops")
void BPF_PROG(retcp_init, struct sock *sk)
{
	struct retcp *ca = inet_csk_ca(sk);

	dctcp_est_init(sk, &ca->est, 0);
	ca->ece = 0;
}

SEC("struct_ops")
void BPF_PROG(retcp_in_ack_event, struct sock *sk, __u32 flags)
{
	struct retcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 ece = flags & CA_ACK_ECE ? 1 : 0;
	__u32 a = alpha ? alpha : 1;
	__u32 w = tp->snd_cwnd;

	if (ece == ca->ece)
		return;
	if (ece) {
		w = w * a;
		if (w > tp->snd_cwnd_clamp)
			w = tp->snd_cwnd_clamp;
	} else {
		w = w / a;
		if (w < 2)
			w = 2;
	}
	ca->ece = ece;
	tp->snd_cwnd = w;
	/* Where the window lands is also where a CWR episode started by this ECE must end. */
	tp->snd_ssthresh = w;
	ca->est.ssthresh = w;
	ca->est.last_cwnd = w;
}

SEC("struct_ops")
__u32 BPF_PROG(retcp_ssthresh, struct sock *sk)
{
	struct retcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	ca->est.loss_cwnd = tp->snd_cwnd;
	/* Entered because of ECE (in_ack_event ran first): keep the window reTCP just set. */
	if (ca->ece)
		ca->est.ssthresh = tp->snd_cwnd;
	else
		ca->est.ssthresh = tp->snd_cwnd >> 1 > 2 ? tp->snd_cwnd >> 1 : 2;
	return ca->est.ssthresh;
}

SEC("struct_ops")
void BPF_PROG(retcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct retcp *ca = inet_csk_ca(sk);

	if (ev == CA_EVENT_ECN_IS_CE || ev == CA_EVENT_ECN_NO_CE)
		ece_ack_update(sk, ev, &ca->est.prior_rcv_nxt, &ca->est.ce_state);
}

SEC("struct_ops")
__u32 BPF_PROG(retcp_undo_cwnd, struct sock *sk)
{
	const struct retcp *ca = inet_csk_ca(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	return cwnd > ca->est.loss_cwnd ? cwnd : ca->est.loss_cwnd;
}

SEC("struct_ops")
void BPF_PROG(retcp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct retcp *ca = inet_csk_ca(sk);

	cc_control(sk, &ca->est, ack, rs->acked_sacked);
}

/* Required by the kernel; not called while cong_control is set. */
SEC("struct_ops")
void BPF_PROG(retcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops retcp = {
	.init = (void *)retcp_init,
	.in_ack_event = (void *)retcp_in_ack_event,
	.cwnd_event = (void *)retcp_cwnd_event,
	.ssthresh = (void *)retcp_ssthresh,
	.cong_avoid = (void *)retcp_cong_avoid,
	.cong_control = (void *)retcp_cong_control,
	.undo_cwnd = (void *)retcp_undo_cwnd,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "retcp",
};
