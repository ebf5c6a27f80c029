//! `uiblocks`: the command-line entry point. See `uiblocks --help`; the commands live in
//! [`ui_cli::commands`].

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = ui_cli::cli::Cli::parse();
    ui_cli::commands::run(cli.command)
}
