//! Progress lines during one long measurement.
//!
//! [`Ticker`] runs beside a measurement ([`measure`](crate::measure::measure) starts one for
//! each) on a thread of its own that sleeps for [`INTERVAL`] at a time and, each time it wakes
//! while the measurement still runs, prints one line on stderr: what is measured, which repeat
//! is running and the time since the measurement started. The measured code does nothing for
//! it: the repeat loop stores the repeat number between runs, outside the timed region, and
//! the thread wakes once per interval, so a run shorter than the interval prints nothing. stdout
//! (the table or the JSON lines) never carries these lines.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a running measurement says so. Long enough that a measurement of a few seconds
/// (most of them) stays quiet and that the ticker's wake-ups, one per interval, are nothing
/// beside the run; short enough that a sweep of minutes shows it is alive and how far it got.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// The progress reporter of one measurement; dropping it stops and joins its thread.
pub struct Ticker {
    /// The repeat running now, counted from 1 (0: none started yet).
    repeat: Arc<AtomicUsize>,
    /// Dropped to wake the thread and tell it to end.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts reporting on stderr every [`INTERVAL`] for the measurement `label` of `repeats`
    /// runs.
    pub fn start(label: String, repeats: usize) -> Ticker {
        Ticker::with(INTERVAL, label, repeats, |line| eprintln!("{line}"))
    }

    /// [`Ticker::start`] with another interval and another place for the lines.
    fn with(
        interval: Duration,
        label: String,
        repeats: usize,
        mut emit: impl FnMut(String) + Send + 'static,
    ) -> Ticker {
        let repeat = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = mpsc::channel::<()>();
        let seen = Arc::clone(&repeat);
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("bench-progress".into())
            .spawn(move || {
                // Nothing is ever sent: the sender's drop ends the wait with `Disconnected`.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    let now = seen.load(Ordering::Relaxed);
                    emit(line(&label, now, repeats, started.elapsed()));
                }
            });
        // Without a thread there is no progress, and the measurement itself is unaffected.
        let thread = thread.ok();
        Ticker {
            repeat,
            stop: Some(stop),
            thread,
        }
    }

    /// Notes that repeat `n` (from 1) starts; call it between runs, never inside one.
    pub fn repeat(&self, n: usize) {
        self.repeat.store(n, Ordering::Relaxed);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One progress line.
fn line(label: &str, repeat: usize, repeats: usize, elapsed: Duration) -> String {
    format!(
        "progress: {label}: repeat {repeat} of {repeats}, {} s since the measurement started",
        elapsed.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_measurement_the_repeat_and_the_time() {
        let l = line(
            "ring work-stealing workers=2",
            2,
            3,
            Duration::from_millis(10_400),
        );
        assert_eq!(
            l,
            "progress: ring work-stealing workers=2: repeat 2 of 3, 10 s since the measurement started"
        );
    }

    #[test]
    fn a_ticker_reports_the_current_repeat_until_dropped() {
        let (tx, rx) = mpsc::channel();
        let ticker = Ticker::with(Duration::from_millis(1), "x".into(), 3, move |l| {
            let _ = tx.send(l);
        });
        ticker.repeat(2);
        // The first line may predate `repeat(2)`; wait (with a watchdog) for one that follows it.
        let watchdog = Duration::from_secs(60);
        let mut got = rx.recv_timeout(watchdog).expect("a progress line");
        while !got.contains("repeat 2 of 3") {
            got = rx.recv_timeout(watchdog).expect("a progress line");
        }
        assert!(got.starts_with("progress: x: repeat 2 of 3, "), "{got}");
        drop(ticker);
        // Dropping joined the thread, which owned the only sender: the channel is closed.
        while rx.try_recv().is_ok() {}
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
    }

    #[test]
    fn a_ticker_dropped_before_its_interval_says_nothing() {
        let (tx, rx) = mpsc::channel();
        let ticker = Ticker::with(Duration::from_secs(3600), "x".into(), 1, move |l| {
            let _ = tx.send(l);
        });
        ticker.repeat(1);
        drop(ticker);
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
    }
}
