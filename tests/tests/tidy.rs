//! Tidy checks that run inside `cargo test`: dependencies point down the layers that
//! ARCHITECTURE.md draws, only store/ touches SQLite, only the actor, simulation and server
//! crates use actix, and every Rust file says what it is for.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

/// The workspace's member folders, from the root Cargo.toml.
fn members() -> Vec<String> {
    let root: toml::Table = read_toml(&workspace_root().join("Cargo.toml"));
    root["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|member| member.as_str().expect("member name").to_owned())
        .collect()
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every dependency a member names, in any dependency table.
fn dependencies(member: &str) -> BTreeSet<String> {
    let manifest = read_toml(&workspace_root().join(member).join("Cargo.toml"));
    let mut names = BTreeSet::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(deps) = manifest.get(table).and_then(|deps| deps.as_table()) {
            names.extend(deps.keys().cloned());
        }
    }
    names
}

/// Which of Seed's crates each crate may depend on: dependencies point down.
fn allowed_seed_dependencies(member: &str) -> Option<&'static [&'static str]> {
    Some(match member {
        "events" | "providers" => &[],
        "durable" => &["seed-providers"],
        "projections" => &["seed-events", "seed-durable", "seed-providers"],
        "store" => &["seed-events", "seed-durable"],
        "actors" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
        ],
        "sim" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
        ],
        "server" => &[
            "seed-sim",
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
        ],
        "tests" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
            "seed-sim",
            "seed-server",
        ],
        _ => return None,
    })
}

#[test]
fn dependencies_point_down() {
    for member in members() {
        let allowed = allowed_seed_dependencies(&member).unwrap_or_else(|| {
            panic!("crate {member} is not placed in a layer: add it to tidy.rs and ARCHITECTURE.md")
        });
        for dependency in dependencies(&member) {
            if dependency.starts_with("seed-") {
                assert!(
                    allowed.contains(&dependency.as_str()),
                    "{member} depends on {dependency}, which is not below it"
                );
            }
        }
    }
}

#[test]
fn only_store_touches_sqlite_and_only_the_shell_uses_actix() {
    for member in members() {
        for dependency in dependencies(&member) {
            if dependency.starts_with("rusqlite") {
                assert_eq!(member, "store", "{member} depends on {dependency}");
            }
            if dependency.starts_with("actix") {
                assert!(
                    ["actors", "sim", "server", "tests"].contains(&member.as_str()),
                    "{member} depends on {dependency}"
                );
            }
        }
    }
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_rust_file_says_what_it_is_for() {
    let mut files = Vec::new();
    for member in members() {
        rust_files(&workspace_root().join(member), &mut files);
    }
    assert!(files.len() > 10, "found only {} files", files.len());
    let missing: Vec<_> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .collect();
    assert!(missing.is_empty(), "files without a //! line: {missing:?}");
}
