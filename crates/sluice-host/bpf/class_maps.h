/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's per-class maps, declared alike by every object that uses them: the CC policy
 * program (cc_select.bpf.c) creates them and the agent pins them; the portable algorithms
 * (scc_kernel.h) are given the pinned ones by file descriptor before they load.
 */
#ifndef SLUICE_CLASS_MAPS_H
#define SLUICE_CLASS_MAPS_H

#include "tcp_int.h"

/* A socket's class, written when the CC policy program classifies it; a listener's is cloned to
 * the connections it accepts. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct sluice_class_sk);
} class_sk SEC(".maps");

/* Each class's parameters for the portable algorithms, by class id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_CLASS_IDS);
	__type(key, __u32);
	__type(value, struct scc_class_params);
} class_params SEC(".maps");

#endif /* SLUICE_CLASS_MAPS_H */
