//! The world a scenario builds: its flows made, everything that needs the topology validated,
//! and the memory a run will take.

use super::*;
use super::overrides::*;
use super::validation::*;
use crate::flow::build::ClassRuntime;
use crate::net::topology::Graph;
use crate::time::Time;
use crate::transport::rdma::RdmaTlt;
use crate::transport::tcp::TcpConfig;
use crate::flow::waits::Wait;
use crate::workload::collective::CollectiveRun;
use crate::workload::kind::Workload;
use crate::workload::{FlowSpec, WorkloadContext};
use crate::world::{Bucketing, WorldSpec, World};

/// Builds the world a loaded scenario describes, validating everything that needs the topology.
pub fn build(loaded: &LoadedScenario) -> Result<World, String> {
    build_measured(loaded).map(|(mut world, footprint)| {
        world.room_for = footprint.fit(loaded.scenario.limits.memory.map(|b| b.0)).map(|n| n as usize);
        world
    })
}


/// [`build`], with what a run of the world will hold in memory.
pub fn build_measured(loaded: &LoadedScenario) -> Result<(World, Footprint), String> {
    let graph = loaded.scenario.topology.build(&loaded.base_dir)?;
    let (parts, mut footprint) = prepare(loaded, &graph)?;
    let world = World::new(&graph, parts);
    footprint.measure(&world);
    Ok((world, footprint))
}

/// Validates everything that needs the topology and materializes the flows; refuses a scenario
/// whose run would not fit in memory (`limits.memory`, or what this process may use).
pub fn prepare(loaded: &LoadedScenario, graph: &Graph) -> Result<(WorldSpec, Footprint), String> {
    let sc = &loaded.scenario;
    sc.transport.validate()?;
    sc.rdma.validate()?;
    sc.uet.validate()?;
    let uet = sc.classes.values().any(|c| c.transport == ClassTransport::Uet);
    if uet && sc.tlt.enabled {
        return Err("tlt.enabled: TLT colours TCP and RDMA packets; UET classes recover by trimming and NACKs, so turn TLT off".into());
    }
    if uet && sc.output.pcap.is_some() {
        return Err("output.pcap: captures write TCP and RoCE frames, and UET packets have no encoding yet; remove output.pcap".into());
    }
    if !uet && !sc.uet.is_default() {
        return Err("uet: these settings are for classes with transport = \"uet\", and no class has it; remove [uet] or give a class transport = \"uet\"".into());
    }
    if sc.rdma.recovery != crate::transport::rdma::Recovery::Gbn && !sc.classes.values().any(|c| c.transport == ClassTransport::Rdma) {
        return Err(format!(
            "rdma.recovery: \"{}\" recovers RDMA queue pairs, and no class has transport = \"rdma\"; TCP classes always recover with SACK (RFC 6675), so remove the key or give a class transport = \"rdma\"",
            sc.rdma.recovery.name()
        ));
    }
    if sc.switch.buffer.0 == 0 {
        return Err("switch.buffer: expected a positive size like \"16MB\"".into());
    }
    if !(sc.switch.alpha > 0.0 && sc.switch.alpha.is_finite()) {
        return Err(format!("switch.alpha: expected a positive number, got {}", sc.switch.alpha));
    }
    if !(1..=8).contains(&sc.switch.priorities) {
        return Err(format!("switch.priorities: expected 1 to 8 queues, got {}", sc.switch.priorities));
    }
    let bucketing = match &sc.output.fct_buckets {
        Some(b) => b.bucketing()?,
        None => Bucketing::default(),
    };
    if sc.sim.duration == Some(Time::ZERO) {
        return Err("sim.duration: expected a positive duration like \"10ms\"".into());
    }
    let limits = &sc.limits;
    let buckets = match &bucketing {
        Bucketing::Percent(p) => (100.0 / p).ceil(),
        Bucketing::Edges(e) => e.len() as f64 + 1.0,
    };
    if buckets > limits.fct_buckets as f64 {
        let key = if matches!(bucketing, Bucketing::Percent(_)) { "percent" } else { "edges" };
        return Err(format!(
            "output.fct_buckets.{key}: would make {buckets:.0} buckets per class, above limits.fct_buckets = {}; use at least {} percent per bucket or raise the limit",
            limits.fct_buckets,
            100.0 / limits.fct_buckets as f64
        ));
    }
    if let Some(d) = sc.sim.duration {
        // The largest frame on the wire: a full TCP segment, or an RDMA or UET class's full packet.
        let tcp = sc.transport.frame(sc.transport.mss()) as u64;
        let rdma = sc.classes.values().any(|c| c.transport == ClassTransport::Rdma).then(|| sc.rdma.frame(sc.rdma.mtu as u64) as u64);
        let uet_frame = uet.then(|| sc.uet.frame(sc.uet.mss()) as u64);
        slow_links(graph, &sc.topology.kind, tcp.max(rdma.unwrap_or(0)).max(uet_frame.unwrap_or(0)), d)?;
    }

    let node_ports = graph.ports();
    let host_rates: Vec<crate::time::Rate> =
        graph.hosts().iter().map(|&n| graph.links[node_ports[n][0].0].rate).collect();
    // A source scales its preset's steps to the NIC's rate: the fastest host's here.
    let line = host_rates.iter().copied().max().unwrap_or(crate::time::Rate::gbps(100));
    let checked = classes::check(&sc.classes, classes::Side::Simulator { priorities: sc.switch.priorities }, line)?;
    let names: Vec<String> = checked.iter().map(|c| c.name.clone()).collect();
    let class_index = |n: &str| names.iter().position(|c| c == n);
    let rules = crate::workload::ClassRules {
        default: class_index("default").unwrap_or(0),
        intents: classes::check_intents(&sc.policy, &checked)?,
        rules: classes::check_matches(&checked, classes::Side::Simulator { priorities: sc.switch.priorities })?,
    };
    let mut changes = classes::check_events(&sc.events, &checked, sc.sim.duration)?;
    let classes: Vec<ClassRuntime> = checked
        .into_iter()
        .enumerate()
        .map(|(i, c)| ClassRuntime {
            changes: std::mem::take(&mut changes[i]).into(),
            cc: c.cc.to_string(),
            factory: c.factory,
            priority: c.config.priority,
            fallback: (c.fallback.to_string(), c.fallback_factory),
            transport: c.config.transport,
            spray: c.config.spray,
            nic: sc.rdma.class_nic(c.nic),
            name: c.name,
        })
        .collect();
    let ctx = WorkloadContext {
        max_flows: limits.flows,
        max_outstanding: limits.outstanding,
        rules: std::sync::Arc::new(rules),
        host_rates: &host_rates,
        base_dir: &loaded.base_dir,
        class_index: &class_index,
        class_names: &names,
        seed: sc.sim.seed,
        mss: sc.transport.mss(),
        handshake: sc.transport.handshake,
        non_tcp_class: sc.classes.iter().find(|(_, c)| c.transport != ClassTransport::Tcp).map(|(name, c)| {
            (name.as_str(), if c.transport == ClassTransport::Rdma { "RDMA" } else { "UET" })
        }),
    };
    let mut flows = Vec::new();
    let mut apps = Vec::new();
    // What flows wait for, by index into `flows` (filled only once a workload has waits), and
    // the collectives' iterations.
    let mut waits: Vec<Option<Wait>> = Vec::new();
    let mut collectives: Vec<CollectiveRun> = Vec::new();
    let mut chakra: Vec<crate::workload::chakra::ChakraRun> = Vec::new();
    // The workload that makes the most flows, which a refusal for memory names.
    let mut most_made = (0, "workloads".to_string());
    // The first workload whose flows never end, which then needs a run duration.
    let mut endless = None;
    for (i, w) in sc.workloads.iter().enumerate() {
        let key = format!("workloads[{i}]");
        let parsed = w.parse(&key, &ctx)?;
        let generated = parsed.generate(&key, i, ctx.seed)?;
        sizes_fit_in_time(&generated.flows, &host_rates, &sc.transport, &key, &parsed.workload)?;
        if (flows.len() + generated.flows.len()) as u64 > limits.flows {
            return Err(format!(
                "{key}: the workloads make {} flows so far, above limits.flows = {}; make fewer or raise the limit",
                flows.len() + generated.flows.len(),
                limits.flows
            ));
        }
        if generated.flows.len() > most_made.0 {
            most_made = (generated.flows.len(), key.clone());
        }
        if endless.is_none() && matches!(parsed.workload, Workload::Bulk { size: None, .. }) {
            endless = Some(i);
        }
        let offset = flows.len();
        if !generated.waits.is_empty() {
            waits.resize(offset, None);
            waits.extend(generated.waits.into_iter().map(|w| {
                w.map(|w| Wait { after: w.after.iter().map(|a| a + offset).collect(), ..w })
            }));
        }
        collectives.extend(generated.collectives.into_iter().map(|mut c| {
            c.flows.iter_mut().for_each(|f| *f += offset);
            c
        }));
        chakra.extend(generated.chakra.into_iter().map(|mut c| {
            c.ends.iter_mut().flat_map(|e| e.after.iter_mut()).for_each(|(f, _)| *f += offset);
            c
        }));
        flows.extend(generated.flows);
        apps.extend(generated.app);
    }
    // Stable: flows starting together keep workload order, so ids are deterministic.
    let mut placed: Vec<(usize, FlowSpec)> = flows.into_iter().enumerate().collect();
    placed.sort_by_key(|(_, f)| f.start);
    // Each flow's id, by its place in the workloads' order.
    let mut id_of = vec![0; placed.len()];
    for (id, (i, _)) in placed.iter().enumerate() {
        id_of[*i] = id;
    }
    let flows: Vec<FlowSpec> = placed.into_iter().map(|(_, f)| f).collect();
    let waits = (!waits.is_empty()).then(|| {
        waits.resize(flows.len(), None);
        let mut by_id = vec![None; flows.len()];
        for (i, w) in waits.into_iter().enumerate() {
            by_id[id_of[i]] = w.map(|w| Wait { after: w.after.iter().map(|&a| id_of[a]).collect(), ..w });
        }
        let ends: Vec<(usize, usize, Time)> = flows.iter().map(|f| (f.src, f.dst, f.start)).collect();
        crate::flow::waits::WaitGraph::new(&by_id, &ends)
    });
    for c in &mut collectives {
        c.flows.iter_mut().for_each(|f| *f = id_of[*f]);
    }
    for c in &mut chakra {
        c.ends.iter_mut().flat_map(|e| e.after.iter_mut()).for_each(|(f, _)| *f = id_of[*f]);
    }
    if sc.sim.duration.is_none() {
        if let Some(i) = endless {
            return Err(format!("sim.duration: required because workloads[{i}] has endless flows (kind = \"bulk\" without size)"));
        }
    }

    let names = crate::net::naming::node_names(graph);
    let disciplines = sc.switch.disciplines(graph, &names, &sc.tlt, sc.transport.frame(sc.transport.mss()) as u64)?;
    if uet && sc.uet.load_balancing_algo == "reps" && !disciplines.iter().any(|d| d.trim.is_some()) {
        return Err("uet.load_balancing_algo: \"reps\" freezes its paths on a timeout only where switches trim (the reference stops otherwise); configure [switch.trim] or choose another".into());
    }
    let switch_names: Vec<String> = names.iter().filter(|n| n.starts_with("sw")).cloned().collect();
    let int = sc.int.runtime(&switch_names, graph.hosts().len())?;
    let hosts = graph.hosts().len();
    if sc.transport.tso && sc.transport.stack != crate::transport::tcp::Stack::Linux {
        return Err("transport.tso: Linux's TSO packets are a behaviour of Linux's stack; set transport.stack = \"linux\" with it".into());
    }
    for (i, &h) in sc.transport.agentless_hosts.iter().enumerate() {
        if h >= hosts {
            return Err(format!("transport.agentless_hosts[{i}]: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1));
        }
        if !sc.transport.handshake {
            return Err(format!(
                "transport.agentless_hosts: negotiation happens in the handshake; set transport.handshake = true for host {h} to be seen without an agent"
            ));
        }
    }
    let capture = match &sc.output.pcap {
        None => None,
        Some(pc) => {
            let total_ports: usize = graph.ports().iter().map(Vec::len).sum();
            let mut ports = vec![false; total_ports];
            for (i, spec) in pc.ports.iter().enumerate() {
                let ps = crate::net::naming::resolve_ports(&names, graph, spec)
                    .map_err(|e| format!("output.pcap.ports[{i}]: {e} (expected \"sw0->sw1\", \"sw0\" or \"h3\")"))?;
                for p in ps {
                    ports[p as usize] = true;
                }
            }
            if pc.ports.is_empty() && pc.flows.is_empty() {
                return Err("output.pcap: name ports = [..] or flows = [..] to capture".into());
            }
            if pc.max_packets == Some(0) {
                return Err("output.pcap.max_packets: expected at least 1".into());
            }
            if let Some(m) = pc.max_packets.filter(|&m| m > limits.captured_packets) {
                return Err(format!(
                    "output.pcap.max_packets: {m} packets is above limits.captured_packets = {}; capture fewer or raise the limit",
                    limits.captured_packets
                ));
            }
            flow_ids_exist(&pc.flows, "output.pcap.flows", flows.len(), !apps.is_empty(), limits)?;
            Some(crate::net::capture::CaptureSpec {
                ports,
                flows: pc.flows.clone(),
                max_packets: pc.max_packets.unwrap_or(1_000_000),
                full_frames: pc.full_frames,
            })
        }
    };
    // How long the run lasts: its duration, or at least until the last flow starts.
    let horizon = sc.sim.duration.unwrap_or_else(|| flows.last().map_or(Time::ZERO, |f| f.start));
    let samples = |count: usize, interval: Time| count as f64 * (horizon.0 as f64 / interval.0.max(1) as f64).floor();
    let (mut queue_ports, mut queue_interval, mut queue_samples) = (Vec::new(), Time::ZERO, 0.0);
    if let Some(qs) = &sc.output.queues {
        if qs.interval == Time::ZERO {
            return Err("output.queues.interval: expected a positive duration like \"1us\"".into());
        }
        queue_interval = qs.interval;
        for (i, spec) in qs.ports.iter().enumerate() {
            let ps = crate::net::naming::resolve_ports(&names, graph, spec)
                .map_err(|e| format!("output.queues.ports[{i}]: {e} (expected \"sw0->sw1\", \"sw0\" or \"h3\")"))?;
            // A port named twice ("sw0->h0" and "sw0") is sampled once.
            queue_ports.extend(ps.into_iter().filter(|p| !queue_ports.contains(p)).collect::<Vec<_>>());
        }
        let n = samples(queue_ports.len(), qs.interval);
        queue_samples = n;
        if n > limits.samples as f64 {
            return Err(format!(
                "output.queues.interval: sampling {} every {} for {horizon} makes {n:.0} samples, above limits.samples = {}; sample less often or raise the limit",
                crate::words::count(queue_ports.len() as u64, "port", "ports"),
                qs.interval,
                limits.samples
            ));
        }
    }
    let (mut cwnd_flows, mut cwnd_interval, mut cwnd_samples) = (None, Time::ZERO, 0.0);
    if let Some(cs) = &sc.output.cwnd {
        if cs.interval == Time::ZERO {
            return Err("output.cwnd.interval: expected a positive duration like \"10us\"".into());
        }
        if let Some(&bad) = cs.flows.iter().find(|&&f| f as usize >= flows.len()) {
            return Err(format!(
                "output.cwnd.flows: flow {bad} does not exist; the scenario has {}",
                crate::words::count(flows.len() as u64, "flow", "flows")
            ));
        }
        let sampled = if cs.flows.is_empty() { flows.len() } else { cs.flows.len() };
        let n = samples(sampled, cs.interval);
        cwnd_samples = n;
        if n > limits.samples as f64 {
            return Err(format!(
                "output.cwnd.interval: sampling {} every {} for {horizon} makes {n:.0} samples, above limits.samples = {}; sample less often or raise the limit",
                crate::words::count(sampled as u64, "flow", "flows"),
                cs.interval,
                limits.samples
            ));
        }
        cwnd_interval = cs.interval;
        cwnd_flows = Some(cs.flows.clone());
    }
    if let Some(t) = &sc.output.telemetry {
        flow_ids_exist(&t.flows, "output.telemetry.flows", flows.len(), !apps.is_empty(), limits)?;
    }
    // A capture keeps at most max_packets, and no more than each data segment and its ACK at
    // each place it looks (a captured port, or the senders of captured flows).
    let captured = capture.as_ref().map_or(0, |c| {
        let places = c.ports.iter().filter(|&&p| p).count() as u64 + u64::from(!c.flows.is_empty());
        let segments: Option<u64> = flows.iter().map(|f| f.size.map(|s| s.div_ceil(sc.transport.mss()))).sum();
        match segments {
            Some(s) if apps.is_empty() => c.max_packets.min(2 * s * places),
            _ => c.max_packets,
        }
    });
    let footprint = Footprint::new(&flows, most_made.1, &host_rates, &sc.transport, queue_samples, cwnd_samples, captured);
    footprint.within(limits.memory.map(|b| b.0))?;
    let parts = WorldSpec {
        seed: sc.sim.seed,
        duration: sc.sim.duration,
        stop_when_done: sc.sim.stop_when_done,
        buffer: (sc.switch.buffer.0, sc.switch.alpha),
        priorities: sc.switch.priorities,
        disciplines,
        tcp: TcpConfig { tlt: sc.tlt.enabled, ..sc.transport.clone() },
        rdma: (sc.rdma.clone(), sc.tlt.enabled.then_some(RdmaTlt { every: sc.tlt.every, marking: sc.tlt.rdma_marking })),
        uet: uet.then(|| sc.uet.clone()),
        pfc: sc.pfc.settings(sc.transport.frame(sc.transport.mss()) as u64, host_rates.iter().copied().max().unwrap_or(crate::time::Rate(1)))?,
        circuit: circuit_parts(sc, &loaded.base_dir, &classes)?,
        failures: link_failures(sc, graph, &names)?,
        cpu: cpu_config(sc, graph.hosts().len())?,
        offload: offload_config(sc, graph.hosts().len())?,
        classes,
        flows,
        apps,
        waits,
        collectives,
        chakra,
        queue_ports,
        queue_interval,
        cwnd_flows,
        cwnd_interval,
        bucketing,
        int,
        capture,
        telemetry: sc.output.telemetry.as_ref().map(|t| (t.interval, (!t.flows.is_empty()).then(|| t.flows.clone()))),
    };
    Ok((parts, footprint))
}

