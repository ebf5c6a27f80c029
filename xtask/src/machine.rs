//! The machine's state around `cargo xtask bench`: the load average when the benches begin
//! and how busy the CPUs were over the run, with the share the hypervisor took (steal).
//!
//! Wall-clock figures on the shared 2-core machines move by a third with what else runs and
//! with the host under the virtual machine, so a bench table is read beside the state it
//! was measured in. Linux only (`/proc/loadavg`, `/proc/stat`); elsewhere the line says the
//! state is unknown.

/// CPU time from the `cpu` line of `/proc/stat`, in clock ticks summed over the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    /// Every tick counted: user, nice, system, idle, iowait, irq, softirq and steal.
    total: u64,
    /// Ticks neither idle nor waiting for I/O (steal included: the CPU was not ours to idle).
    busy: u64,
    /// Ticks the hypervisor ran something else while this machine wanted the CPU.
    steal: u64,
}

/// The `cpu` line of a `/proc/stat` text.
pub(crate) fn cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user and nice).
    let field = |i: usize| ticks.get(i).copied().unwrap_or(0);
    if ticks.len() < 4 {
        return None;
    }
    let total: u64 = (0..8).map(field).sum();
    Some(CpuTimes {
        total,
        busy: total - field(3) - field(4),
        steal: field(7),
    })
}

/// The 1, 5 and 15 minute load averages of a `/proc/loadavg` text.
pub(crate) fn load_average(loadavg: &str) -> Option<[f64; 3]> {
    let mut fields = loadavg.split_whitespace().map(str::parse::<f64>);
    let mut next = || fields.next()?.ok();
    Some([next()?, next()?, next()?])
}

/// The machine's state at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot {
    load: Option<[f64; 3]>,
    cpu: Option<CpuTimes>,
}

impl Snapshot {
    /// The state now (nothing where `/proc` cannot be read).
    pub(crate) fn take() -> Snapshot {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        Snapshot {
            load: read("/proc/loadavg").as_deref().and_then(load_average),
            cpu: read("/proc/stat").as_deref().and_then(cpu_times),
        }
    }
}

/// One line on the state from `start` (when the benches began) to `end`, for the bench table.
pub(crate) fn summary(start: &Snapshot, end: &Snapshot) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let mut out = format!("Machine: {cpus} CPUs");
    match start.load {
        Some([one, five, fifteen]) => out.push_str(&format!(
            "; load average {one:.2} / {five:.2} / {fifteen:.2} (1, 5, 15 min) as the benches began"
        )),
        None => out.push_str("; load average unknown"),
    }
    match (start.cpu, end.cpu) {
        (Some(a), Some(b)) if b.total > a.total => {
            let share = |x: u64, y: u64| 100.0 * (y - x) as f64 / (b.total - a.total) as f64;
            out.push_str(&format!(
                "; over the run the CPUs were {:.0}% busy and the hypervisor took {:.1}% (steal, \
                 `/proc/stat`)",
                share(a.busy, b.busy),
                share(a.steal, b.steal)
            ));
        }
        _ => out.push_str("; CPU time over the run unknown"),
    }
    out.push_str(
        ". The targets were set for a quiet machine: read figures beside the in-process \
         `compile_block/stats100` median above (33–36 µs when quiet).\n\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_gives_busy_and_steal_ticks() {
        let stat = "cpu  100 5 50 800 10 3 2 30 7 0\ncpu0 50 2 25 400 5 1 1 15 3 0\nintr 1\n";
        assert_eq!(
            cpu_times(stat),
            Some(CpuTimes {
                total: 1000,
                busy: 190,
                steal: 30,
            })
        );
        // An old kernel without steal, and a text without the line.
        assert_eq!(
            cpu_times("cpu 1 2 3 4 5\n"),
            Some(CpuTimes {
                total: 15,
                busy: 6,
                steal: 0,
            })
        );
        assert_eq!(cpu_times("intr 1\n"), None);
        assert_eq!(cpu_times("cpu 1 x 3 4\n"), None);
    }

    #[test]
    fn the_load_average_is_the_first_three_fields() {
        assert_eq!(
            load_average("0.46 1.40 1.69 1/80 13722\n"),
            Some([0.46, 1.40, 1.69])
        );
        assert_eq!(load_average("0.46 1.40\n"), None);
    }

    #[test]
    fn the_summary_gives_shares_of_the_ticks_between_the_snapshots() {
        let at = |total, busy, steal| Snapshot {
            load: Some([0.5, 1.0, 1.5]),
            cpu: Some(CpuTimes { total, busy, steal }),
        };
        let line = summary(&at(1000, 100, 10), &at(2000, 800, 30));
        assert!(line.contains("load average 0.50 / 1.00 / 1.50"), "{line}");
        assert!(line.contains("70% busy"), "{line}");
        assert!(line.contains("took 2.0% (steal"), "{line}");
        let unknown = Snapshot {
            load: None,
            cpu: None,
        };
        let line = summary(&unknown, &unknown);
        assert!(line.contains("load average unknown"), "{line}");
        assert!(line.contains("CPU time over the run unknown"), "{line}");
    }
}
