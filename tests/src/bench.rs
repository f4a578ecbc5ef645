//! Rows and reports of the bench harness (`src/bin/bench.rs`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// One line of a suite's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// The raw SQLite floor this row is measured against, in the same unit and run.
    pub floor: f64,
    /// `value / floor`: the figure that counts.
    pub ratio: f64,
}

impl Row {
    /// A row measured against `floor`.
    pub fn ratio(name: &str, value: f64, unit: &str, floor: f64) -> Row {
        Row {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            floor,
            ratio: if floor > 0.0 { value / floor } else { 0.0 },
        }
    }

    /// The floor itself, for the record: ratio 1.
    pub fn floor(name: &str, value: f64) -> Row {
        Row::ratio(name, value, "commits/s", value)
    }
}

/// The report as a plain-text table.
pub fn table(rows: &[Row]) -> String {
    let name_width = rows
        .iter()
        .map(|row| row.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<name_width$}  {:>12}  {:<10}  {:>12}  {:>6}\n",
        "name", "value", "unit", "floor", "ratio"
    );
    for row in rows {
        out.push_str(&format!(
            "{:<name_width$}  {:>12.0}  {:<10}  {:>12.0}  {:>6.2}\n",
            row.name, row.value, row.unit, row.floor, row.ratio
        ));
    }
    out
}

/// Writes `target/bench/SUITE.json` and returns its path.
pub fn write_report(suite: &str, rows: &[Row]) -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{suite}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(rows)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_carry_their_ratio_and_print_as_a_table() {
        let rows = [
            Row::floor("floor normal", 40_000.0),
            Row::ratio("store sequential", 36_000.0, "commits/s", 40_000.0),
        ];
        assert_eq!(rows[1].ratio, 0.9);
        let table = table(&rows);
        assert!(table.contains("store sequential"), "{table}");
        assert!(table.contains("0.90"), "{table}");
        let json = serde_json::to_value(&rows[1]).expect("serializable");
        assert_eq!(
            json,
            serde_json::json!({
                "name": "store sequential", "value": 36000.0, "unit": "commits/s",
                "floor": 40000.0, "ratio": 0.9
            })
        );
    }
}
