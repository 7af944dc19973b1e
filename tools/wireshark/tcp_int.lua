-- Wireshark dissector for the TCP-INT option (TCP option kind 0x72, 12 bytes): in-band network
-- telemetry carried in TCP segments. Registered in the "tcp.option" dissector table (present in
-- Wireshark 4.0), so the TCP dissector hands it each 0x72 option, kind and length bytes included.
--
-- Layout, network byte order:
--   kind (0x72) | length (12) | INTval | INTecr | ID | IDecr | Lat (24 bit) | LatEcr (24 bit)
-- INTval bit 7 selects the branch: 0 = link utilization, 1 = queue depth; bits 0-6 hold the value
-- (scaled by the switch's shift). ID is the IP TTL at the hop that set INTval last. Lat is the
-- summed hop latency. INTecr, IDecr and LatEcr are the receiver's echoes of the three.
--
-- Use:  wireshark -X lua_script:tools/wireshark/tcp_int.lua trace.pcap
--       tshark -r trace.pcap -X lua_script:tools/wireshark/tcp_int.lua -Y tcp_int
-- or copy this file into the personal Lua plugins folder (Help > About > Folders).

local KIND = 0x72
local LEN = 12

local tcp_int = Proto("tcp_int", "TCP-INT Option")

local branch = { [0] = "utilization", [1] = "queue depth" }

local f = {
    kind = ProtoField.uint8("tcp_int.kind", "Kind", base.HEX),
    len = ProtoField.uint8("tcp_int.len", "Length", base.DEC),
    intval = ProtoField.uint8("tcp_int.intval", "INTval", base.HEX),
    qdepth_flag = ProtoField.uint8("tcp_int.qdepth_flag", "Branch", base.DEC, branch, 0x80,
        "1: queue depth, 0: link utilization"),
    value = ProtoField.uint8("tcp_int.value", "Value", base.DEC, nil, 0x7f,
        "Queue depth or utilization in the switch's units"),
    ecr = ProtoField.uint8("tcp_int.ecr", "INTecr", base.HEX),
    ecr_qdepth_flag = ProtoField.uint8("tcp_int.ecr_qdepth_flag", "Branch", base.DEC, branch, 0x80,
        "Echoed branch, 1: queue depth, 0: link utilization"),
    ecr_value = ProtoField.uint8("tcp_int.ecr_value", "Value", base.DEC, nil, 0x7f,
        "Echoed queue depth or utilization"),
    id = ProtoField.uint8("tcp_int.id", "ID (hop TTL)", base.DEC, nil, nil,
        "IP TTL at the hop that set INTval last"),
    id_ecr = ProtoField.uint8("tcp_int.id_ecr", "IDecr", base.DEC, nil, nil, "Echoed ID"),
    lat = ProtoField.uint24("tcp_int.lat", "Lat", base.DEC, nil, nil, "Summed hop latency (24 bit)"),
    lat_ecr = ProtoField.uint24("tcp_int.lat_ecr", "LatEcr", base.DEC, nil, nil, "Echoed latency (24 bit)"),
}
tcp_int.fields = { f.kind, f.len, f.intval, f.qdepth_flag, f.value, f.ecr, f.ecr_qdepth_flag,
    f.ecr_value, f.id, f.id_ecr, f.lat, f.lat_ecr }

local ef_len_bad = ProtoExpert.new("tcp_int.len_bad", "TCP-INT option length is not 12",
    expert.group.MALFORMED, expert.severity.ERROR)
tcp_int.experts = { ef_len_bad }

local function describe(v)
    if v >= 0x80 then
        return string.format("queue depth %d", v - 0x80)
    end
    return string.format("utilization %d", v)
end

function tcp_int.dissector(tvb, pinfo, tree)
    local avail = tvb:len()
    if avail < 2 then
        return 0
    end
    local optlen = tvb(1, 1):uint()
    local item = tree:add(tcp_int, tvb(), "TCP Option - TCP-INT")
    item:add(f.kind, tvb(0, 1))
    local len_item = item:add(f.len, tvb(1, 1))
    if optlen ~= LEN then
        len_item:add_proto_expert_info(ef_len_bad,
            string.format("TCP-INT option length %d, expected %d", optlen, LEN))
    end
    -- Decode whichever fields the option's bytes hold, so a short option still shows what it has.
    local n = math.min(avail, optlen)
    if n >= 3 then
        local t = item:add(f.intval, tvb(2, 1))
        t:add(f.qdepth_flag, tvb(2, 1))
        t:add(f.value, tvb(2, 1))
        t:append_text(" (" .. describe(tvb(2, 1):uint()) .. ")")
    end
    if n >= 4 then
        local t = item:add(f.ecr, tvb(3, 1))
        t:add(f.ecr_qdepth_flag, tvb(3, 1))
        t:add(f.ecr_value, tvb(3, 1))
        t:append_text(" (" .. describe(tvb(3, 1):uint()) .. ")")
    end
    if n >= 5 then item:add(f.id, tvb(4, 1)) end
    if n >= 6 then item:add(f.id_ecr, tvb(5, 1)) end
    if n >= 9 then item:add(f.lat, tvb(6, 3)) end
    if n >= 12 then item:add(f.lat_ecr, tvb(9, 3)) end
    if n >= 12 and optlen == LEN then
        item:append_text(string.format(": INTval 0x%02x, ID %d, Lat %d, INTecr 0x%02x, IDecr %d, LatEcr %d",
            tvb(2, 1):uint(), tvb(4, 1):uint(), tvb(6, 3):uint(),
            tvb(3, 1):uint(), tvb(5, 1):uint(), tvb(9, 3):uint()))
        pinfo.cols.info:append(string.format(" INT=0x%02x", tvb(2, 1):uint()))
    end
    return avail
end

DissectorTable.get("tcp.option"):add(KIND, tcp_int)
