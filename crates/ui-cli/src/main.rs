//! `uiblocks`: the command-line entry point.
//!
//! - `uiblocks driver` — the JSON-lines driver on standard input and output (`driver.md`).

use std::io::{BufReader, stdin, stdout};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("driver") => {
            match ui_cli::driver::run(BufReader::new(stdin().lock()), stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("uiblocks driver: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("--version" | "-V") => {
            println!("uiblocks {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: uiblocks driver    JSON-lines driver on stdin/stdout");
            ExitCode::from(2)
        }
    }
}
