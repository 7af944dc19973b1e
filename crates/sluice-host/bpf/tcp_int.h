/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * TCP-INT on Linux: the option codec and the records shared by the BPF programs and their Rust
 * loader. It compiles both as BPF (after vmlinux.h) and as plain C for userspace tests, so the
 * parser the kernel runs is the parser the test vectors check.
 *
 * Wire layout (network byte order): kind 0x72, length 12, INTval, INTecr, ID, IDecr, Lat (24 bit),
 * LatEcr (24 bit). INTval bit 7 = 1: bits 0-6 are queue bytes >> qdepth_shift; bit 7 = 0: bits
 * 0-6 are utilization percent >> util_shift. Both saturate at 127.
 */
#ifndef SLUICE_TCP_INT_H
#define SLUICE_TCP_INT_H

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define TCP_INT_KIND 0x72
#define TCP_INT_LEN 12
#define TCP_INT_LAT_MAX 0xffffffu
#define TCP_INT_QDEPTH_FLAG 0x80
/* The largest TCP option area: 60-byte header less the 20 fixed bytes. */
#define TCP_OPT_SPACE 40

/* Why a byte string is not a TCP-INT option (mirrors the Rust codec's DecodeError). */
enum tcp_int_err {
	TCP_INT_OK = 0,
	TCP_INT_WRONG_KIND = 1,
	TCP_INT_WRONG_LEN = 2,
	TCP_INT_TRUNCATED = 3,
};

/* A decoded option. */
struct tcp_int_fields {
	__u8 int_val;
	__u8 int_ecr;
	__u8 id;
	__u8 id_ecr;
	__u32 lat;
	__u32 lat_ecr;
};

/* The 12 wire bytes. */
struct tcp_int_opt {
	__u8 kind;
	__u8 len;
	__u8 int_val;
	__u8 int_ecr;
	__u8 id;
	__u8 id_ecr;
	__u8 lat[3];
	__u8 lat_ecr[3];
};

/* Parses an option that starts at its kind byte; n is how many bytes are present from there. */
static __always_inline int tcp_int_decode(const __u8 *b, __u32 n, struct tcp_int_fields *f)
{
	/* Checks in the same order as the Rust codec so both name the same fault. */
	if (n < 2)
		return TCP_INT_TRUNCATED;
	if (b[0] != TCP_INT_KIND)
		return TCP_INT_WRONG_KIND;
	if (b[1] != TCP_INT_LEN)
		return TCP_INT_WRONG_LEN;
	if (n < TCP_INT_LEN)
		return TCP_INT_TRUNCATED;
	f->int_val = b[2];
	f->int_ecr = b[3];
	f->id = b[4];
	f->id_ecr = b[5];
	f->lat = ((__u32)b[6] << 16) | ((__u32)b[7] << 8) | b[8];
	f->lat_ecr = ((__u32)b[9] << 16) | ((__u32)b[10] << 8) | b[11];
	return TCP_INT_OK;
}

/* Writes the wire form; latencies above 24 bits saturate. */
static __always_inline void tcp_int_encode(const struct tcp_int_fields *f, struct tcp_int_opt *o)
{
	__u32 lat = f->lat > TCP_INT_LAT_MAX ? TCP_INT_LAT_MAX : f->lat;
	__u32 ecr = f->lat_ecr > TCP_INT_LAT_MAX ? TCP_INT_LAT_MAX : f->lat_ecr;

	o->kind = TCP_INT_KIND;
	o->len = TCP_INT_LEN;
	o->int_val = f->int_val;
	o->int_ecr = f->int_ecr;
	o->id = f->id;
	o->id_ecr = f->id_ecr;
	o->lat[0] = lat >> 16;
	o->lat[1] = lat >> 8;
	o->lat[2] = lat;
	o->lat_ecr[0] = ecr >> 16;
	o->lat_ecr[1] = ecr >> 8;
	o->lat_ecr[2] = ecr;
}

/* The INTval one hop reports before the path maximum (the simulator's hop_int_val). */
static __always_inline __u8 tcp_int_hop_val(__u64 qdepth_bytes, __u64 util_percent, __u64 qdepth_threshold,
					    __u32 qdepth_shift, __u32 util_shift)
{
	__u64 v;

	if (qdepth_bytes < qdepth_threshold) {
		v = util_percent >> (util_shift & 63);
		return v > 0x7f ? 0x7f : (__u8)v;
	}
	v = qdepth_bytes >> (qdepth_shift & 63);
	return TCP_INT_QDEPTH_FLAG | (v > 0x7f ? 0x7f : (__u8)v);
}

/* ---- Host agent (agent.bpf.c) ---- */

/* Runtime switches of the agent, slot 0 of its `agent_config` array. */
struct agent_config {
	__u32 int_enabled;  /* add the option to outgoing segments */
	__u32 echo_enabled; /* fill the echo fields from what arrived */
	__u64 sample_ns;    /* at most one telemetry event per flow per this interval (0: every segment) */
	/*
	 * Plausible bounds of an arriving echo (agent::EchoBounds): a reading above its bound is
	 * clamped to it before the socket stores it (and congestion control reads it), and counted.
	 * INTval bounds are codes (bits 0-6), so the check needs no shift; 0x7f and TCP_INT_LAT_MAX
	 * admit everything the wire can carry.
	 */
	__u32 ecr_lat_max;  /* summed hop latency, ns */
	__u8 ecr_queue_max; /* queue readings (bit 7 set) */
	__u8 ecr_util_max;  /* utilization readings (bit 7 clear) */
	__u8 pad[2];
};

/* Per-socket TCP-INT state (socket local storage). */
struct int_sk {
	/* Last option that arrived: echoed back on our outgoing segments. */
	__u32 rx_lat;
	__u8 rx_int_val;
	__u8 rx_id;
	__u8 pad0[2];
	/* Last echo that arrived: our outgoing path's telemetry, read by ECN+INT. */
	__u32 ecr_lat;
	__u8 ecr_int_val;
	__u8 ecr_id;
	__u8 pad1[2];
	__u64 ecr_count; /* echoes received so far, so a reader can tell a new one */
	__u64 last_event_ns;
};

/* One telemetry record on the ring buffer. Addresses are IPv4-mapped IPv6 for IPv4 flows. */
struct int_event {
	__u64 ts_ns;
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport; /* host byte order */
	__u16 dport;
	__u8 int_val; /* arrived on this segment: the path towards this host */
	__u8 id;
	__u8 int_ecr; /* echoed by the peer: the path from this host */
	__u8 id_ecr;
	__u32 lat;
	__u32 lat_ecr;
	__u32 srtt_us;
	__u32 snd_cwnd; /* segments */
	__u32 mss;
	__u32 skb_len; /* bytes of the segment that carried the option, TCP header included */
};

/* Indexes of the agent's per-CPU counters. */
enum agent_counter {
	AG_SOCKS_ENABLED = 0,  /* connections that got the header-option callbacks */
	AG_OPT_WRITTEN = 1,    /* outgoing segments that carried the option */
	AG_OPT_NO_SPACE = 2,   /* outgoing segments with no room left for it */
	AG_OPT_PARSED = 3,     /* arriving options that decoded */
	AG_OPT_ABSENT = 4,     /* arriving segments without the option */
	AG_MALFORMED_LEN = 5,  /* arriving 0x72 options with a length other than 12 (ignored) */
	AG_MALFORMED_TRUNC = 6, /* arriving options cut short by the header's end (ignored) */
	AG_EVENTS = 7,         /* telemetry records handed to the ring buffer */
	AG_EVENTS_LOST = 8,    /* records dropped because the ring buffer was full */
	AG_NO_STORAGE = 9,     /* sockets whose local storage could not be made */
	AG_ECR_INT_CLAMPED = 10, /* echoed INTvals above agent_config's bound for their branch (clamped) */
	AG_ECR_LAT_CLAMPED = 11, /* echoed latencies above agent_config's bound (clamped) */
	AG_NCOUNTERS = 12,
};

/* ---- Per-connection CC policy (cc_select.bpf.c) ---- */

enum cc_policy_kind {
	CC_POLICY_PORT = 1,   /* local or remote TCP port */
	CC_POLICY_CGROUP = 2, /* cgroup v2 id of the process that connects */
};

/* A policy entry's key. */
struct cc_policy_key {
	__u32 kind;
	__u32 pad;
	__u64 value; /* port, or cgroup id */
};

/* A policy entry's value: a congestion-control name as `sysctl tcp_congestion_control` takes it. */
struct cc_policy_val {
	char name[16];
};

enum cc_select_counter {
	CC_SET = 0,        /* connections given an algorithm by policy */
	CC_SET_FAILED = 1, /* policy named an algorithm the kernel does not have */
	CC_NEG_ANSWERED = 2,  /* SYN-ACKs that answered a proposal */
	CC_NEG_MALFORMED = 3, /* SYNs whose negotiation option was malformed (ignored, not answered) */
	CC_NCOUNTERS = 4,
};

/*
 * In-band negotiation (the open CC draft, 7.1), the simulator's option byte for byte: kind 253
 * (RFC 6994), ExID "SL", one byte of capabilities (sluice_sim::packet::Caps). The SYN proposes
 * what the class's algorithm needs and asks the path; each sluice switch clears what its port
 * cannot honour; the SYN-ACK answers what the path offered and what the receiver supports.
 */
#define NEG_KIND 253
#define NEG_LEN 5
#define NEG_EXID_HI 0x53
#define NEG_EXID_LO 0x4c

enum neg_caps {
	CAPS_WANTS_INT = 1 << 0,         /* SYN: the algorithm wants TCP-INT */
	CAPS_ANSWERED = 1 << 0,          /* SYN-ACK: the receiver negotiates (the bit is WANTS_INT on a SYN) */
	CAPS_WANTS_HOP_RECORDS = 1 << 1, /* SYN: the algorithm wants per-hop records */
	CAPS_WANTS_ECN = 1 << 2,         /* SYN: the algorithm wants per-packet ECN marks */
	CAPS_PATH_ANY_INT = 1 << 3,      /* set by a switch that stamps TCP-INT */
	CAPS_PATH_ALL_INT = 1 << 4,      /* set by the sender, cleared by a port that does not stamp */
	CAPS_PATH_ECN = 1 << 5,          /* set by the sender, cleared by a port that does not mark */
	CAPS_PEER_INT = 1 << 6,          /* SYN-ACK: the receiver's stack speaks TCP-INT */
	CAPS_PROPOSED = 1 << 7,          /* SYN: the sender proposes */
};

/* How a client's negotiation ended, in the simulator's order (cc::negotiation::Negotiation). */
enum neg_outcome {
	NEG_ACCEPTED = 0,
	NEG_NOT_NEGOTIATED = 1,
	NEG_LOCAL_NO_INT = 2,
	NEG_PEER_NO_INT = 3,
	NEG_PATH_NO_INT = 4,
	NEG_PATH_NO_ECN = 5,
	NEG_PATH_LEGACY_INT = 6,
	NEG_PEER_SILENT = 7,
	NEG_NOUTCOMES = 8,
};

/*
 * The capabilities byte of a negotiation option as bpf_load_hdr_opt copied it (`n` its return):
 * 0 and the byte in *caps, or -1 for an option that is not exactly 5 bytes (never trusted).
 */
static __always_inline int neg_decode(const __u8 *buf, long n, __u8 *caps)
{
	if (n != NEG_LEN || buf[1] != NEG_LEN)
		return -1;
	*caps = buf[4];
	return 0;
}

/*
 * The client's decision from what it offered and the answer, as the simulator's
 * cc::negotiation::negotiate: the first missing need names the outcome.
 */
static __always_inline __u32 neg_decide(__u8 offer, int answered, __u8 answer, int local_int)
{
	if (!answered)
		return NEG_PEER_SILENT;
	if (offer & (CAPS_WANTS_INT | CAPS_WANTS_HOP_RECORDS)) {
		if (!local_int)
			return NEG_LOCAL_NO_INT;
		if (!(answer & CAPS_PEER_INT))
			return NEG_PEER_NO_INT;
		if (!(answer & CAPS_PATH_ANY_INT))
			return NEG_PATH_NO_INT;
	}
	if ((offer & CAPS_WANTS_HOP_RECORDS) && !(answer & CAPS_PATH_ALL_INT))
		return NEG_PATH_LEGACY_INT;
	if ((offer & CAPS_WANTS_ECN) && !(answer & CAPS_PATH_ECN))
		return NEG_PATH_NO_ECN;
	return NEG_ACCEPTED;
}

/* ---- The agent's class table (cc_select.bpf.c; written by `sluice agent`) ---- */

#define SLUICE_CLASSES 32      /* classes one policy may define */
#define SLUICE_CLASS_PORTS 8   /* port ranges one class matches */
#define SLUICE_CLASS_CGROUPS 4 /* cgroups one class matches */
#define SLUICE_CLASS_IDS 256   /* class ids: the agent keeps a class's id while its name lives */

/*
 * The table holds two halves of SLUICE_CLASSES slots: the agent writes the half not in use, then
 * raises the generation, whose low bit names the half in force, so a connection sees one whole
 * policy or the next, never a mix.
 *
 * One class, in the order the agent evaluates them: classes matching ports and cgroups, then
 * ports alone, then cgroups alone, then `default` (which matches everything). The first class
 * whose every given criterion holds takes the connection.
 */
struct sluice_class {
	char cc[16];                              /* the algorithm's kernel name */
	__u32 in_use;                             /* 0: an empty slot; evaluation stops there; SLUICE_INTENT_ONLY: joined by intent alone */
	__u32 id;                                 /* 1 to SLUICE_CLASS_IDS - 1, stable across reloads */
	__u32 priority;                           /* the sockets' SO_PRIORITY */
	__u32 nports;                             /* port ranges given (0: any port) */
	__u32 ncgroups;                           /* cgroups given (0: any cgroup) */
	__u16 port_first[SLUICE_CLASS_PORTS];     /* service port ranges, inclusive */
	__u16 port_last[SLUICE_CLASS_PORTS];
	__u32 pad;
	__u64 cgroup[SLUICE_CLASS_CGROUPS];       /* cgroup v2 ids of the processes that open */
	char fallback[16];                        /* what a failed negotiation runs instead */
	__u32 offer;                              /* CAPS_WANTS_* of the algorithm */
	__u32 pad2;
};

/* A slot's in_use for a class no rule matches: only an intent's declaration joins it. */
#define SLUICE_INTENT_ONLY 2

/* What a socket keeps of its class (cloned from a listener to its children). */
struct sluice_class_sk {
	__u32 id;         /* the class's id (0: no class) */
	__u32 generation; /* the policy generation that chose it */
	__u8 offer;       /* a client's proposal (CAPS_WANTS_*) */
	__u8 proposing;   /* a client whose SYN-ACK is still to be judged */
	__u8 outcome;     /* enum neg_outcome, once judged */
	__u8 intent;      /* the intent the application declared (enum sluice_intent_kind), 0: none */
	char fallback[16];
	__u64 intent_value; /* the declaration's value (target_rate: bits/s; deadline: us) */
};

/*
 * Applications' intents (draft 6.1; include/sluice/intent.h): a setsockopt at level SOL_SLUICE
 * that the agent's cgroup/setsockopt program takes. The policy maps each intent to a class and
 * names the cgroups that may claim it; the table has two halves like the class table's.
 */
#define SOL_SLUICE 0x534c
#define SLUICE_INTENT 1
#define SLUICE_INTENTS 4 /* latency_sensitive, bulk, target_rate, deadline: 1 to 4 */
#define SLUICE_INTENT_TARGET_RATE 3

struct sluice_intent_req {
	__u32 intent;
	__u32 reserved;
	__u64 value;
};

struct sluice_intent_rule {
	__u32 class_key;                    /* the class's slot in the same half, plus one (0: not mapped) */
	__u32 ncgroups;
	__u64 cgroup[SLUICE_CLASS_CGROUPS]; /* cgroup v2 ids whose processes may claim the intent */
};

/* Per intent (0: a request naming none, or too short): counters at intent * INTENT_NCOUNTERS. */
enum intent_counter {
	INTENT_ACCEPTED = 0,      /* declarations taken */
	INTENT_NOT_PERMITTED = 1, /* refused: the caller's cgroup may not claim it */
	INTENT_NOT_MAPPED = 2,    /* refused: the policy maps no class to it (or no such intent) */
	INTENT_LATE = 3,          /* refused: a class intent on a socket already connected or listening */
	INTENT_NCOUNTERS = 4,
};

/*
 * A class's parameters for the portable algorithms (scc_kernel.h), by class id: the C
 * `struct <alg>_params` of the class's algorithm, read at every ACK, so a change reaches open
 * connections at their next ACK. `alg` is the algorithm's id (1 newreno, 2 dctcp, 3 ecn_int,
 * 4 retcp); a socket running another algorithm (its class's fallback, say) keeps its defaults.
 */
struct scc_class_params {
	__u32 alg;
	__u32 pad;
	__u8 params[56];
};

/* Per class id: counters at id * CLASS_NCOUNTERS + counter. */
enum class_counter {
	CLASS_OPENED = 0, /* connections the class took (active and passive) */
	CLASS_CLOSED = 1, /* of those, closed since */
	CLASS_CC_FAILED = 2, /* the kernel refused the class's algorithm */
	CLASS_NEG = 3,       /* clients per negotiation outcome: CLASS_NEG + enum neg_outcome */
	CLASS_NEG_MALFORMED = CLASS_NEG + NEG_NOUTCOMES, /* answers that were malformed (taken as none) */
	CLASS_NCOUNTERS = CLASS_NEG + NEG_NOUTCOMES + 1,
};

/* ---- Software INT switch (int_switch.bpf.c) ---- */

/* How one egress port stamps, keyed by ifindex. */
struct port_cfg {
	__u64 rate_bps;          /* the port's egress rate: utilization and the backlog's wait */
	__u64 qdepth_threshold;  /* queue bytes at which the queue branch is reported */
	__u64 ce_threshold;      /* queue bytes above which ECT packets get CE (0: no marking) */
	__u32 qdepth_shift;
	__u32 util_shift;
	__u32 pinned_int_val;    /* non-zero: report this INTval instead of the queue's (calibration) */
	__u32 util_window_ns;    /* utilization is measured over windows this long */
	__u32 owns_clsact;       /* userspace only: sluice created the clsact qdisc */
	__u32 ece_acks;          /* non-zero: set ECE on pure ACKs leaving this port (a circuit signal) */
	__u32 int_off;           /* non-zero: the port neither stamps TCP-INT nor offers it (a legacy hop) */
	__u32 ce_all;            /* non-zero: CE on every ECT packet, whatever the queue (a circuit's spell) */
};

/* Live state of one egress port. */
struct port_state {
	struct bpf_spin_lock lock;
	__u32 util_percent;
	__u64 q_bytes;      /* the qdisc's backlog as the last packet joined it */
	__u64 last_ns;
	__u64 win_start_ns;
	__u64 win_bytes;
	__u64 q_max;        /* largest backlog seen */
	__u64 q_sum;        /* sum of the backlog at each packet, for the mean */
	__u64 q_samples;
};

enum switch_counter {
	SW_PKTS = 0,       /* IPv4 TCP packets seen at egress */
	SW_STAMPED = 1,    /* packets whose option was updated */
	SW_RAISED = 2,     /* of those, packets whose INTval this port raised */
	SW_NO_OPT = 3,     /* packets without the option */
	SW_MALFORMED = 4,  /* packets with a malformed 0x72 option (left as they were) */
	SW_CE_MARKED = 5,  /* ECT packets marked CE */
	SW_NO_PORT = 6,    /* packets on a port without configuration */
	SW_ECE_MARKED = 7, /* pure ACKs given ECE (the circuit signal) */
	SW_NEG_SEEN = 8,   /* SYNs whose negotiation option this port answered for */
	SW_NEG_MALFORMED = 9, /* SYNs with a malformed negotiation option (left as they were) */
	SW_NCOUNTERS = 10,
};

#endif /* SLUICE_TCP_INT_H */
