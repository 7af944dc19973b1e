// SPDX-License-Identifier: GPL-2.0
// sluice proxy's kernel relay: a sockhash holds both sockets of every spliced pair, each under the
// key its peer's packets arrive with, and the stream verdict program redirects every segment that
// arrives on one socket to the egress of the other. The kernel's own L4 switch: the host-side
// analogue of AccelTCP's splicing on the NIC.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

// A socket's view of its connection, as the verdict program reads it from an arriving segment.
struct pair_key {
	__u32 remote_ip4; // network byte order
	__u32 local_ip4;  // network byte order
	__u32 remote_port; // network byte order, in the upper 16 bits on little-endian
	__u32 local_port;  // host byte order
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, struct pair_key);
	__type(value, __u32);
} peers SEC(".maps");

// Segments redirected [0], segments with data whose socket had no peer in the map [1] (dropped),
// and empty ones with no peer [2]: a FIN that arrives as the proxy closes the pair.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} relay_counts SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&relay_counts, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

SEC("sk_skb/stream_verdict")
int relay(struct __sk_buff *skb)
{
	struct pair_key k = {
		.remote_ip4 = skb->remote_ip4,
		.local_ip4 = skb->local_ip4,
		.remote_port = skb->remote_port,
		.local_port = skb->local_port,
	};
	long verdict = bpf_sk_redirect_hash(skb, &peers, &k, 0);
	count(verdict == SK_PASS ? 0 : skb->len ? 1 : 2);
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
