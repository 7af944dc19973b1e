// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-connection congestion-control selection: the open CC architecture's per-class choice on a
 * real host. A policy map names an algorithm per TCP port or per cgroup; the first match wins,
 * in the order remote port, local port, cgroup of the connecting process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "tcp_int.h"

#define SOL_TCP 6
#define TCP_CONGESTION 13

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct cc_policy_key);
	__type(value, struct cc_policy_val);
} cc_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CC_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} cc_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&cc_counters, &which);

	if (c)
		(*c)++;
}

static __always_inline struct cc_policy_val *lookup(__u32 kind, __u64 value)
{
	struct cc_policy_key k = { .kind = kind, .value = value };

	return bpf_map_lookup_elem(&cc_policy, &k);
}

SEC("sockops")
int sluice_cc_select(struct bpf_sock_ops *skops)
{
	struct cc_policy_val *v;
	char name[16];

	/*
	 * Active opens are chosen before the SYN leaves, so an algorithm that needs ECN (DCTCP)
	 * asks for it. Listeners are chosen at listen(): a DCTCP SYN is ECT, which a listener only
	 * accepts for ECN when its own algorithm needs ECN, and its children inherit the choice.
	 * Passive opens are looked at again when established, for policies on the remote port.
	 */
	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB && skops->op != BPF_SOCK_OPS_TCP_LISTEN_CB &&
	    skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;

	v = lookup(CC_POLICY_PORT, bpf_ntohl(skops->remote_port));
	if (!v)
		v = lookup(CC_POLICY_PORT, skops->local_port);
	if (!v && skops->op == BPF_SOCK_OPS_TCP_CONNECT_CB)
		v = lookup(CC_POLICY_CGROUP, bpf_get_current_cgroup_id());
	if (!v)
		return 1;

	__builtin_memcpy(name, v->name, sizeof(name));
	name[15] = 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name)))
		count(CC_SET_FAILED);
	else
		count(CC_SET);
	return 1;
}
