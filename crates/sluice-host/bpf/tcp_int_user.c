// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The BPF programs' option codec, compiled for userspace so tests can run it on the vectors. */
#include <linux/types.h>
#include <linux/bpf.h>
#include "tcp_int.h"

int sluice_tcp_int_decode(const __u8 *b, __u32 n, struct tcp_int_fields *f)
{
	return tcp_int_decode(b, n, f);
}

void sluice_tcp_int_encode(const struct tcp_int_fields *f, struct tcp_int_opt *o)
{
	tcp_int_encode(f, o);
}

__u8 sluice_tcp_int_hop_val(__u64 qdepth, __u64 util, __u64 threshold, __u32 qshift, __u32 ushift)
{
	return tcp_int_hop_val(qdepth, util, threshold, qshift, ushift);
}
