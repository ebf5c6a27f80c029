//! The driver's standard input: a read that watches the pipe for a moment before it sleeps.
//!
//! A host that sends its next request as soon as it has an answer would otherwise find the
//! driver asleep in `read`, and waking a sleeping process is slow where it matters most: on
//! virtual machines whose idle CPUs halt, the wake-up of each side of a round trip costs
//! tens of microseconds (on the 2-core machine of the benches, a 75-byte request and its
//! answer took 55–67 µs over the pipe, 16–21 µs with this wait; a `stats100` compile
//! 145–223 µs against 100–170 µs in alternating runs; see `benches/NOTES.md`).
//!
//! So [`WatchedInput`] first polls the descriptor, for at most its window, and only while
//! that pays: a wait whose request came later than the window (a host that parses each
//! answer before it asks again, or one that pauses) makes the next wait sleep at once, and a
//! wait that slept but was answered within the window turns the watching back on. The cost
//! is bounded by the window: at most one window of one CPU per request, and none while the
//! host is slower than the window. `uiblocks driver --watch 0` turns it off.

use std::io::{self, Read};
use std::time::{Duration, Instant};

/// A reader that polls its descriptor for up to a window before a read that would sleep.
///
/// It must be the only reader of the descriptor and hold no buffer of its own (a
/// [`std::fs::File`], not [`std::io::Stdin`]): bytes buffered above it are for the caller to
/// use first, which [`std::io::BufReader`] does.
#[derive(Debug)]
pub struct WatchedInput<R> {
    inner: R,
    window: Duration,
    /// Whether the next wait polls first: the last wait ended within the window.
    watch: bool,
}

impl<R> WatchedInput<R> {
    /// Reads `inner`, polling it for up to `window` before sleeping (zero: never).
    pub fn new(inner: R, window: Duration) -> Self {
        WatchedInput {
            inner,
            window,
            watch: !window.is_zero(),
        }
    }

    /// Whether the next read polls before it sleeps.
    #[cfg(test)]
    fn watching(&self) -> bool {
        self.watch
    }

    /// Records how long a wait took: the next one polls when this one ended within the
    /// window, i.e. when polling would have caught the request.
    fn waited(&mut self, took: Duration) {
        self.watch = !self.window.is_zero() && took < self.window;
    }
}

#[cfg(unix)]
impl<R: Read + std::os::fd::AsFd> Read for WatchedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.window.is_zero() {
            return self.inner.read(buf);
        }
        let started = Instant::now();
        if self.watch {
            while !readable(&self.inner)? && started.elapsed() < self.window {
                std::hint::spin_loop();
            }
        }
        let read = self.inner.read(buf)?;
        self.waited(started.elapsed());
        Ok(read)
    }
}

/// Without `poll(2)`, reads sleep at once.
#[cfg(not(unix))]
impl<R: Read> Read for WatchedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

/// Whether a read of `fd` would return at once: bytes, the end of input or an error.
#[cfg(unix)]
fn readable(fd: &impl std::os::fd::AsFd) -> io::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(ready) => Ok(ready > 0),
        // A signal: the read after the loop decides.
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    #[test]
    fn a_wait_that_would_have_been_caught_turns_watching_on_and_a_late_one_off() {
        let mut input = WatchedInput::new(std::io::empty(), Duration::from_micros(100));
        assert!(input.watching());
        input.waited(Duration::from_micros(400));
        assert!(!input.watching(), "the host is slower than the window");
        input.waited(Duration::from_micros(40));
        assert!(input.watching(), "polling would have caught that request");
        input.waited(Duration::from_micros(100));
        assert!(!input.watching(), "a wait of the whole window is a miss");
        let mut off = WatchedInput::new(std::io::empty(), Duration::ZERO);
        assert!(!off.watching());
        off.waited(Duration::ZERO);
        assert!(!off.watching(), "a zero window never polls");
    }

    /// Lines written in pieces, with pauses longer and shorter than the window, come out
    /// whole and in order, and the end of input ends the reading.
    #[test]
    fn lines_pass_through_whatever_the_timing() {
        let (reader, mut writer) = std::io::pipe().expect("a pipe");
        let window = Duration::from_micros(200);
        let mut lines = BufReader::with_capacity(16, WatchedInput::new(reader, window));
        let sender = std::thread::spawn(move || -> io::Result<()> {
            for (i, pause) in [0_u64, 1_000, 50, 5_000, 0].into_iter().enumerate() {
                std::thread::sleep(Duration::from_micros(pause));
                writer.write_all(format!("{{\"request\":{i},\"pad\":\"").as_bytes())?;
                writer.write_all(format!("{}\"}}\n", "x".repeat(40)).as_bytes())?;
            }
            Ok(())
        });
        let mut line = String::new();
        for i in 0..5 {
            line.clear();
            assert!(lines.read_line(&mut line).expect("a line") > 0);
            let expected = format!("{{\"request\":{i},\"pad\":\"{}\"}}\n", "x".repeat(40));
            assert_eq!(line, expected);
        }
        sender.join().expect("the writer").expect("the writes");
        line.clear();
        assert_eq!(lines.read_line(&mut line).expect("the end"), 0);
    }
}
