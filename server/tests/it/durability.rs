//! `seed serve --synchronous`: the setting reaches the store and is said at start; a value it
//! does not know is refused with the ones it does.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::SEED;

/// The `durability:` line `seed serve` prints at start with `args`.
fn durability_line(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("SEED_PROVIDER", "scripted")
        .env_remove("SEED_SYNCHRONOUS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("seed serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .map(|line| line.expect("stdout"))
        .find(|line| line.starts_with("durability: "))
        .expect("seed serve says how durable a commit is");
    let _ = child.kill();
    let _ = child.wait();
    line
}

#[test]
fn the_synchronous_setting_is_taken_and_said() {
    assert!(
        durability_line(&[]).starts_with("durability: synchronous=normal: "),
        "the default"
    );
    let full = durability_line(&["--synchronous", "full"]);
    assert!(
        full.starts_with("durability: synchronous=full: ") && full.contains("power loss"),
        "{full}"
    );
}

#[test]
fn an_unknown_synchronous_value_is_refused_naming_the_known_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--synchronous", "extra"])
        .output()
        .expect("seed runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--synchronous") && stderr.contains("normal") && stderr.contains("full"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "nothing created");
}
