/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * DCTCP's core (RFC 8257), shared by dctcp.c and ecn_int.c: the per-window estimate of the
 * marked fraction and the cut by alpha / 2 at most once per window of data.
 */
#ifndef SLUICE_CC_DCTCP_H
#define SLUICE_CC_DCTCP_H

#include "sluice_cc.h"

struct dctcp_params {
	scc_u32 g;          /* gain of the alpha moving average, SCC_ONE = 1 */
	scc_u32 alpha_init; /* alpha before the first window closes, SCC_ONE = every byte marked */
};

#define DCTCP_DEFAULTS { .g = SCC_ONE / 16, .alpha_init = SCC_ONE }

struct dctcp_state {
	scc_u64 acked;      /* bytes acked in the current observation window */
	scc_u64 ce;         /* of those, CE-marked */
	scc_u64 bytes_acked;/* congestion-avoidance accumulator (scc_reno_grow) */
	scc_u32 alpha;      /* estimated marked fraction, SCC_ONE = 1 */
	scc_u32 window_end; /* the observation window closes when snd_una reaches this */
	scc_u32 cwr_end;    /* no further ECN cut until snd_una reaches this */
	scc_u32 started;    /* the first ACK has anchored window_end and cwr_end */
};

SCC_INLINE void dctcp_core_init(struct dctcp_state *s, const struct dctcp_params *p)
{
	s->acked = 0;
	s->ce = 0;
	s->bytes_acked = 0;
	s->alpha = p->alpha_init > SCC_ONE ? SCC_ONE : p->alpha_init;
	s->window_end = 0;
	s->cwr_end = 0;
	s->started = 0;
}

/* Counts this ACK's bytes; when snd_una passes the window's end, folds its marked fraction in. */
SCC_INLINE void dctcp_observe(struct dctcp_state *s, const struct dctcp_params *p, const struct scc_signals *sig)
{
	if (!s->started) {
		s->window_end = sig->snd_nxt;
		s->cwr_end = sig->snd_una;
		s->started = 1;
	}
	s->acked += sig->acked;
	s->ce += scc_min(sig->ce, sig->acked);
	if (scc_before(sig->snd_una, s->window_end))
		return;
	if (s->acked > 0) {
		scc_u64 f = (s->ce << SCC_SHIFT) / s->acked;

		s->alpha = (scc_u32)scc_ewma(s->alpha, f, p->g);
	}
	s->acked = 0;
	s->ce = 0;
	s->window_end = sig->snd_nxt;
}

/* W <- W (1 - alpha / 2), never below two segments. */
/* An ECN cut takes alpha / 2^DCTCP_CUT_SHIFT of the window (RFC 8257: alpha / 2). */
#ifndef DCTCP_CUT_SHIFT
#define DCTCP_CUT_SHIFT 1
#endif

SCC_INLINE void dctcp_reduce(struct dctcp_state *s, scc_u64 alpha, struct scc_window *w)
{
	s->bytes_acked = 0;
	w->ssthresh = scc_max(w->cwnd - ((w->cwnd * alpha) >> (SCC_SHIFT + DCTCP_CUT_SHIFT)), scc_min_cwnd(w));
	w->cwnd = w->ssthresh;
}

/*
 * DCTCP's ACK with a second congestion estimate `other` (0: none): a positive one counts as a
 * mark, and a cut uses the larger of it and alpha. Outside recovery a signalled ACK cuts once per
 * window; any other grows the window like Reno.
 */
SCC_INLINE void dctcp_core_on_ack(struct dctcp_state *s, const struct dctcp_params *p, const struct scc_signals *sig,
			      struct scc_window *w, scc_u64 other)
{
	dctcp_observe(s, p, sig);
	if (sig->in_recovery)
		return;
	if ((sig->ce > 0 || sig->ece || other > 0) && !scc_before(sig->snd_una, s->cwr_end)) {
		dctcp_reduce(s, scc_max(s->alpha, other), w);
		s->cwr_end = sig->snd_nxt;
		return;
	}
	scc_reno_grow(&s->bytes_acked, sig, w);
}

/* Names alpha for cwnd.csv; returns how many variables it wrote. */
SCC_INLINE scc_u32 dctcp_core_vars(const struct dctcp_state *s, struct scc_var *v)
{
	v[0].name = "alpha";
	v[0].value = s->alpha;
	v[0].one = SCC_ONE;
	return 1;
}

/* Loss and timeout as Reno (RFC 8257 section 3.5); a classic ECN echo cuts by alpha. */
SCC_INLINE void dctcp_core_on_event(struct dctcp_state *s, enum scc_event ev, struct scc_window *w)
{
	if (ev == SCC_ECN)
		dctcp_reduce(s, s->alpha, w);
	else
		scc_reno_cut(&s->bytes_acked, ev, w);
}

#endif /* SLUICE_CC_DCTCP_H */
