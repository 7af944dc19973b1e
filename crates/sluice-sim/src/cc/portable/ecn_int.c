/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ECN+INT in the portable form: DCTCP whose congestion estimate also follows the bottleneck
 * queue depth TCP-INT echoes.
 *
 *   qdepth_s <- (1 - g_int) qdepth_s + g_int qdepth    on each echo (a utilization reads as 0)
 *   alpha_int = min(qdepth_s / qdepth_target, 1)
 *   an echo that reports a queue is a congestion signal; the cut is by max(alpha, alpha_int) / 2
 *
 * Without echoes (legacy switches) or with an idle path it is exactly DCTCP.
 */
#include "dctcp.h"

struct ecn_int_params {
	struct dctcp_params dctcp;
	scc_u32 g_int;         /* gain of the queue-depth moving average, SCC_ONE = 1 */
	scc_u32 qdepth_target; /* smoothed queue bytes at which alpha_int reaches 1 */
};

#define ECN_INT_DEFAULTS { .dctcp = DCTCP_DEFAULTS, .g_int = SCC_ONE / 8, .qdepth_target = 32000 }

struct ecn_int_state {
	struct dctcp_state dctcp;
	scc_u64 qdepth_s; /* smoothed queue bytes, scaled by SCC_ONE */
};

SCC_FN void ecn_int_init(struct ecn_int_state *s, const struct ecn_int_params *p)
{
	dctcp_core_init(&s->dctcp, &p->dctcp);
	s->qdepth_s = 0;
}

SCC_FN void ecn_int_on_ack(struct ecn_int_state *s, const struct ecn_int_params *p, const struct scc_signals *sig,
			   struct scc_window *w)
{
	scc_u64 other = 0;

	if (sig->int_echo) {
		scc_u64 q = sig->int_is_queue ? sig->int_queue : 0;

		s->qdepth_s = scc_ewma(s->qdepth_s, q << SCC_SHIFT, p->g_int);
	}
	/* Only a queue the current echo still reports triggers a cut; the smoothed depth sets its size. */
	if (sig->int_echo && sig->int_is_queue) {
		scc_u64 target = p->qdepth_target ? p->qdepth_target : 1;

		other = scc_max(scc_min(s->qdepth_s / target, SCC_ONE), 1);
	}
	dctcp_core_on_ack(&s->dctcp, &p->dctcp, sig, w, other);
}

SCC_FN void ecn_int_on_event(struct ecn_int_state *s, const struct ecn_int_params *p, enum scc_event ev,
			     struct scc_window *w)
{
	dctcp_core_on_event(&s->dctcp, ev, w);
}

SCC_FN scc_u32 ecn_int_vars(const struct ecn_int_state *s, struct scc_var *v)
{
	scc_u32 n = dctcp_core_vars(&s->dctcp, v);

	v[n].name = "qdepth";
	v[n].value = s->qdepth_s;
	v[n].one = SCC_ONE;
	return n + 1;
}

SCC_ALGORITHM(ecn_int, ECN_INT_DEFAULTS, SCC_ECN_PER_PACKET | SCC_NEEDS_INT)
