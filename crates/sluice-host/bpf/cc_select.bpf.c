// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-connection congestion-control selection: the open CC architecture's per-class choice on a
 * real host. The agent's class table (`sluice agent`, struct sluice_class) is tried first: the
 * first class whose service ports and cgroups match gives the connection its algorithm and socket
 * priority, and the socket remembers its class (counted per class while it lives). A connection
 * no class takes may still match the ad-hoc map of `sluice host policy set`, in the order remote
 * port, local port, cgroup of the connecting process.
 *
 * A class's client negotiates in the handshake (the draft's 7.1, the simulator's option and
 * decision): its SYN proposes what the algorithm needs, the switches on the path clear what they
 * cannot honour, a listener under the agent answers on the SYN-ACK, and the client judges the
 * answer when the SYN-ACK arrives, before its first data segment: the class's algorithm stays,
 * or the class's fallback runs. No answer (a peer without the agent, an option stripped on the
 * way) or a malformed one gets the fallback too.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "tcp_int.h"
#include "class_maps.h"

#define SOL_SOCKET 1
#define SO_PRIORITY 12
#define SO_MAX_PACING_RATE 47
#define SOL_TCP 6
#define TCP_CONGESTION 13
#define ENOMSG 42
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

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

/* Which class each intent joins and who may claim it, in two halves like sluice_classes. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SLUICE_INTENTS);
	__type(key, __u32);
	__type(value, struct sluice_intent_rule);
} sluice_intents SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, (SLUICE_INTENTS + 1) * INTENT_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} intent_counters SEC(".maps");

/* The TCP-INT agent's switches (agent.bpf.c's map, given by file descriptor before loading):
 * whether this host speaks TCP-INT, which negotiation offers and answers. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agent_config);
} agent_config SEC(".maps");

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
		if (c->in_use == SLUICE_INTENT_ONLY)
			continue;
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

/* The rule of `intent` in generation `gen`'s half. */
static __always_inline struct sluice_intent_rule *intent_rule(__u32 gen, __u32 intent)
{
	__u32 k = (gen & 1) * SLUICE_INTENTS + intent - 1;

	if (intent < 1 || intent > SLUICE_INTENTS)
		return 0;
	return bpf_map_lookup_elem(&sluice_intents, &k);
}

/* The key (plus one) of the class the socket's declared intent joins; 0 without one. */
static __always_inline __u32 intent_class(__u32 gen, struct bpf_sock *sk)
{
	struct sluice_class_sk *st = sk ? bpf_sk_storage_get(&class_sk, sk, 0, 0) : 0;
	struct sluice_intent_rule *r = st && st->intent ? intent_rule(gen, st->intent) : 0;

	return r && r->class_key ? (gen & 1) * SLUICE_CLASSES + r->class_key : 0;
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
		st->offer = (__u8)c->offer;
		__builtin_memcpy(st->fallback, c->fallback, sizeof(st->fallback));
		st->fallback[15] = 0;
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

/* Whether this host speaks TCP-INT (the agent adds and echoes the option). */
static __always_inline int local_int(void)
{
	__u32 zero = 0;
	struct agent_config *cfg = bpf_map_lookup_elem(&agent_config, &zero);

	return cfg && cfg->int_enabled && cfg->echo_enabled;
}

/* Looks for the negotiation option in the segment being handled (or, with
 * BPF_LOAD_HDR_OPT_TCP_SYN, in the SYN a SYN-ACK answers): 1 and its capabilities when there is
 * a well-formed one, 0 when there is none, -1 when it is malformed. */
static __always_inline int neg_load(struct bpf_sock_ops *skops, __u64 flags, __u8 *caps)
{
	__u8 buf[8] = { NEG_KIND, 4, NEG_EXID_HI, NEG_EXID_LO };
	long n = bpf_load_hdr_opt(skops, buf, sizeof(buf), flags);

	if (n == -ENOMSG)
		return 0;
	return neg_decode(buf, n, caps) ? -1 : 1;
}

/* A SYN or SYN-ACK being built: the client's proposal, or a listener's answer to the SYN's. */
static __always_inline void neg_write(struct bpf_sock_ops *skops, int reserve_only)
{
	__u32 flags = skops->skb_tcp_flags;
	__u8 opt[NEG_LEN] = { NEG_KIND, NEG_LEN, NEG_EXID_HI, NEG_EXID_LO, 0 };
	__u8 caps;

	if (!(flags & TCPHDR_SYN))
		return;
	if (flags & TCPHDR_ACK) {
		/* A request socket, not a full one: the SYN says all there is to say. */
		int got = neg_load(skops, BPF_LOAD_HDR_OPT_TCP_SYN, &caps);

		/* Counted when room is asked for: a segment without room gets no write callback. */
		if (got < 0 && reserve_only)
			count(CC_NEG_MALFORMED);
		if (got <= 0 || !(caps & CAPS_PROPOSED))
			return;
		opt[4] = (caps & ~(CAPS_WANTS_INT | CAPS_WANTS_HOP_RECORDS | CAPS_WANTS_ECN | CAPS_PROPOSED)) | CAPS_ANSWERED;
		if (local_int())
			opt[4] |= CAPS_PEER_INT;
	} else {
		struct bpf_sock *sk = skops->sk;
		struct sluice_class_sk *st = sk ? bpf_sk_storage_get(&class_sk, sk, 0, 0) : 0;

		if (!st || !st->proposing)
			return;
		opt[4] = st->offer | CAPS_PROPOSED | CAPS_PATH_ALL_INT | CAPS_PATH_ECN;
	}
	if (reserve_only) {
		bpf_reserve_hdr_opt(skops, NEG_LEN, 0);
		return;
	}
	if (!bpf_store_hdr_opt(skops, opt, sizeof(opt), 0) && (flags & TCPHDR_ACK))
		count(CC_NEG_ANSWERED);
}

/* The client judges the SYN-ACK (the segment at hand): the class's algorithm stays when the
 * answer offers what it needs; otherwise the class's fallback takes over before any data. */
static __always_inline void neg_judge(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct sluice_class_sk *st = sk ? bpf_sk_storage_get(&class_sk, sk, 0, 0) : 0;
	__u8 answer = 0;
	char name[16];
	int got;

	if (!st || !st->proposing)
		return;
	st->proposing = 0;
	got = neg_load(skops, 0, &answer);
	if (got < 0 || (got > 0 && !(answer & CAPS_ANSWERED))) {
		count_class(st->id, CLASS_NEG_MALFORMED);
		got = 0;
	}
	st->outcome = neg_decide(st->offer, got > 0, answer, local_int());
	count_class(st->id, CLASS_NEG + st->outcome);
	if (st->outcome == NEG_ACCEPTED)
		return;
	__builtin_memcpy(name, st->fallback, sizeof(name));
	name[15] = 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name)))
		count_class(st->id, CLASS_CC_FAILED);
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
		key = intent_class(gen, sk);
		if (!key)
			key = match_class(gen, bpf_ntohl(skops->remote_port), bpf_get_current_cgroup_id());
		id = key ? join_class(skops, gen, key) : 0;
		if (!id)
			break;
		opened(skops, id);
		st = sk ? bpf_sk_storage_get(&class_sk, sk, 0, 0) : 0;
		if (st) {
			st->proposing = 1;
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		}
		return 1;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		/* A listener under the agent answers proposals, whatever its class. */
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		gen = generation();
		key = intent_class(gen, sk);
		if (!key)
			key = match_class(gen, skops->local_port, bpf_get_current_cgroup_id());
		if (!key || !join_class(skops, gen, key))
			break;
		return 1;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		neg_write(skops, 1);
		return 1;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		neg_write(skops, 0);
		return 1;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		neg_judge(skops);
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

static __always_inline void count_intent(__u32 intent, __u32 which)
{
	__u32 k = (intent <= SLUICE_INTENTS ? intent : 0) * INTENT_NCOUNTERS + which;
	__u64 *c = bpf_map_lookup_elem(&intent_counters, &k);

	if (c)
		(*c)++;
}

/*
 * An application's declaration (setsockopt at SOL_SLUICE): taken when the policy maps the intent
 * and the caller's cgroup may claim it, and remembered in the socket's class storage, where its
 * connect() or listen() finds it. target_rate becomes SO_MAX_PACING_RATE (bytes per second):
 * the call is rewritten for the kernel, so the pacing holds at any time. Other options pass.
 * Refusals return 0, which the caller sees as EPERM.
 */
SEC("cgroup/setsockopt")
int sluice_intent(struct bpf_sockopt *ctx)
{
	struct sluice_intent_req *req = ctx->optval;
	struct bpf_sock *sk = ctx->sk;
	struct sluice_intent_rule *r;
	struct sluice_class_sk *st;
	__u64 cg = bpf_get_current_cgroup_id();
	int permitted = 0;

	if (ctx->level != SOL_SLUICE)
		return 1;
	if (ctx->optname != SLUICE_INTENT || (void *)(req + 1) > ctx->optval_end || !sk) {
		count_intent(0, INTENT_NOT_MAPPED);
		return 0;
	}
	__u32 intent = req->intent;

	r = intent_rule(generation(), intent);
	if (!r || !r->class_key) {
		count_intent(intent, INTENT_NOT_MAPPED);
		return 0;
	}
	for (__u32 j = 0; j < SLUICE_CLASS_CGROUPS; j++)
		if (j < r->ncgroups && r->cgroup[j] == cg)
			permitted = 1;
	if (!permitted) {
		count_intent(intent, INTENT_NOT_PERMITTED);
		return 0;
	}
	if (intent != SLUICE_INTENT_TARGET_RATE && sk->state != BPF_TCP_CLOSE) {
		count_intent(intent, INTENT_LATE);
		return 0;
	}
	st = bpf_sk_storage_get(&class_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		count_intent(intent, INTENT_NOT_MAPPED);
		return 0;
	}
	st->intent = intent;
	st->intent_value = req->value;
	count_intent(intent, INTENT_ACCEPTED);
	if (intent == SLUICE_INTENT_TARGET_RATE) {
		/* SO_MAX_PACING_RATE takes an int of bytes per second; ~0 would mean unlimited. */
		__u64 bytes = req->value / 8;
		__u32 rate = bytes >= 0xffffffffull ? 0xfffffffe : (__u32)bytes;

		ctx->level = SOL_SOCKET;
		ctx->optname = SO_MAX_PACING_RATE;
		*(__u32 *)req = rate;
		ctx->optlen = sizeof(__u32);
		return 1;
	}
	/* Nothing for the kernel to do: setsockopt returns 0. */
	ctx->optlen = -1;
	return 1;
}
