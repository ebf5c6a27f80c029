//! The streaming throttle (`language.md` §18): at most one preview compile per 250 ms while
//! a reply streams, then one authoritative final compile.
//!
//! The stream owns no timer: [`UiStream::update`] returns a preview when one is due now and
//! otherwise tells, through [`UiStream::deadline`], when the caller's timer should call
//! [`UiStream::flush`]. Any runtime (or a test with a hand-driven clock) can drive it.

use std::sync::Arc;

use ui_core::Clock;
use ui_core::text::utf16_len;

use crate::block::Block;
use crate::compile::CompileOptions;
use crate::compiler::UiCompiler;

/// One streaming preview.
#[derive(Debug, Clone)]
pub struct Preview {
    /// Length of the text compiled, in UTF-16 units.
    pub text_length: usize,
    /// The blocks of that text (unchanged fences are the same [`Arc`] as before).
    pub blocks: Vec<Arc<Block>>,
}

/// A throttled incremental compiler for one streaming reply (`UiStream`).
pub struct UiStream<'a> {
    compiler: UiCompiler,
    options: CompileOptions<'a>,
    clock: &'a dyn Clock,
    pending: Option<(String, Option<String>)>,
    last_compiled_at: Option<f64>,
    deadline: Option<f64>,
    closed: bool,
}

impl std::fmt::Debug for UiStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiStream")
            .field("last_compiled_at", &self.last_compiled_at)
            .field("deadline", &self.deadline)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl<'a> UiStream<'a> {
    /// A stream compiling with `options` (whose `is_final` is ignored) and reading `clock`
    /// for the throttle.
    pub fn new(options: CompileOptions<'a>, clock: &'a dyn Clock) -> Self {
        UiStream {
            compiler: UiCompiler::new(),
            options,
            clock,
            pending: None,
            last_compiled_at: None,
            deadline: None,
            closed: false,
        }
    }

    /// When the caller should call [`UiStream::flush`] (clock milliseconds), if a flush is
    /// scheduled.
    pub fn deadline(&self) -> Option<f64> {
        self.deadline
    }

    /// The reply grew to `text`. Returns a preview when one is due now; otherwise the
    /// text waits (newest wins) for the scheduled [`UiStream::flush`]. Ignored after
    /// [`UiStream::finish`] or [`UiStream::dispose`].
    pub fn update(&mut self, text: &str, latest_attachment: Option<&str>) -> Option<Preview> {
        if self.closed {
            return None;
        }
        self.pending = Some((text.to_owned(), latest_attachment.map(str::to_owned)));
        if self.deadline.is_some() {
            return None;
        }
        let now = self.clock.now_ms();
        let interval = self.options.reply_limits.stream_interval() as f64;
        let delay = match self.last_compiled_at {
            None => 0.0,
            Some(last) => (interval - (now - last)).max(0.0),
        };
        if delay <= 0.0 {
            self.flush()
        } else {
            self.deadline = Some(now + delay);
            None
        }
    }

    /// Compiles the newest pending text (the scheduled timer fired).
    pub fn flush(&mut self) -> Option<Preview> {
        self.deadline = None;
        if self.closed {
            return None;
        }
        let (text, latest) = self.pending.take()?;
        self.last_compiled_at = Some(self.clock.now_ms());
        let mut options = self.options.clone();
        options.is_final = false;
        options.latest_attachment = latest;
        let blocks = self.compiler.compile(&text, &options);
        Some(Preview {
            text_length: utf16_len(&text),
            blocks,
        })
    }

    /// The reply is complete: closes the stream and compiles `text` as final. The result
    /// is authoritative and never emitted as a preview.
    pub fn finish(&mut self, text: &str, latest_attachment: Option<&str>) -> Vec<Arc<Block>> {
        self.dispose();
        let mut options = self.options.clone();
        options.is_final = true;
        options.latest_attachment = latest_attachment.map(str::to_owned);
        let blocks = self.compiler.compile(text, &options);
        self.compiler.clear();
        blocks
    }

    /// Closes the stream: cancels the scheduled flush, drops pending text, clears the
    /// cache.
    pub fn dispose(&mut self) {
        self.closed = true;
        self.deadline = None;
        self.pending = None;
        self.compiler.clear();
    }
}
