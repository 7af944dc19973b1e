//! The TCP-INT codec against the vectors the Linux half shares (`tests/vectors/tcp_int.json`).

use sluice_sim::packet::tcp_int::TcpInt;

fn vectors() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/tcp_int.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vectors file")).expect("vectors JSON")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn every_vector_decodes_to_its_fields_and_encodes_back() {
    let v = vectors();
    let list = v["vectors"].as_array().unwrap();
    assert!(list.len() >= 5);
    for t in list {
        let bytes = hex(t["bytes"].as_str().unwrap());
        let o = TcpInt::decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", t["name"]));
        let field = |k: &str| t[k].as_u64().unwrap() as u32;
        assert_eq!(
            (o.int_val as u32, o.int_ecr as u32, o.id as u32, o.id_ecr as u32, o.lat, o.lat_ecr),
            (field("int_val"), field("int_ecr"), field("id"), field("id_ecr"), field("lat"), field("lat_ecr")),
            "{}",
            t["name"]
        );
        assert_eq!(o.encode().to_vec(), bytes, "{}", t["name"]);
    }
}

#[test]
fn every_malformed_vector_is_rejected() {
    let v = vectors();
    for t in v["malformed"].as_array().unwrap() {
        let bytes = hex(t["bytes"].as_str().unwrap());
        assert!(TcpInt::decode(&bytes).is_err(), "{} accepted: {}", t["name"], t["why"]);
    }
}
