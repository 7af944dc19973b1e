//! The Chakra execution trace's messages, mirroring `schema/protobuf/et_def.proto` of
//! mlcommons/chakra (commit 21585d8f2d65603d791d2121e3d4632351120262), field for field and tag for
//! tag. They are derived by hand rather than generated, so that building sluice needs no
//! `protoc`. Enums are kept as their numbers, so that a value the schema lacks can be named in
//! an error rather than read as the default.

/// `GlobalMetadata`: the first message of a trace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GlobalMetadata {
    /// The schema version the trace was written in ("0.0.4").
    #[prost(string, tag = "1")]
    pub version: String,
    /// Free-form attributes (chakra's converter writes `schema` here, not `version`).
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// `Node`: one operation of a rank.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    /// The node's id, unique within its rank's file.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// A name for people.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Its `NodeType`, as a number (kept raw so that an unknown one can be named).
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    /// Nodes that must finish first, for order only.
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Nodes whose results this one uses.
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// When the node started in the traced run.
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// How long it ran in the traced run: what ASTRA-sim replays.
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Inputs (PyTorch's values, shapes and types).
    #[prost(message, optional, tag = "8")]
    pub inputs: Option<IoInfo>,
    /// Outputs.
    #[prost(message, optional, tag = "9")]
    pub outputs: Option<IoInfo>,
    /// The node's attributes (`comm_type`, `comm_size`, `comm_src`, ...).
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

/// `IOInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IoInfo {
    /// Values, as text.
    #[prost(string, tag = "1")]
    pub values: String,
    /// Shapes, as text.
    #[prost(string, tag = "2")]
    pub shapes: String,
    /// Types, as text.
    #[prost(string, tag = "3")]
    pub types: String,
}

/// `AttributeProto`: a named value of one of many types.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// A description.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value.
    #[prost(
        oneof = "Value",
        tags = "3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32"
    )]
    pub value: Option<Value>,
}

/// `DoubleList` (every `*List` message of the schema holds its values in field 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Doubles {
    /// The values.
    #[prost(double, repeated, tag = "1")]
    pub values: Vec<f64>,
}

/// `FloatList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Floats {
    /// The values.
    #[prost(float, repeated, tag = "1")]
    pub values: Vec<f32>,
}

/// `Int32List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int32s {
    /// The values.
    #[prost(int32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64s {
    /// The values.
    #[prost(int64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `Uint32List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Uint32s {
    /// The values.
    #[prost(uint32, repeated, tag = "1")]
    pub values: Vec<u32>,
}

/// `Uint64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Uint64s {
    /// The values.
    #[prost(uint64, repeated, tag = "1")]
    pub values: Vec<u64>,
}

/// `Sint32List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sint32s {
    /// The values.
    #[prost(sint32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Sint64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sint64s {
    /// The values.
    #[prost(sint64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `Fixed32List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Fixed32s {
    /// The values.
    #[prost(fixed32, repeated, tag = "1")]
    pub values: Vec<u32>,
}

/// `Fixed64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Fixed64s {
    /// The values.
    #[prost(fixed64, repeated, tag = "1")]
    pub values: Vec<u64>,
}

/// `Sfixed32List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sfixed32s {
    /// The values.
    #[prost(sfixed32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Sfixed64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sfixed64s {
    /// The values.
    #[prost(sfixed64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `BoolList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Bools {
    /// The values.
    #[prost(bool, repeated, tag = "1")]
    pub values: Vec<bool>,
}

/// `StringList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Strings {
    /// The values.
    #[prost(string, repeated, tag = "1")]
    pub values: Vec<String>,
}

/// `BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Byteses {
    /// The values.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub values: Vec<Vec<u8>>,
}

/// `AttributeProto.value`: the oneof, with the schema's tags.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// `double_val`.
    #[prost(double, tag = "3")]
    DoubleVal(f64),
    /// `double_list`.
    #[prost(message, tag = "4")]
    DoubleList(Doubles),
    /// `float_val`.
    #[prost(float, tag = "5")]
    FloatVal(f32),
    /// `float_list`.
    #[prost(message, tag = "6")]
    FloatList(Floats),
    /// `int32_val`.
    #[prost(int32, tag = "7")]
    Int32Val(i32),
    /// `int32_list`.
    #[prost(message, tag = "8")]
    Int32List(Int32s),
    /// `int64_val`.
    #[prost(int64, tag = "9")]
    Int64Val(i64),
    /// `int64_list`.
    #[prost(message, tag = "10")]
    Int64List(Int64s),
    /// `uint32_val`.
    #[prost(uint32, tag = "11")]
    Uint32Val(u32),
    /// `uint32_list`.
    #[prost(message, tag = "12")]
    Uint32List(Uint32s),
    /// `uint64_val`.
    #[prost(uint64, tag = "13")]
    Uint64Val(u64),
    /// `uint64_list`.
    #[prost(message, tag = "14")]
    Uint64List(Uint64s),
    /// `sint32_val`.
    #[prost(sint32, tag = "15")]
    Sint32Val(i32),
    /// `sint32_list`.
    #[prost(message, tag = "16")]
    Sint32List(Sint32s),
    /// `sint64_val`.
    #[prost(sint64, tag = "17")]
    Sint64Val(i64),
    /// `sint64_list`.
    #[prost(message, tag = "18")]
    Sint64List(Sint64s),
    /// `fixed32_val`.
    #[prost(fixed32, tag = "19")]
    Fixed32Val(u32),
    /// `fixed32_list`.
    #[prost(message, tag = "20")]
    Fixed32List(Fixed32s),
    /// `fixed64_val`.
    #[prost(fixed64, tag = "21")]
    Fixed64Val(u64),
    /// `fixed64_list`.
    #[prost(message, tag = "22")]
    Fixed64List(Fixed64s),
    /// `sfixed32_val`.
    #[prost(sfixed32, tag = "23")]
    Sfixed32Val(i32),
    /// `sfixed32_list`.
    #[prost(message, tag = "24")]
    Sfixed32List(Sfixed32s),
    /// `sfixed64_val`.
    #[prost(sfixed64, tag = "25")]
    Sfixed64Val(i64),
    /// `sfixed64_list`.
    #[prost(message, tag = "26")]
    Sfixed64List(Sfixed64s),
    /// `bool_val`.
    #[prost(bool, tag = "27")]
    BoolVal(bool),
    /// `bool_list`.
    #[prost(message, tag = "28")]
    BoolList(Bools),
    /// `string_val`.
    #[prost(string, tag = "29")]
    StringVal(String),
    /// `string_list`.
    #[prost(message, tag = "30")]
    StringList(Strings),
    /// `bytes_val`.
    #[prost(bytes = "vec", tag = "31")]
    BytesVal(Vec<u8>),
    /// `bytes_list`.
    #[prost(message, tag = "32")]
    BytesList(Byteses),
}

/// `NodeType`'s values.
pub mod node_type {
    /// `INVALID_NODE`.
    pub const INVALID: i32 = 0;
    /// `METADATA_NODE`.
    pub const METADATA: i32 = 1;
    /// `MEM_LOAD_NODE`.
    pub const MEM_LOAD: i32 = 2;
    /// `MEM_STORE_NODE`.
    pub const MEM_STORE: i32 = 3;
    /// `COMP_NODE`.
    pub const COMP: i32 = 4;
    /// `COMM_SEND_NODE`.
    pub const COMM_SEND: i32 = 5;
    /// `COMM_RECV_NODE`.
    pub const COMM_RECV: i32 = 6;
    /// `COMM_COLL_NODE`.
    pub const COMM_COLL: i32 = 7;
}

/// `CollectiveCommType`'s names, by value.
pub const COMM_TYPES: [&str; 10] = [
    "ALL_REDUCE",
    "REDUCE",
    "ALL_GATHER",
    "GATHER",
    "SCATTER",
    "BROADCAST",
    "ALL_TO_ALL",
    "REDUCE_SCATTER",
    "REDUCE_SCATTER_BLOCK",
    "BARRIER",
];

/// `NodeType`'s names, by value.
pub const NODE_TYPES: [&str; 8] = [
    "INVALID_NODE",
    "METADATA_NODE",
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "COMM_COLL_NODE",
];

impl AttributeProto {
    /// The value as an integer, whichever integer type (or bool) it was written as: ASTRA-sim's
    /// feeder converts between integer types the same way.
    pub fn integer(&self) -> Option<i128> {
        Some(match self.value.as_ref()? {
            Value::Int32Val(v) | Value::Sint32Val(v) | Value::Sfixed32Val(v) => *v as i128,
            Value::Int64Val(v) | Value::Sint64Val(v) | Value::Sfixed64Val(v) => *v as i128,
            Value::Uint32Val(v) | Value::Fixed32Val(v) => *v as i128,
            Value::Uint64Val(v) | Value::Fixed64Val(v) => *v as i128,
            Value::BoolVal(b) => *b as i128,
            _ => return None,
        })
    }

    /// The value as text, if it is a string.
    pub fn text(&self) -> Option<&str> {
        match self.value.as_ref()? {
            Value::StringVal(s) => Some(s),
            _ => None,
        }
    }
}

impl Node {
    /// The attribute named `name`, if the node has one.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attr.iter().find(|a| a.name == name)
    }

    /// The node type's name in the schema, or its number when the schema has none.
    pub fn type_name(&self) -> String {
        usize::try_from(self.r#type)
            .ok()
            .and_then(|t| NODE_TYPES.get(t))
            .map_or_else(|| self.r#type.to_string(), |n| n.to_string())
    }
}
