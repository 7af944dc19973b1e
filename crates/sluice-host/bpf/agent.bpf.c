// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * TCP-INT host agent: a sockops program that carries the 0x72 option on every segment of an
 * established connection, keeps the echo state per socket and streams telemetry to userspace.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "tcp_int.h"

#define AF_INET 2
#define EINVAL 22
#define ENOMSG 42
#define TCPHDR_SYN 0x02

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agent_config);
} agent_config SEC(".maps");

/* Shared with ecn_int.bpf.c, which reads the echo a connection last received. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct int_sk);
} int_sk_store SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} int_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AG_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} agent_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&agent_counters, &which);

	if (c)
		(*c)++;
}

static __always_inline struct agent_config *agent_cfg(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&agent_config, &zero);
}

static __always_inline void fill_addrs(struct bpf_sock_ops *skops, struct int_event *e)
{
	if (skops->family == AF_INET) {
		/* IPv4-mapped IPv6 (::ffff:a.b.c.d) keeps one address format for userspace. */
		__builtin_memset(e->saddr, 0, 10);
		__builtin_memset(e->daddr, 0, 10);
		e->saddr[10] = e->saddr[11] = 0xff;
		e->daddr[10] = e->daddr[11] = 0xff;
		__u32 s = skops->local_ip4, d = skops->remote_ip4;
		__builtin_memcpy(&e->saddr[12], &s, 4);
		__builtin_memcpy(&e->daddr[12], &d, 4);
	} else {
		__u32 s[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2], skops->local_ip6[3] };
		__u32 d[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2], skops->remote_ip6[3] };
		__builtin_memcpy(e->saddr, s, 16);
		__builtin_memcpy(e->daddr, d, 16);
	}
	e->sport = skops->local_port;
	e->dport = bpf_ntohl(skops->remote_port);
}

static __always_inline void on_established(struct bpf_sock_ops *skops)
{
	struct int_sk *st;

	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&int_sk_store, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		count(AG_NO_STORAGE);
		return;
	}
	/*
	 * PARSE_ALL rather than PARSE_UNKNOWN: the kernel only reports an option as unknown after it
	 * passed its own length checks, and a truncated 0x72 option must still be seen and counted.
	 */
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG |
						 BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG);
	count(AG_SOCKS_ENABLED);
}

static __always_inline void reserve(struct bpf_sock_ops *skops)
{
	struct agent_config *cfg = agent_cfg();

	if (!cfg || !cfg->int_enabled)
		return;
	if (bpf_reserve_hdr_opt(skops, TCP_INT_LEN, 0))
		count(AG_OPT_NO_SPACE);
}

static __always_inline void write(struct bpf_sock_ops *skops)
{
	struct agent_config *cfg = agent_cfg();
	struct tcp_int_fields f = {};
	struct tcp_int_opt o;
	struct int_sk *st;

	if (!cfg || !cfg->int_enabled)
		return;
	/* The sender starts every segment at INTval 0, ID 0, Lat 0: switches raise and add. */
	struct bpf_sock *sk = skops->sk;

	st = sk ? bpf_sk_storage_get(&int_sk_store, sk, 0, 0) : NULL;
	if (st && cfg->echo_enabled) {
		f.int_ecr = st->rx_int_val;
		f.id_ecr = st->rx_id;
		f.lat_ecr = st->rx_lat;
	}
	tcp_int_encode(&f, &o);
	if (bpf_store_hdr_opt(skops, &o, sizeof(o), 0))
		count(AG_OPT_NO_SPACE);
	else
		count(AG_OPT_WRITTEN);
}

/*
 * Clamps an echo that reads beyond agent_config's bounds, counting each field it clamps: a forged
 * or corrupted echo (from the peer or a device on the path) then moves the sender's congestion
 * control and telemetry no further than a plausible reading would. A queue reading stays a queue
 * reading and a utilization stays a utilization. Out of line: only an implausible echo gets here.
 */
static __noinline void clamp_echo(struct tcp_int_fields *f, const struct agent_config *cfg)
{
	__u8 branch = f->int_ecr & TCP_INT_QDEPTH_FLAG;
	__u8 max = branch ? cfg->ecr_queue_max : cfg->ecr_util_max;

	if ((f->int_ecr & 0x7f) > max) {
		f->int_ecr = branch | (max & 0x7f);
		count(AG_ECR_INT_CLAMPED);
	}
	if (f->lat_ecr > cfg->ecr_lat_max) {
		f->lat_ecr = cfg->ecr_lat_max;
		count(AG_ECR_LAT_CLAMPED);
	}
}

static __always_inline void parse(struct bpf_sock_ops *skops)
{
	struct agent_config *cfg = agent_cfg();
	struct tcp_int_fields f = {};
	__u8 buf[TCP_OPT_SPACE] = { TCP_INT_KIND };
	struct int_event *e;
	struct int_sk *st;
	long n;
	int err;

	/* The helper finds the first option of this kind and copies it whole, whatever its length. */
	n = bpf_load_hdr_opt(skops, buf, sizeof(buf), 0);
	if (n == -ENOMSG) {
		count(AG_OPT_ABSENT);
		return;
	}
	if (n < 0) {
		/* -EINVAL: an option whose length runs past the header's end. */
		count(AG_MALFORMED_TRUNC);
		return;
	}
	err = tcp_int_decode(buf, n > TCP_OPT_SPACE ? TCP_OPT_SPACE : (__u32)n, &f);
	if (err == TCP_INT_WRONG_LEN) {
		count(AG_MALFORMED_LEN);
		return;
	}
	if (err != TCP_INT_OK) {
		count(AG_MALFORMED_TRUNC);
		return;
	}
	count(AG_OPT_PARSED);

	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&int_sk_store, sk, 0, 0);
	if (!st)
		return;
	st->rx_int_val = f.int_val;
	st->rx_id = f.id;
	st->rx_lat = f.lat;
	if (f.int_ecr || f.id_ecr || f.lat_ecr) {
		/* One comparison per field on the per-segment path; clamping itself is out of line. */
		if (cfg && ((f.int_ecr & 0x7f) > (f.int_ecr & TCP_INT_QDEPTH_FLAG ? cfg->ecr_queue_max : cfg->ecr_util_max) ||
			    f.lat_ecr > cfg->ecr_lat_max))
			clamp_echo(&f, cfg);
		st->ecr_int_val = f.int_ecr;
		st->ecr_id = f.id_ecr;
		st->ecr_lat = f.lat_ecr;
		__sync_fetch_and_add(&st->ecr_count, 1);
	}

	__u64 now = bpf_ktime_get_ns();
	if (cfg && cfg->sample_ns && now - st->last_event_ns < cfg->sample_ns)
		return;
	st->last_event_ns = now;

	e = bpf_ringbuf_reserve(&int_events, sizeof(*e), 0);
	if (!e) {
		count(AG_EVENTS_LOST);
		return;
	}
	e->ts_ns = now;
	fill_addrs(skops, e);
	e->int_val = f.int_val;
	e->id = f.id;
	e->int_ecr = f.int_ecr;
	e->id_ecr = f.id_ecr;
	e->lat = f.lat;
	e->lat_ecr = f.lat_ecr;
	e->srtt_us = skops->srtt_us >> 3; /* the kernel keeps srtt scaled by 8 */
	e->snd_cwnd = skops->snd_cwnd;
	e->mss = skops->mss_cache;
	e->skb_len = skops->skb_len;
	bpf_ringbuf_submit(e, 0);
	count(AG_EVENTS);
}

SEC("sockops")
int sluice_agent(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_established(skops);
		break;
	/* The handshake carries negotiation (cc_select.bpf.c), not telemetry. */
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (!(skops->skb_tcp_flags & TCPHDR_SYN))
			reserve(skops);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (!(skops->skb_tcp_flags & TCPHDR_SYN))
			write(skops);
		break;
	case BPF_SOCK_OPS_PARSE_HDR_OPT_CB:
		parse(skops);
		break;
	}
	return 1;
}
