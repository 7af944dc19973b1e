//! The one writer of Prometheus text (exposition format 0.0.4) for everything the agent exports:
//! the policy's classes, the fleet's figures and the flows' telemetry. A family is its `# HELP`
//! and `# TYPE` lines, then its samples; label values are escaped as the format asks.

use std::fmt::{Display, Write};

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets with the agent's maps).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// Prometheus text being written.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family: its help and type lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample of `name` with its labels (none: an empty slice).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) -> &mut Self {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(self.text, "{sep}{k}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
        self
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Display) -> &mut Self {
        self.family(name, kind, help).sample(name, &[], value)
    }

    /// The text written so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text, ending the exposition.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// A label value as the format quotes it: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_samples_follow_the_text_format() {
        let mut e = Exposition::new();
        e.family("sluice_x_total", Kind::Counter, "Things\ncounted.").sample("sluice_x_total", &[("class", "a\"b"), ("cc", "c\\d")], 3);
        e.single("sluice_y", Kind::Gauge, "One.", 1.5);
        assert_eq!(
            e.into_text(),
            "# HELP sluice_x_total Things\\ncounted.\n# TYPE sluice_x_total counter\nsluice_x_total{class=\"a\\\"b\",cc=\"c\\\\d\"} 3\n\
             # HELP sluice_y One.\n# TYPE sluice_y gauge\nsluice_y 1.5\n"
        );
    }
}
