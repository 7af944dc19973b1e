// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-connection congestion-control selection: the open CC architecture's per-class choice on a
 * real host. The agent's class table (`sluice agent`, struct sluice_class) is tried first: the
 * first class whose service ports and cgroups match gives the connection its algorithm and socket
 * priority, and the socket remembers its class (counted per class while it lives). A connection
 * no class takes may still match the ad-hoc map of `sluice host policy set`, in the order remote
 * port, local port, cgroup of the connecting process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "tcp_int.h"
#include "class_maps.h"

#define SOL_SOCKET 1
#define SO_PRIORITY 12
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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SLUICE_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_class);
} sluice_classes SEC(".maps");

/* The generation of the policy in sluice_classes, raised by the agent at every change. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} class_generation SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_CLASS_IDS * CLASS_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} class_counters SEC(".maps");



static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&cc_counters, &which);

	if (c)
		(*c)++;
}

static __always_inline void count_class(__u32 id, __u32 which)
{
	if (id >= SLUICE_CLASS_IDS)
		return;
	__u32 k = id * CLASS_NCOUNTERS + which;
	__u64 *c = bpf_map_lookup_elem(&class_counters, &k);

	if (c)
		(*c)++;
}

static __always_inline struct cc_policy_val *lookup(__u32 kind, __u64 value)
{
	struct cc_policy_key k = { .kind = kind, .value = value };

	return bpf_map_lookup_elem(&cc_policy, &k);
}

/* The generation of the policy in force (its low bit: the half of sluice_classes in use). */
static __always_inline __u32 generation(void)
{
	__u32 zero = 0, *gen = bpf_map_lookup_elem(&class_generation, &zero);

	return gen ? *gen : 0;
}

/* The key (plus one) in sluice_classes of the first class of generation `gen` that matches a
 * service port and a cgroup (0: unknown, so classes that name cgroups cannot match); 0 when
 * none does. */
static __always_inline __u32 match_class(__u32 gen, __u16 port, __u64 cgroup)
{
	__u32 base = (gen & 1) * SLUICE_CLASSES;

	for (__u32 i = 0; i < SLUICE_CLASSES; i++) {
		__u32 k = base + i;
		struct sluice_class *c = bpf_map_lookup_elem(&sluice_classes, &k);
		int hit;

		if (!c || !c->in_use)
			return 0;
		if (c->nports) {
			hit = 0;
			for (__u32 j = 0; j < SLUICE_CLASS_PORTS; j++)
				if (j < c->nports && port >= c->port_first[j] && port <= c->port_last[j])
					hit = 1;
			if (!hit)
				continue;
		}
		if (c->ncgroups) {
			hit = 0;
			for (__u32 j = 0; j < SLUICE_CLASS_CGROUPS; j++)
				if (j < c->ncgroups && cgroup && c->cgroup[j] == cgroup)
					hit = 1;
			if (!hit)
				continue;
		}
		return k + 1;
	}
	return 0;
}

/* Gives the socket the algorithm and priority of the class at `key` (plus one) and remembers
 * the class; returns its id (0 if there is none). */
static __always_inline __u32 join_class(struct bpf_sock_ops *skops, __u32 gen, __u32 key)
{
	__u32 k = key - 1;
	struct sluice_class *c = bpf_map_lookup_elem(&sluice_classes, &k);
	struct bpf_sock *sk = skops->sk;
	struct sluice_class_sk *st;
	char name[16];
	int prio;

	if (!c || !sk)
		return 0;
	/* The class first: setting the algorithm runs its init, which reads the class's parameters. */
	st = bpf_sk_storage_get(&class_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (st) {
		st->id = c->id;
		st->generation = gen;
	}
	__builtin_memcpy(name, c->cc, sizeof(name));
	name[15] = 0;
	prio = c->priority;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name)))
		count_class(c->id, CLASS_CC_FAILED);
	bpf_setsockopt(skops, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio));
	return c->id;
}

/* Counts a connection into its class, and asks to hear when it closes. */
static __always_inline void opened(struct bpf_sock_ops *skops, __u32 id)
{
	count_class(id, CLASS_OPENED);
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

/* The ad-hoc map of `sluice host policy set`. */
static __always_inline void select_by_map(struct bpf_sock_ops *skops)
{
	struct cc_policy_val *v;
	char name[16];

	v = lookup(CC_POLICY_PORT, bpf_ntohl(skops->remote_port));
	if (!v)
		v = lookup(CC_POLICY_PORT, skops->local_port);
	if (!v && skops->op == BPF_SOCK_OPS_TCP_CONNECT_CB)
		v = lookup(CC_POLICY_CGROUP, bpf_get_current_cgroup_id());
	if (!v)
		return;
	__builtin_memcpy(name, v->name, sizeof(name));
	name[15] = 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name)))
		count(CC_SET_FAILED);
	else
		count(CC_SET);
}

SEC("sockops")
int sluice_cc_select(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct sluice_class_sk *st;
	__u32 gen, key, id;

	/*
	 * Active opens are chosen before the SYN leaves, so an algorithm that needs ECN (DCTCP)
	 * asks for it. Listeners are chosen at listen(): a DCTCP SYN is ECT, which a listener only
	 * accepts for ECN when its own algorithm needs ECN, and its children inherit the choice and
	 * the class. Passive opens are looked at again when established: for ad-hoc entries on the
	 * remote port, and for a listener that predates the policy (by port: no process is current).
	 */
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		gen = generation();
		key = match_class(gen, bpf_ntohl(skops->remote_port), bpf_get_current_cgroup_id());
		id = key ? join_class(skops, gen, key) : 0;
		if (!id)
			break;
		opened(skops, id);
		return 1;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		gen = generation();
		key = match_class(gen, skops->local_port, bpf_get_current_cgroup_id());
		if (!key || !join_class(skops, gen, key))
			break;
		return 1;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		st = sk ? bpf_sk_storage_get(&class_sk, sk, 0, 0) : 0;
		id = st ? st->id : 0;
		if (!id) {
			gen = generation();
			key = match_class(gen, skops->local_port, 0);
			id = key ? join_class(skops, gen, key) : 0;
		}
		if (!id)
			break;
		opened(skops, id);
		return 1;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] != BPF_TCP_CLOSE || !sk)
			return 1;
		st = bpf_sk_storage_get(&class_sk, sk, 0, 0);
		if (st && st->id) {
			count_class(st->id, CLASS_CLOSED);
			st->id = 0;
		}
		return 1;
	default:
		return 1;
	}
	select_by_map(skops);
	return 1;
}
