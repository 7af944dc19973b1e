/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Replay glue for the portable algorithms: defines SCC_ALGORITHM so that an algorithm's C file,
 * compiled by clang -target bpf after this header, becomes a BPF_PROG_TYPE_SYSCALL program that
 * takes one recorded step (struct scc_record) as its context, runs it on the algorithm's state for
 * that flow, and writes the window it computed back into the record's `out`. Userspace feeds it a
 * trace recorded in the simulator through BPF_PROG_TEST_RUN, one step a run: the converse of the
 * differential test, with the verifier-accepted BPF build of the same source doing the work.
 */
#ifndef SLUICE_SCC_REPLAY_H
#define SLUICE_SCC_REPLAY_H

#include <bpf/bpf_helpers.h>
#include "sluice_cc.h"

#undef SCC_ALGORITHM

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Flows a replay may hold; a record of a higher flow is refused (return 1). */
#define SCC_REPLAY_FLOWS 64

/* Return codes of the replay program. */
#define SCC_REPLAY_OK 0
#define SCC_REPLAY_BAD_FLOW 1
#define SCC_REPLAY_BAD_KIND 2

#define SCC_ALGORITHM(alg, alg_defaults, alg_flags)                                          \
	const volatile struct alg##_params alg##_params = alg_defaults;                   \
	struct alg##_state alg##_states[SCC_REPLAY_FLOWS];                                \
                                                                                        \
	SEC("syscall")                                                                  \
	int alg##_replay(struct scc_record *r)                                          \
	{                                                                               \
		struct alg##_params p = alg##_params;                                   \
		struct scc_signals sig = r->sig;                                        \
		struct scc_window w = r->in;                                            \
		__u64 flow = r->flow;                                                   \
		struct alg##_state *s;                                                  \
                                                                                        \
		if (flow >= SCC_REPLAY_FLOWS)                                           \
			return SCC_REPLAY_BAD_FLOW;                                     \
		s = &alg##_states[flow];                                                \
		switch (r->kind) {                                                      \
		case SCC_REC_INIT:                                                      \
			alg##_init(s, &p);                                              \
			break;                                                          \
		case SCC_REC_ACK:                                                       \
			alg##_on_ack(s, &p, &sig, &w);                                  \
			break;                                                          \
		case SCC_REC_EVENT:                                                     \
			alg##_on_event(s, &p, (enum scc_event)r->event, &w);            \
			break;                                                          \
		default:                                                                \
			return SCC_REPLAY_BAD_KIND;                                     \
		}                                                                       \
		r->out = w;                                                             \
		return SCC_REPLAY_OK;                                                   \
	}

#endif /* SLUICE_SCC_REPLAY_H */
