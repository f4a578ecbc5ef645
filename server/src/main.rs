//! The `seed` binary: the command line in `seed_server::cli`.

fn main() -> std::process::ExitCode {
    match seed_server::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("seed: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
