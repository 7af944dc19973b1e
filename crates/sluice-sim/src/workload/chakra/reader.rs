//! Reading a rank's `.et` file: a stream of messages, each after its length as a varint, the
//! `GlobalMetadata` first and then the `Node`s, as chakra's own `protolib.py` (`encodeMessage`,
//! `decodeMessage`) and ASTRA-sim's feeder write and read it. A zero length ends the stream, as
//! in `decodeMessage`. Every way a file can be broken is an error that names where it broke: a
//! length that is not a varint, a message cut short, bytes that are not the message, and a
//! schema version this reader does not know.

use super::schema::{GlobalMetadata, Node};
use prost::Message;

/// The schema versions read: `et_def.proto` as ASTRA-sim's examples and chakra's tools write it.
pub const VERSIONS: &[&str] = &["0.0.4"];

/// One rank's trace as read.
#[derive(Clone, Debug, PartialEq)]
pub struct RankTrace {
    /// The schema version it declares.
    pub version: String,
    /// Its nodes, in file order.
    pub nodes: Vec<Node>,
}

/// A varint at `at` in `bytes`: its value and its length, or why it is not one.
fn varint(bytes: &[u8], at: usize) -> Result<(u64, usize), &'static str> {
    let mut value = 0u64;
    for (i, &b) in bytes[at..].iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if bytes.len() - at < 10 {
        Err("the file ends inside it")
    } else {
        Err("it runs past 10 bytes")
    }
}

/// Message `k` of a trace, named for errors by the node before it (the nearest thing a broken
/// node has to a name).
fn message(k: usize, before: Option<u64>) -> String {
    match (k, before) {
        (0, _) => "the GlobalMetadata (message 0)".to_string(),
        (1, _) => "message 1 (the first node)".to_string(),
        (k, Some(id)) => format!("message {k} (the node after node {id})"),
        (k, None) => format!("message {k}"),
    }
}

/// The version `meta` declares: its `version`, or, where that is empty, the version at the end
/// of its `schema` attribute ("1.0.2-chakra.0.0.4", as chakra's PyTorch converter writes it).
fn version_of(meta: &GlobalMetadata) -> Option<String> {
    if !meta.version.is_empty() {
        return Some(meta.version.clone());
    }
    let schema = meta.attr.iter().find(|a| a.name == "schema")?.text()?;
    Some(schema.rsplit_once("chakra.").map_or(schema, |(_, v)| v).to_string())
}

/// Reads one rank's trace from `bytes`.
pub fn read(bytes: &[u8]) -> Result<RankTrace, String> {
    if bytes.is_empty() {
        return Err("the file is empty; a trace starts with a GlobalMetadata message".into());
    }
    let (mut version, mut nodes) = (None, Vec::<Node>::new());
    let (mut at, mut k) = (0, 0);
    while at < bytes.len() {
        let what = message(k, nodes.last().map(|n| n.id));
        let (len, n) = varint(bytes, at)
            .map_err(|why| format!("{what}: its length at byte {at} is not a valid varint ({why})"))?;
        if len == 0 {
            // chakra's decodeMessage stops at a zero length; anything after it would be lost.
            let after = bytes.len() - at - n;
            if after > 0 {
                return Err(format!(
                    "{what}: a zero length at byte {at} ends the trace, but {after} more bytes follow"
                ));
            }
            break;
        }
        at += n;
        let left = (bytes.len() - at) as u64;
        if len > left {
            return Err(format!("{what}: truncated: its length says {len} bytes but only {left} remain"));
        }
        let m = &bytes[at..at + len as usize];
        at += len as usize;
        if k == 0 {
            let meta = GlobalMetadata::decode(m).map_err(|e| format!("{what}: not a Chakra GlobalMetadata: {e}"))?;
            let v = version_of(&meta)
                .ok_or_else(|| format!("{what}: declares no version (neither version nor a schema attribute)"))?;
            if !VERSIONS.contains(&v.as_str()) {
                return Err(format!(
                    "{what}: schema version \"{v}\" is not supported; this reader knows {}",
                    VERSIONS.join(", ")
                ));
            }
            version = Some(v);
        } else {
            nodes.push(Node::decode(m).map_err(|e| format!("{what}: not a Chakra node: {e}"))?);
        }
        k += 1;
    }
    let version = version.ok_or("the file has no GlobalMetadata message")?;
    Ok(RankTrace { version, nodes })
}

/// A trace's bytes, as chakra's `encodeMessage` writes them: `meta`, then each node.
pub fn write(meta: &GlobalMetadata, nodes: &[Node]) -> Vec<u8> {
    let mut out = Vec::new();
    meta.encode_length_delimited(&mut out).expect("a Vec grows");
    for n in nodes {
        n.encode_length_delimited(&mut out).expect("a Vec grows");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> GlobalMetadata {
        GlobalMetadata { version: "0.0.4".into(), attr: Vec::new() }
    }

    fn node(id: u64) -> Node {
        Node { id, r#type: super::super::schema::node_type::COMP, duration_micros: 3, ..Node::default() }
    }

    #[test]
    fn a_written_trace_reads_back_and_each_break_names_where() {
        let bytes = write(&meta(), &[node(4), node(9)]);
        let t = read(&bytes).unwrap();
        assert_eq!((t.version.as_str(), t.nodes.len(), t.nodes[1].id), ("0.0.4", 2, 9));
        let err = read(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(err.starts_with("message 2 (the node after node 4): truncated: its length says"), "{err}");
        let mut bad = bytes.clone();
        bad.extend([0xff; 11]);
        let err = read(&bad).unwrap_err();
        assert!(err.starts_with("message 3 (the node after node 9): its length at byte"), "{err}");
        assert!(err.ends_with("is not a valid varint (it runs past 10 bytes)"), "{err}");
        let old = write(&GlobalMetadata { version: "0.0.3".into(), attr: Vec::new() }, &[node(1)]);
        assert_eq!(
            read(&old).unwrap_err(),
            "the GlobalMetadata (message 0): schema version \"0.0.3\" is not supported; this reader knows 0.0.4"
        );
        assert_eq!(read(&[]).unwrap_err(), "the file is empty; a trace starts with a GlobalMetadata message");
    }
}
