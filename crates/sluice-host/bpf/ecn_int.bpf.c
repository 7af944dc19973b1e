// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ECN+INT as BPF struct_ops: DCTCP whose alpha is raised by the queue depth TCP-INT reports.
 *
 *   qdepth_s <- (1 - g) qdepth_s + g qdepth      on each new echo of the path's INTval
 *   alpha_int = qdepth_s / qdepth_target          (capped at 1)
 *   alpha     = max(alpha_dctcp, alpha_int)
 *   W        <- W (1 - alpha / 2)                 on ECE, and once per window while alpha_int > 0
 *
 * The echo comes from the host agent's per-socket storage (the loader shares the agent's map).
 * Without echoes alpha_int stays 0 and this is exactly DCTCP.
 */
#include "vmlinux.h"
#include "cc_common.h"
#include "tcp_int.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 shift_g = 4;         /* DCTCP gain, 2^-shift_g */
const volatile __u32 int_shift_g = 4;     /* queue smoothing gain, 2^-int_shift_g */
const volatile __u32 qdepth_target = 65536; /* bytes at which alpha_int reaches 1 */
const volatile __u32 qdepth_shift = 13;   /* the fabric's INTval queue unit, 2^13 = 8 KiB */

/* The agent's map: same definition, reused by file descriptor at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct int_sk);
} int_sk_store SEC(".maps");

struct ecn_int {
	struct dctcp_est est;
	__u32 alpha_int;
	__u64 qdepth_s;  /* smoothed queue bytes, scaled by 1024 */
	__u64 ecr_seen;  /* the agent's echo count last read */
};

static __always_inline __u32 alpha_max(const struct ecn_int *ca)
{
	return ca->est.alpha > ca->alpha_int ? ca->est.alpha : ca->alpha_int;
}

SEC("struct_ops")
void BPF_PROG(ecn_int_init, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct ecn_int *ca = inet_csk_ca(sk);

	/*
	 * Before the handshake ends (a policy sets the algorithm while the SYN is being sent) ECN is
	 * not negotiated yet: initialise now, decide at the init that follows establishment.
	 */
	if (!(tp->ecn_flags & TCP_ECN_OK) && sk->__sk_common.skc_state == TCP_ESTABLISHED) {
		bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, "reno", sizeof("reno"));
		return;
	}
	dctcp_est_init(sk, &ca->est, ALPHA_ONE);
	ca->alpha_int = 0;
	ca->qdepth_s = 0;
	ca->ecr_seen = 0;
}

/* Folds a new INT echo, if one arrived since the last ACK, into qdepth_s and alpha_int. */
static __always_inline void read_int(struct sock *sk, struct ecn_int *ca)
{
	struct int_sk *st = bpf_sk_storage_get(&int_sk_store, sk, 0, 0);
	__u64 qdepth = 0;

	if (!st || st->ecr_count == ca->ecr_seen)
		return;
	ca->ecr_seen = st->ecr_count;
	if (st->ecr_int_val & TCP_INT_QDEPTH_FLAG)
		qdepth = (__u64)(st->ecr_int_val & 0x7f) << (qdepth_shift & 31);
	ca->qdepth_s = ca->qdepth_s - (ca->qdepth_s >> int_shift_g) + ((qdepth << 10) >> int_shift_g);
	__u64 a = qdepth_target ? ca->qdepth_s / qdepth_target : 0;
	ca->alpha_int = a > ALPHA_ONE ? ALPHA_ONE : (__u32)a;
}

SEC("struct_ops")
void BPF_PROG(ecn_int_in_ack_event, struct sock *sk, __u32 flags)
{
	struct ecn_int *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	read_int(sk, ca);
	if (!dctcp_est_update(sk, &ca->est, shift_g))
		return;
	/*
	 * The queue the switches report is a congestion signal before any CE mark: cut once per
	 * window of data, and only in the Open state so an ECE or loss response is not doubled.
	 */
	if (ca->alpha_int && inet_csk(sk)->icsk_ca_state == TCP_CA_Open) {
		__u32 w = cut_by_alpha(tp->snd_cwnd, alpha_max(ca));

		tp->snd_cwnd = w;
		tp->snd_ssthresh = w;
		ca->est.ssthresh = w;
		ca->est.last_cwnd = w;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ecn_int_ssthresh, struct sock *sk)
{
	struct ecn_int *ca = inet_csk_ca(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	ca->est.loss_cwnd = cwnd;
	ca->est.ssthresh = cut_by_alpha(cwnd, alpha_max(ca));
	return ca->est.ssthresh;
}

SEC("struct_ops")
void BPF_PROG(ecn_int_set_state, struct sock *sk, __u8 new_state)
{
	struct ecn_int *ca = inet_csk_ca(sk);

	if (new_state == TCP_CA_Recovery && new_state != inet_csk(sk)->icsk_ca_state)
		react_to_loss(sk, &ca->est);
}

SEC("struct_ops")
void BPF_PROG(ecn_int_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct ecn_int *ca = inet_csk_ca(sk);

	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		ece_ack_update(sk, ev, &ca->est.prior_rcv_nxt, &ca->est.ce_state);
		break;
	case CA_EVENT_LOSS:
		react_to_loss(sk, &ca->est);
		break;
	default:
		break;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ecn_int_undo_cwnd, struct sock *sk)
{
	const struct ecn_int *ca = inet_csk_ca(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	return cwnd > ca->est.loss_cwnd ? cwnd : ca->est.loss_cwnd;
}

SEC("struct_ops")
void BPF_PROG(ecn_int_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct ecn_int *ca = inet_csk_ca(sk);

	cc_control(sk, &ca->est, ack, rs->acked_sacked);
}

/* Required by the kernel; not called while cong_control is set. */
SEC("struct_ops")
void BPF_PROG(ecn_int_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ecn_int = {
	.init = (void *)ecn_int_init,
	.in_ack_event = (void *)ecn_int_in_ack_event,
	.cwnd_event = (void *)ecn_int_cwnd_event,
	.ssthresh = (void *)ecn_int_ssthresh,
	.cong_avoid = (void *)ecn_int_cong_avoid,
	.cong_control = (void *)ecn_int_cong_control,
	.undo_cwnd = (void *)ecn_int_undo_cwnd,
	.set_state = (void *)ecn_int_set_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "ecn_int",
};
