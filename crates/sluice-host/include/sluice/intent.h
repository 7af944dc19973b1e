/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Declaring an application's intent for a socket to the sluice agent (docs/platform.md).
 *
 * Header only: nothing to link and no privilege needed. The declaration is a setsockopt() at a
 * level of sluice's own, which the agent's BPF program (cgroup/setsockopt) takes. The agent's
 * policy maps each intent to a class. It also says which cgroups may claim which intent.
 *
 *   int fd = socket(AF_INET, SOCK_STREAM, 0);
 *   if (sluice_declare(fd, SLUICE_LATENCY_SENSITIVE, 0) && errno == EPERM)
 *           ... this cgroup may not claim it: the connection gets its ordinary class ...
 *   connect(fd, ...);
 *
 * Declare before connect() or listen(): the class is chosen when the connection opens, and a
 * listener's class passes to the connections it accepts. `target_rate` (bits per second) also
 * paces the socket (SO_MAX_PACING_RATE), at any time. Errors: EPERM when the policy does not map
 * the intent, the caller's cgroup may not claim it, or (for a class intent) the socket is already
 * connected or listening; ENOPROTOOPT when no agent runs on the host.
 */
#ifndef SLUICE_INTENT_H
#define SLUICE_INTENT_H

#include <stdint.h>
#include <sys/socket.h>

/* The socket option level the agent takes ("SL"), and its one option. */
#define SOL_SLUICE 0x534c
#define SLUICE_INTENT 1

/* The intents, as a policy's [policy] table names them. */
enum sluice_intent_kind {
	SLUICE_LATENCY_SENSITIVE = 1, /* value unused */
	SLUICE_BULK = 2,              /* value unused */
	SLUICE_TARGET_RATE = 3,       /* value: the rate, bits per second */
	SLUICE_DEADLINE = 4,          /* value: microseconds from now the transfer should end by */
};

/* The option's value. */
struct sluice_intent {
	uint32_t intent; /* enum sluice_intent_kind */
	uint32_t reserved;
	uint64_t value;
};

/* Declares `intent` for socket `fd`: 0, or -1 with errno set. */
static inline int sluice_declare(int fd, enum sluice_intent_kind intent, uint64_t value)
{
	struct sluice_intent i = { (uint32_t)intent, 0, value };

	return setsockopt(fd, SOL_SLUICE, SLUICE_INTENT, &i, sizeof(i));
}

#endif /* SLUICE_INTENT_H */
