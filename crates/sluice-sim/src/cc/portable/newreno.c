/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * NewReno (RFC 5681, RFC 6582) in the portable form: slow start, one MSS per window of acked
 * bytes, halving on loss and on a classic ECN echo, one segment after a timeout.
 */
#include "sluice_cc.h"

struct newreno_params {
	scc_u32 ecn; /* classic ECN (RFC 3168): the transport turns ECE into SCC_ECN */
};

#define NEWRENO_DEFAULTS { .ecn = 0 }

struct newreno_state {
	scc_u64 bytes_acked; /* congestion-avoidance accumulator (scc_reno_grow) */
};

SCC_FN void newreno_init(struct newreno_state *s, const struct newreno_params *p)
{
	s->bytes_acked = 0;
}

SCC_FN void newreno_on_ack(struct newreno_state *s, const struct newreno_params *p, const struct scc_signals *sig,
			   struct scc_window *w)
{
	if (!sig->in_recovery)
		scc_reno_grow(&s->bytes_acked, sig, w);
}

SCC_FN void newreno_on_event(struct newreno_state *s, const struct newreno_params *p, enum scc_event ev,
			     struct scc_window *w)
{
	scc_reno_cut(&s->bytes_acked, ev == SCC_TIMEOUT ? SCC_TIMEOUT : SCC_LOSS, w);
}

SCC_FN scc_u32 newreno_vars(const struct newreno_state *s, struct scc_var *v)
{
	return 0;
}

SCC_ALGORITHM(newreno, NEWRENO_DEFAULTS, SCC_ECN_CLASSIC)
