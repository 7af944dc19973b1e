/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * reTCP in the portable form, for reconfigurable networks whose ToRs signal circuit state: the
 * window is multiplied by alpha when the circuit signal turns on and divided by alpha when it
 * turns off. The signal is not congestion, so it never cuts otherwise; growth and loss are Reno's.
 * Where no circuit network exists the circuit field is the ACK's ECE, as Etalon's ToRs mark it.
 */
#include "sluice_cc.h"

struct retcp_params {
	scc_u32 alpha; /* the window multiplier, e.g. the circuit-to-packet bandwidth ratio */
};

#define RETCP_DEFAULTS { .alpha = 2 }

struct retcp_state {
	scc_u64 bytes_acked; /* congestion-avoidance accumulator (scc_reno_grow) */
	scc_u32 circuit;     /* circuit signal of the last ACK */
};

SCC_FN void retcp_init(struct retcp_state *s, const struct retcp_params *p)
{
	s->bytes_acked = 0;
	s->circuit = 0;
}

SCC_FN void retcp_on_ack(struct retcp_state *s, const struct retcp_params *p, const struct scc_signals *sig,
			 struct scc_window *w)
{
	scc_u64 a = p->alpha ? p->alpha : 1;

	if (sig->circuit != s->circuit) {
		s->circuit = sig->circuit;
		w->cwnd = sig->circuit ? w->cwnd * a : scc_max(w->cwnd / a, scc_min_cwnd(w));
		/* The new window is where this episode settles: no slow start past it. */
		w->ssthresh = w->cwnd;
		s->bytes_acked = 0;
		return;
	}
	if (sig->in_recovery)
		return;
	scc_reno_grow(&s->bytes_acked, sig, w);
}

SCC_FN void retcp_on_event(struct retcp_state *s, const struct retcp_params *p, enum scc_event ev, struct scc_window *w)
{
	/* The circuit signal rides on ECE: a classic echo is not congestion here. */
	if (ev != SCC_ECN)
		scc_reno_cut(&s->bytes_acked, ev, w);
}

SCC_FN scc_u32 retcp_vars(const struct retcp_state *s, struct scc_var *v)
{
	v[0].name = "circuit";
	v[0].value = s->circuit;
	v[0].one = 1;
	return 1;
}

SCC_ALGORITHM(retcp, RETCP_DEFAULTS, SCC_ECN_PER_PACKET)
