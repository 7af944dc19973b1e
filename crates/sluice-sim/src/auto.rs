//! A setting written as a value or as `"auto"`, which sluice then derives from the network.

use serde::{Deserialize, Serialize};

/// A value, or `"auto"` for one derived where it is used.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Auto<T> {
    /// Derived from the network.
    #[default]
    Auto,
    /// As written.
    Set(T),
}

impl<T: Copy> Auto<T> {
    /// The value written, or `derived`.
    pub fn or(self, derived: T) -> T {
        match self {
            Auto::Auto => derived,
            Auto::Set(v) => v,
        }
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Auto<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = toml::Value::deserialize(d)?;
        if v.as_str() == Some("auto") {
            return Ok(Auto::Auto);
        }
        T::deserialize(v)
            .map(Auto::Set)
            .map_err(|e| serde::de::Error::custom(format!("{}; or \"auto\" to derive it from the network", e.to_string().trim_end())))
    }
}

impl<T: Serialize> Serialize for Auto<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Auto::Auto => s.serialize_str("auto"),
            Auto::Set(v) => v.serialize(s),
        }
    }
}
