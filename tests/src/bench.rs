//! Rows and reports of the bench harness (`src/bin/bench/main.rs`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// One line of a suite's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// The reference this row is measured against, in the same unit and run (the raw SQLite
    /// floor, or the suite's smallest case); `None` for a figure that has none.
    pub floor: Option<f64>,
    /// `value / floor`: the figure that counts; `None` without a floor.
    pub ratio: Option<f64>,
}

impl Row {
    /// A row measured against `floor`, a reference measured in the same run.
    pub fn ratio(name: &str, value: f64, unit: &str, floor: f64) -> Row {
        Row {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            floor: Some(floor),
            ratio: Some(if floor > 0.0 { value / floor } else { 0.0 }),
        }
    }

    /// The floor itself, for the record: ratio 1.
    pub fn floor(name: &str, value: f64) -> Row {
        Row::ratio(name, value, "commits/s", value)
    }

    /// A figure with no reference measured in the same run (a latency, memory per session, a
    /// time against a budget): it prints no ratio, rather than one fixed by construction.
    pub fn figure(name: &str, value: f64, unit: &str) -> Row {
        Row {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            floor: None,
            ratio: None,
        }
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
        let floor = row
            .floor
            .map_or("\u{2014}".to_owned(), |floor| format!("{floor:.0}"));
        let ratio = row
            .ratio
            .map_or("\u{2014}".to_owned(), |ratio| format!("{ratio:.2}"));
        out.push_str(&format!(
            "{:<name_width$}  {:>12.0}  {:<10}  {:>12}  {:>6}\n",
            row.name, row.value, row.unit, floor, ratio
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
        assert_eq!(rows[1].ratio, Some(0.9));
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

    #[test]
    fn a_figure_prints_no_ratio() {
        let row = Row::figure("service 1 clients p50", 1.2, "ms");
        let table = table(std::slice::from_ref(&row));
        let line = table.lines().nth(1).expect("the row");
        assert!(line.ends_with("\u{2014}       \u{2014}"), "{line:?}");
        assert_eq!(
            serde_json::to_value(&row).expect("serializable"),
            serde_json::json!({
                "name": "service 1 clients p50", "value": 1.2, "unit": "ms",
                "floor": null, "ratio": null
            })
        );
    }
}
