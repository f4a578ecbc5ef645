//! The `seed` binary: the command line in `seed_server::cli`.

/// mimalloc rather than the system's allocator: a turn allocates and frees many small values
/// (JSON, messages, rows), which glibc's malloc served at a quarter of the runtime's CPU, with
/// its heap trimmed and regrown between turns (docs/design/group-commit.md has the figures).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match seed_server::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("seed: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
