/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* DCTCP (RFC 8257) in the portable form: per-packet ECN echo, alpha-scaled cut once per window. */
#include "dctcp.h"

SCC_FN void dctcp_init(struct dctcp_state *s, const struct dctcp_params *p)
{
	dctcp_core_init(s, p);
}

SCC_FN void dctcp_on_ack(struct dctcp_state *s, const struct dctcp_params *p, const struct scc_signals *sig,
			 struct scc_window *w)
{
	dctcp_core_on_ack(s, p, sig, w, 0);
}

SCC_FN void dctcp_on_event(struct dctcp_state *s, const struct dctcp_params *p, enum scc_event ev, struct scc_window *w)
{
	dctcp_core_on_event(s, ev, w);
}

SCC_FN scc_u32 dctcp_vars(const struct dctcp_state *s, struct scc_var *v)
{
	return dctcp_core_vars(s, v);
}

SCC_ALGORITHM(dctcp, DCTCP_DEFAULTS, SCC_ECN_PER_PACKET)
