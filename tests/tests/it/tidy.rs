//! Tidy checks that run inside `cargo test`: dependencies point down the layers that
//! ARCHITECTURE.md draws, only store/ touches SQLite, only the actor, simulation and server
//! crates use actix, every Rust file says what it is for, each crate's integration tests are one
//! binary (`tests/it/`), and actors' modules import each other one way (no cycle).

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
        "mcp" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
        ],
        "sim" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
            "seed-mcp",
        ],
        "server" => &[
            "seed-sim",
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
            "seed-mcp",
        ],
        "tests" => &[
            "seed-events",
            "seed-durable",
            "seed-providers",
            "seed-projections",
            "seed-store",
            "seed-actors",
            "seed-sim",
            "seed-mcp",
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

/// A file past about 800 lines holds two concepts in one room: it is split by concept, as the
/// house rule has it. The limit leaves a file room to grow a little past 800 before it must.
const LINES_IN_A_ROOM_MAX: usize = 900;

#[test]
fn no_rust_file_holds_two_rooms() {
    let mut files = Vec::new();
    for member in members() {
        rust_files(&workspace_root().join(member), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let n_lines = std::fs::read_to_string(path).ok()?.lines().count();
            (n_lines > LINES_IN_A_ROOM_MAX).then(|| format!("{} ({n_lines} lines)", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "past {LINES_IN_A_ROOM_MAX} lines, split by concept: {long:?}"
    );
}

/// Each crate's integration tests link into one binary, `tests/it/main.rs`, a module per suite:
/// cargo makes every other `tests/*.rs`, `tests/*/main.rs` and `[[test]]` a binary of its own,
/// each linking every dependency again (58 of them took 1.4 GB).
#[test]
fn each_crate_has_one_integration_test_binary() {
    let mut extra = Vec::new();
    for member in members() {
        let tests = workspace_root().join(&member).join("tests");
        for entry in std::fs::read_dir(&tests).into_iter().flatten().flatten() {
            let path = entry.path();
            let is_target = if path.is_dir() {
                path.join("main.rs").is_file() && entry.file_name() != "it"
            } else {
                path.extension().is_some_and(|ext| ext == "rs")
            };
            if is_target {
                extra.push(path.display().to_string());
            }
        }
        let manifest = read_toml(&workspace_root().join(&member).join("Cargo.toml"));
        for target in manifest
            .get("test")
            .and_then(|t| t.as_array())
            .into_iter()
            .flatten()
        {
            extra.push(format!("{member}/Cargo.toml [[test]] {target}"));
        }
    }
    assert!(
        extra.is_empty(),
        "test binaries besides tests/it/main.rs (make each a module of it): {extra:?}"
    );
}

/// The modules of actors/src a file belongs to, for the cycle check: the first segment of its
/// path (`turn/open.rs` and `turn.rs` are both `turn`; `verbs/read.rs` is `verbs`).
fn actor_module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file under actors/src");
    let first = relative
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The modules a file names through `crate::` paths (in `use` lines and in code), comments
/// left out. A simple scan, not a parser: every `crate::<name>` is an arrow to `<name>`.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            // `seed_actors::crate::` never occurs; `$crate::` and `some_crate::` are not ours.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.insert(name);
            }
        }
        // `use crate::{a, b::c}`: each name in the braces.
        if let Some(braces) = code.trim().strip_prefix("use crate::{") {
            for item in braces.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    named.insert(name);
                }
            }
        }
    }
    named
}

/// The cycles among actors' modules: for each module, whether it reaches itself through
/// the arrows of its files' `crate::` paths. Returns each cycle found as a path.
fn module_cycles(
    arrows: &std::collections::BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    let mut cycles = Vec::new();
    for start in arrows.keys() {
        // Breadth first from `start`, keeping each module's predecessor, until `start` again.
        let mut came_from: std::collections::BTreeMap<String, String> = Default::default();
        let mut frontier = vec![start.clone()];
        let mut closed = None;
        while closed.is_none() && !frontier.is_empty() {
            let mut next = Vec::new();
            for module in frontier {
                for target in arrows.get(&module).into_iter().flatten() {
                    if target == start {
                        closed = Some(module.clone());
                        break;
                    }
                    if !came_from.contains_key(target) {
                        came_from.insert(target.clone(), module.clone());
                        next.push(target.clone());
                    }
                }
                if closed.is_some() {
                    break;
                }
            }
            frontier = next;
        }
        if let Some(mut last) = closed {
            let mut cycle = vec![start.clone()];
            while &last != start {
                cycle.insert(1, last.clone());
                last = came_from[&last].clone();
            }
            cycle.push(start.clone());
            cycles.push(cycle);
        }
    }
    cycles
}

/// actors' modules depend one way: no module reaches itself through `crate::` paths. Modules
/// are actors/src's top-level ones (a folder's files belong to their module; arrows inside a
/// module are not checked). A session and the queue hold each other's addresses through the
/// messages in `messages` and `Recipient`s, so even that pair is no cycle.
#[test]
fn actors_modules_depend_one_way() {
    let src = workspace_root().join("actors").join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut arrows: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for file in &files {
        let module = actor_module_of(&src, file);
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let named = arrows.entry(module.clone()).or_default();
        named.extend(
            crate_paths(&text)
                .into_iter()
                .filter(|name| *name != module),
        );
    }
    assert!(arrows.len() > 10, "found only {} modules", arrows.len());
    // Names that are not modules (a re-export at the crate root, `crate::Runtime`) are no
    // arrows between modules.
    let modules: BTreeSet<String> = arrows.keys().cloned().collect();
    for named in arrows.values_mut() {
        named.retain(|name| modules.contains(name));
    }
    let cycles = module_cycles(&arrows);
    assert!(
        cycles.is_empty(),
        "actors' modules depend in a cycle (make one side take a message, a Recipient or a \
         module of their own): {cycles:?}"
    );
}

#[test]
fn the_module_scan_sees_paths_and_cycles() {
    let named = crate_paths(
        "use crate::bus::{Notification, SeqRange};\n\
         use crate::{env, verb::Verb};\n\
         let x = crate::queue::Slots::new(1, 2); // crate::not_this\n\
         macro_rules! m { () => { $crate::ignored } }\n",
    );
    let named: Vec<_> = named.into_iter().collect();
    assert_eq!(named, ["bus", "env", "queue", "verb"]);
    let arrows = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .into_iter()
        .fold(
            std::collections::BTreeMap::<String, BTreeSet<String>>::new(),
            |mut arrows, (from, to)| {
                arrows
                    .entry(from.to_owned())
                    .or_default()
                    .insert(to.to_owned());
                arrows.entry(to.to_owned()).or_default();
                arrows
            },
        );
    let cycles = module_cycles(&arrows);
    assert_eq!(cycles[0], ["a", "b", "c", "a"]);
    assert_eq!(cycles.len(), 3, "{cycles:?}");
}
