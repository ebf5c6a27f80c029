//! The `uiblocks driver` command's loop: one request per line of standard input, one answer
//! per line of standard output (`driver.md`). The answers are ui-driver's
//! ([`ui_driver::answer_line`]), the same bytes `@uiblocks/core`'s `driver.mjs` writes. The
//! command reads its standard input through a [`WatchedInput`]: see [`input`] for why it
//! polls before it sleeps.

use std::io::{BufRead, Write};

pub mod input;

pub use input::WatchedInput;
pub use ui_driver::{handle, handle_line};

/// Runs the driver over `input` until it ends, writing one answer per request line.
///
/// Each answer is written into one buffer and sent with a single `write_all` and one flush,
/// so a host reading the pipe sees whole lines at once.
///
/// # Errors
/// Only I/O errors of `input` or `output`.
pub fn run(mut input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    let mut line = String::with_capacity(64 * 1024);
    let mut buffer = Vec::with_capacity(64 * 1024);
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        // The line without its line feed, as `BufRead::lines` gives it (error messages
        // count lines and columns).
        let text = line.strip_suffix('\n').unwrap_or(&line);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.trim().is_empty() {
            continue;
        }
        buffer.clear();
        // The request and its answer are dropped after the answer is sent: freeing the
        // compiled blocks then overlaps with the host reading the answer.
        ui_driver::answer_line_then(text, &mut buffer, |answer| {
            answer.push(b'\n');
            output.write_all(answer)?;
            output.flush()
        })?;
    }
}
