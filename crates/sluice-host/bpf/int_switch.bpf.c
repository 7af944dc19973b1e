// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Software TCP-INT switch for a Linux forwarding path (tc clsact).
 *
 * Ingress notes the arrival time in skb->mark, which survives forwarding inside one network
 * namespace. Egress runs just before the port's qdisc and reads the bytes that qdisc holds: the
 * backlog this packet joins, as a switch's enqueue sees it. That backlog drives INTval, the
 * queueing part of the hop latency and CE marking (this kernel has no RED qdisc). An estimate
 * (arrivals less what the port's rate drained) ran ahead of the real queue: the shaper sends a
 * little above its nominal rate, and dropped packets stayed counted.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "tcp_int.h"

#define ETH_P_IP 0x0800
#define IPPROTO_TCP 6
#define TC_ACT_OK 0
#define ETH_HLEN 14
#define INET_ECN_MASK 3
#define INET_ECN_CE 3

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* ifindex */
	__type(value, struct port_cfg);
} port_cfgs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* ifindex */
	__type(value, struct port_state);
} port_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SW_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} switch_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&switch_counters, &which);

	if (c)
		(*c)++;
}

SEC("tc")
int sluice_ingress(struct __sk_buff *skb)
{
	/* The low 32 bits of the clock; residence times are far shorter than the 4 s wrap. */
	skb->mark = (__u32)bpf_ktime_get_ns() | 1;
	return TC_ACT_OK;
}

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The bytes the port's root qdisc holds now (Linux 6.2 and later: bpf_cast_to_kern_ctx). */
static __always_inline __u64 qdisc_backlog(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);

	return BPF_CORE_READ(kskb, dev, qdisc, qstats.backlog);
}

/* Records the port's backlog `q` as one packet joins it, and its utilization over the window. */
static __always_inline void port_update(struct port_state *ps, const struct port_cfg *cfg, __u64 now, __u32 len,
					__u64 q, __u32 *util)
{
	bpf_spin_lock(&ps->lock);
	ps->last_ns = now;
	ps->q_bytes = q;
	if (q > ps->q_max)
		ps->q_max = q;
	ps->q_sum += q;
	ps->q_samples++;

	ps->win_bytes += len;
	if (now - ps->win_start_ns >= cfg->util_window_ns) {
		__u64 span = now - ps->win_start_ns;
		__u64 cap = cfg->rate_bps / 8 * span / 1000000000ull;

		ps->util_percent = cap ? ps->win_bytes * 100 / cap : 0;
		ps->win_start_ns = now;
		ps->win_bytes = 0;
	}
	*util = ps->util_percent;
	bpf_spin_unlock(&ps->lock);
}

/*
 * Sets ECE on a pure ACK (no payload, not a SYN) and fixes the TCP checksum: a reconfigurable
 * network's ToR tells senders this way that their circuit is up or about to be (Etalon, reTCP).
 */
static __always_inline void mark_ece(struct __sk_buff *skb, const struct iphdr *ip, __u32 tcp_off, const struct tcphdr *th)
{
	__u16 old_w, new_w;

	if (!th->ack || th->syn || th->ece || bpf_ntohs(ip->tot_len) != ip->ihl * 4 + th->doff * 4)
		return;
	/* Data offset and flags share the 16-bit word at byte 12 of the header. */
	if (bpf_skb_load_bytes(skb, tcp_off + 12, &old_w, 2))
		return;
	new_w = old_w | bpf_htons(0x0040);
	if (bpf_skb_store_bytes(skb, tcp_off + 12, &new_w, 2, 0))
		return;
	bpf_l4_csum_replace(skb, tcp_off + offsetof(struct tcphdr, check), old_w, new_w, 2);
	count(SW_ECE_MARKED);
}

/* Sets CE on an ECT packet and fixes the IPv4 header checksum. */
static __always_inline void mark_ce(struct __sk_buff *skb, __u32 ip_off, struct iphdr *ip)
{
	__u8 tos = ip->tos;
	__u16 old_w, new_w;

	if (!(tos & INET_ECN_MASK) || (tos & INET_ECN_MASK) == INET_ECN_CE)
		return;
	/* The checksum covers 16-bit words: version/IHL share a word with TOS. */
	old_w = bpf_htons(((__u16)(*(__u8 *)ip) << 8) | tos);
	new_w = bpf_htons(((__u16)(*(__u8 *)ip) << 8) | (tos | INET_ECN_CE));
	tos |= INET_ECN_CE;
	if (bpf_skb_store_bytes(skb, ip_off + offsetof(struct iphdr, tos), &tos, 1, 0))
		return;
	bpf_l3_csum_replace(skb, ip_off + offsetof(struct iphdr, check), old_w, new_w, 2);
	count(SW_CE_MARKED);
}

#define OPT_BUF 64 /* a power of two above TCP_OPT_SPACE, for index masking */

/* Hides a value's known range from the compiler so the mask after it survives for the verifier. */
#define barrier_var(v) asm volatile("" : "+r"(v))

static __always_inline __u8 opt_byte(const __u8 *opts, __u32 i)
{
	barrier_var(i);
	return opts[i & (OPT_BUF - 1)];
}

/* Offset of the first option of `kind` in the option area, or -1 when there is none. */
static __always_inline int find_option(const __u8 *opts, __u32 len, __u8 kind)
{
	__u32 i = 0;

	/* Each step consumes at least one byte, so 40 steps cover the largest option area. */
	for (int step = 0; step < TCP_OPT_SPACE; step++) {
		if (i >= len || i >= TCP_OPT_SPACE)
			return -1;
		__u8 k = opt_byte(opts, i);

		if (k == 0) /* end of option list */
			return -1;
		if (k == kind)
			return i;
		if (k == 1) { /* no-op */
			i++;
			continue;
		}
		if (i + 1 >= len)
			return -1;
		__u8 olen = opt_byte(opts, i + 1);

		if (olen < 2)
			return -1; /* the kernel's own parser stops here too */
		i += olen;
	}
	return -1;
}

/*
 * In-band negotiation: a SYN's proposal learns what this port offers. A port that stamps TCP-INT
 * says so; one that does not clears "every hop stamps"; one that does not mark ECN clears "every
 * hop marks". The byte changes in place, with the checksum fixed for its 16-bit word. Only the
 * first option of kind 253 is looked at (one search keeps the verifier's work small); a SYN that
 * carries another ExID's first is left alone, and its proposal then claims a path it never asked.
 * A function of its own, not inlined: inlined, its search changed how the compiler laid out the
 * data path's, and two DCTCP flows through the testbed lost 10-25 % of their goodput.
 */
static __noinline void offer(struct __sk_buff *skb, const struct port_cfg *cfg, const __u8 *opts, __u32 opt_len,
				  __u32 tcp_off)
{
	int at = find_option(opts, opt_len, NEG_KIND);

	if (at < 0 || at >= TCP_OPT_SPACE)
		return;
	if (opt_len - at >= 4 && (opt_byte(opts, at + 2) != NEG_EXID_HI || opt_byte(opts, at + 3) != NEG_EXID_LO))
		return;
	if (opt_len - at < NEG_LEN || opt_byte(opts, at + 1) != NEG_LEN) {
		count(SW_NEG_MALFORMED);
		return;
	}
	__u8 caps = opt_byte(opts, at + 4), new_caps = caps;

	if (cfg->int_off)
		new_caps &= ~CAPS_PATH_ALL_INT;
	else
		new_caps |= CAPS_PATH_ANY_INT;
	if (!cfg->ce_threshold)
		new_caps &= ~CAPS_PATH_ECN;
	count(SW_NEG_SEEN);
	if (new_caps == caps)
		return;
	/* The byte's offset from the TCP header, and the 16-bit word of the checksum it is in. */
	__u32 rel = sizeof(struct tcphdr) + at + 4;
	__u32 word = tcp_off + (rel & ~1u);
	__u8 w[2];
	__u16 old_w, new_w;

	if (bpf_skb_load_bytes(skb, word, w, 2))
		return;
	__builtin_memcpy(&old_w, w, 2);
	/* A branch, not an index: the verifier refuses arithmetic on the stack pointer's bits. */
	if (rel & 1)
		w[1] = new_caps;
	else
		w[0] = new_caps;
	__builtin_memcpy(&new_w, w, 2);
	if (bpf_skb_store_bytes(skb, word, w, 2, 0))
		return;
	bpf_l4_csum_replace(skb, tcp_off + offsetof(struct tcphdr, check), old_w, new_w, 2);
}

SEC("tc")
int sluice_egress(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct tcp_int_fields f;
	struct tcp_int_opt old, new;
	struct port_cfg *cfg;
	struct port_state *ps;
	struct ethhdr eth;
	struct iphdr ip;
	struct tcphdr th;
	__u8 opts[OPT_BUF];
	__u32 ip_off = ETH_HLEN, tcp_off, opt_len, util;
	__u64 now, q;
	int at;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) || eth.h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ip_off, &ip, sizeof(ip)) || ip.protocol != IPPROTO_TCP || ip.ihl < 5)
		return TC_ACT_OK;
	/* Later fragments carry no TCP header. */
	if (ip.frag_off & bpf_htons(0x1fff))
		return TC_ACT_OK;
	tcp_off = ip_off + ip.ihl * 4;
	if (bpf_skb_load_bytes(skb, tcp_off, &th, sizeof(th)) || th.doff < 5)
		return TC_ACT_OK;
	count(SW_PKTS);

	cfg = bpf_map_lookup_elem(&port_cfgs, &ifindex);
	ps = bpf_map_lookup_elem(&port_states, &ifindex);
	if (!cfg || !ps) {
		count(SW_NO_PORT);
		return TC_ACT_OK;
	}
	now = bpf_ktime_get_ns();
	q = qdisc_backlog(skb);
	port_update(ps, cfg, now, skb->len, q, &util);

	/* As a switch marks at enqueue: the queue the packet finds, without it, above K. */
	if ((cfg->ce_threshold && q > cfg->ce_threshold) || cfg->ce_all)
		mark_ce(skb, ip_off, &ip);
	if (cfg->ece_acks)
		mark_ece(skb, &ip, tcp_off, &th);

	opt_len = th.doff * 4 - sizeof(th);
	if (opt_len == 0 || opt_len > TCP_OPT_SPACE) {
		count(SW_NO_OPT);
		return TC_ACT_OK;
	}
	__builtin_memset(opts, 0, sizeof(opts));
	if (bpf_skb_load_bytes(skb, tcp_off + sizeof(th), opts, opt_len))
		return TC_ACT_OK;
	/* The handshake carries negotiation, never telemetry (the agent stamps established segments). */
	if (th.syn) {
		if (!th.ack)
			offer(skb, cfg, opts, opt_len, tcp_off);
		return TC_ACT_OK;
	}
	if (cfg->int_off)
		return TC_ACT_OK;
	at = find_option(opts, opt_len, TCP_INT_KIND);
	if (at < 0 || at >= TCP_OPT_SPACE) {
		count(SW_NO_OPT);
		return TC_ACT_OK;
	}
	/*
	 * Copy what is there of the option (the whole 12 bytes, or its kind and length when fewer
	 * remain) and let the decoder shared with the agent and the tests judge length and truncation.
	 */
	__u32 opt_off = tcp_off + sizeof(th) + at;
	__u32 left = opt_len - at;

	__builtin_memset(&old, 0, sizeof(old));
	if (left >= sizeof(old)) {
		if (bpf_skb_load_bytes(skb, opt_off, &old, sizeof(old)))
			return TC_ACT_OK;
	} else if (left >= 2) {
		if (bpf_skb_load_bytes(skb, opt_off, &old, 2))
			return TC_ACT_OK;
	}
	if (tcp_int_decode((const __u8 *)&old, left, &f) != TCP_INT_OK) {
		count(SW_MALFORMED);
		return TC_ACT_OK;
	}

	__u8 hop = cfg->pinned_int_val ? (__u8)cfg->pinned_int_val
				       : tcp_int_hop_val(q, util, cfg->qdepth_threshold, cfg->qdepth_shift,
							 cfg->util_shift);
	/* A queue reading (bit 7) outranks any utilization reading numerically, so max is enough. */
	if (hop > f.int_val) {
		f.int_val = hop;
		f.id = ip.ttl;
		count(SW_RAISED);
	}

	/* Residence: time since ingress, plus what the port will take to send it from this hook. */
	__u64 lat = 0;
	__u32 in = skb->mark;

	if (in & 1)
		lat = (__u32)((__u32)now - in);
	/* Its wait behind the backlog and its own transmission at the port's rate. */
	if (cfg->rate_bps)
		lat += (q + skb->len) * 8 * 1000000000ull / cfg->rate_bps;
	lat += f.lat;
	f.lat = lat > TCP_INT_LAT_MAX ? TCP_INT_LAT_MAX : (__u32)lat;

	tcp_int_encode(&f, &new);
	if (bpf_skb_store_bytes(skb, opt_off, &new, sizeof(new), 0))
		return TC_ACT_OK;

	/*
	 * Incremental checksum update. The option may start at an odd offset in the segment; a
	 * sum over bytes at an odd offset is the byte-rotated sum (RFC 1071), as csum_shift() does.
	 */
	__s64 diff = bpf_csum_diff((__be32 *)&old, sizeof(old), (__be32 *)&new, sizeof(new), 0);
	__u32 d = (__u32)diff;

	if ((sizeof(th) + at) & 1)
		d = (d >> 8) | (d << 24);
	bpf_l4_csum_replace(skb, tcp_off + offsetof(struct tcphdr, check), 0, d, 0);
	count(SW_STAMPED);
	return TC_ACT_OK;
}
