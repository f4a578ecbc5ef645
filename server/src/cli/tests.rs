//! The command line's tests: what `seed serve` takes, its defaults, and the values it refuses.

use super::*;

/// `seed serve ARGS`, parsed.
fn parse_serve(args: &[&str]) -> Result<Command, clap::Error> {
    Cli::try_parse_from(["seed", "serve"].iter().chain(args)).map(|cli| cli.command)
}

/// `seed serve ARGS` is refused, and the refusal names `flag`.
fn assert_serve_refuses(args: &[&str], flag: &str) {
    let refused = parse_serve(args).err().map(|e| e.to_string());
    assert!(
        refused.as_deref().is_some_and(|e| e.contains(flag)),
        "{args:?}: {refused:?}"
    );
}

#[test]
fn serve_takes_the_restarts_a_turn_may_have_and_defaults_to_the_runtimes() {
    let restarts_max = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            run_restarts_max, ..
        }) => Some(run_restarts_max),
        _ => None,
    };
    assert_eq!(
        restarts_max(&[]),
        Some(seed_actors::RuntimeSettings::default().run_restarts_max)
    );
    assert_eq!(restarts_max(&["--run-restarts-max", "1000"]), Some(1000));
    assert_serve_refuses(&["--run-restarts-max=-1"], "--run-restarts-max");
}

#[test]
fn serve_takes_the_live_interval_and_a_crash_point_it_knows() {
    let taken = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            live_interval_ms,
            crash_at,
            ..
        }) => Some((live_interval_ms, crash_at)),
        _ => None,
    };
    assert_eq!(taken(&[]), Some((100, None)));
    assert_eq!(
        taken(&[
            "--live-interval-ms",
            "20",
            "--crash-at",
            "continuation.after_create"
        ]),
        Some((20, Some("continuation.after_create".to_owned())))
    );
    assert_serve_refuses(&["--live-interval-ms", "0"], "--live-interval-ms");
    assert_serve_refuses(&["--crash-at", "nowhere"], "--crash-at");
}

#[test]
fn serve_takes_the_account_quotas_with_defaults() {
    let quotas = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            account_sessions_max,
            account_memory_files_max,
            account_memory_bytes_max,
            ..
        }) => Some(seed_store::Quotas {
            sessions_max: account_sessions_max,
            memory_files_max: account_memory_files_max,
            memory_bytes_max: account_memory_bytes_max,
        }),
        _ => None,
    };
    assert_eq!(quotas(&[]), Some(seed_store::Quotas::default()));
    assert_eq!(
        quotas(&[
            "--account-sessions-max",
            "3",
            "--account-memory-files-max",
            "4",
            "--account-memory-bytes-max",
            "5"
        ]),
        Some(seed_store::Quotas {
            sessions_max: 3,
            memory_files_max: 4,
            memory_bytes_max: 5,
        })
    );
    assert_serve_refuses(
        &["--account-sessions-max", "many"],
        "--account-sessions-max",
    );
}

#[test]
fn serve_takes_the_attachment_limits_with_defaults() {
    let limits = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            attachment_bytes_max,
            account_attachments_bytes_max,
            ..
        }) => Some((attachment_bytes_max, account_attachments_bytes_max)),
        _ => None,
    };
    assert_eq!(
        limits(&[]),
        Some((
            crate::api::ATTACHMENT_BYTES_MAX_DEFAULT,
            crate::api::ACCOUNT_ATTACHMENTS_BYTES_MAX_DEFAULT
        ))
    );
    assert_eq!(
        limits(&[
            "--attachment-bytes-max",
            "100",
            "--account-attachments-bytes-max",
            "1000"
        ]),
        Some((100, 1000))
    );
    assert_serve_refuses(
        &["--account-attachments-bytes-max=-1"],
        "--account-attachments-bytes-max",
    );
    let help = Cli::try_parse_from(["seed", "serve", "--help"])
        .err()
        .map(|help| help.to_string())
        .unwrap_or_default();
    assert!(help.contains("--attachment-bytes-max"), "{help}");
    assert!(help.contains("--account-attachments-bytes-max"), "{help}");
}

#[test]
fn serve_takes_the_client_limits_with_defaults_that_hold_200_sockets_of_one_token() {
    let limits = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            ws_queue_max,
            ws_per_account_max,
            ws_per_token_max,
            ws_ping_interval_ms,
            header_timeout_ms,
            body_timeout_ms,
            connections_max,
            token_ttl_ms,
            tokens_per_account_max,
            ..
        }) => Some([
            u64::from(ws_queue_max),
            u64::from(ws_per_account_max),
            u64::from(ws_per_token_max),
            ws_ping_interval_ms,
            header_timeout_ms,
            body_timeout_ms,
            u64::from(connections_max),
            token_ttl_ms,
            u64::from(tokens_per_account_max),
        ]),
        _ => None,
    };
    let defaults = limits(&[]).expect("parses");
    assert_eq!(
        defaults,
        [256, 512, 256, 30_000, 5_000, 60_000, 1024, 3_600_000, 256]
    );
    // The load check holds 200 idle sockets of one account and one token, and 50 slow
    // bodies, beside its clients.
    assert!(defaults[1] >= 200 && defaults[2] >= 200 && defaults[6] >= 250 + 64);
    assert_eq!(
        limits(&[
            "--ws-queue-max=1",
            "--ws-per-account-max=2",
            "--ws-per-token-max=3",
            "--ws-ping-interval-ms=40",
            "--header-timeout-ms=5",
            "--body-timeout-ms=6",
            "--connections-max=7",
            "--token-ttl-ms=1000",
            "--tokens-per-account-max=9",
        ]),
        Some([1, 2, 3, 40, 5, 6, 7, 1000, 9])
    );
    for flag in [
        "--ws-queue-max",
        "--ws-per-account-max",
        "--ws-per-token-max",
        "--connections-max",
        "--tokens-per-account-max",
    ] {
        assert_serve_refuses(&[&format!("{flag}=0")], flag);
    }
    assert_serve_refuses(&["--token-ttl-ms=999"], "--token-ttl-ms");
    let help = Cli::try_parse_from(["seed", "serve", "--help"])
        .err()
        .map(|help| help.to_string())
        .unwrap_or_default();
    for flag in ["--ws-queue-max", "--body-timeout-ms", "--connections-max"] {
        assert!(help.contains(flag), "{help}");
    }
}

#[test]
fn connections_are_shared_out_over_the_workers() {
    use crate::serve::connections_per_worker;
    assert_eq!(connections_per_worker(1024, 2), 512);
    assert_eq!(connections_per_worker(5, 2), 3);
    assert_eq!(connections_per_worker(1, 4), 1);
    assert_eq!(connections_per_worker(7, 0), 7);
}

#[test]
fn serve_takes_the_runs_in_flight_and_refuses_none() {
    let runs_max = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            interactive_runs_max,
            background_runs_max,
            ..
        }) => Some((interactive_runs_max, background_runs_max)),
        _ => None,
    };
    assert_eq!(runs_max(&[]), Some((64, 16)));
    assert_eq!(
        runs_max(&[
            "--interactive-runs-max",
            "1024",
            "--background-runs-max",
            "4"
        ]),
        Some((1024, 4))
    );
    assert_serve_refuses(&["--interactive-runs-max", "0"], "--interactive-runs-max");
}

#[test]
fn serve_takes_each_accounts_share_of_the_runs_in_flight_and_refuses_none() {
    let share = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve {
            account_runs_max, ..
        }) => Some(account_runs_max),
        _ => None,
    };
    assert_eq!(share(&[]), Some(None), "a quarter of the interactive slots");
    assert_eq!(share(&["--account-runs-max", "8"]), Some(Some(8)));
    assert_serve_refuses(&["--account-runs-max", "0"], "--account-runs-max");
    assert_eq!(seed_actors::account_runs_max_default(64), 16);
    assert_eq!(seed_actors::account_runs_max_default(3), 1, "at least one");
}

#[test]
fn serve_takes_the_writer_lanes_with_two_by_default() {
    let lanes = |args: &[&str]| match parse_serve(args).ok() {
        Some(Command::Serve { writer_lanes, .. }) => Some(writer_lanes),
        _ => None,
    };
    assert_eq!(lanes(&[]), Some(2));
    assert_eq!(
        usize::from(lanes(&[]).expect("parses")),
        seed_store::Config::new("store.db").writer_lanes,
        "the flag's default is the store's"
    );
    assert_eq!(lanes(&["--writer-lanes", "4"]), Some(4));
    assert_serve_refuses(&["--writer-lanes", "0"], "--writer-lanes");
    assert_serve_refuses(&["--writer-lanes", "65"], "--writer-lanes");
}
