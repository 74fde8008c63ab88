//! What the benchmarks report: percentiles of latencies and a process's peak RSS; and the
//! one number a benchmark takes on its command line.

use std::{collections::BTreeMap, str::FromStr, time::Duration};

/// The benchmark's size (`cargo bench ... -- 300`): its first argument that parses, else
/// `default` (cargo passes `--bench` and filters too, so the others are skipped).
pub fn size_arg<T: FromStr>(default: T) -> T {
    std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(default)
}

/// Prints p50/p90/p99 of `values` in milliseconds after `label` padded to `width`; returns
/// the p50.
pub fn report_ms(label: &str, width: usize, values: &[Duration]) -> Duration {
    let ms = |p| percentile(values.to_vec(), p).as_secs_f64() * 1000.0;
    println!(
        "  {label:<width$} p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        ms(0.5),
        ms(0.9),
        ms(0.99)
    );
    percentile(values.to_vec(), 0.5)
}

/// The `p` quantile (0.0–1.0) of `values`, nearest rank; zero for none.
pub fn percentile(mut values: Vec<Duration>, p: f64) -> Duration {
    values.sort();
    let i = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(i).copied().unwrap_or_default()
}

/// Peak resident set size of process `pid` in MiB (`VmHWM`), 0 when unknown.
pub fn peak_rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmHWM:")
}

/// Resident set size of process `pid` now in MiB (`VmRSS`), 0 when unknown: next to the peak,
/// it tells what the process keeps from what a burst only passed through it.
pub fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

/// A `kB` line `field` of `/proc/<pid>/status` in MiB, 0 when unknown.
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on every Linux the
/// kernel's ABI allows for these files).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) every process on this machine has used so far, summed by a
/// label of its command line: the program's file name, with the port it serves for programs
/// several instances of which run (the host and the virtual API server).
pub fn cpu_seconds_by_program() -> BTreeMap<String, f64> {
    let mut total = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let (Ok(stat), Ok(cmdline)) = (
            std::fs::read_to_string(dir.join("stat")),
            std::fs::read(dir.join("cmdline")),
        ) else {
            continue;
        };
        if let Some(seconds) = cpu_seconds(&stat) {
            *total.entry(program_label(&cmdline)).or_default() += seconds;
        }
    }
    total
}

/// User + system time from a `/proc/<pid>/stat` line (fields 14 and 15; the command name in
/// field 2 may hold spaces and parentheses, so fields are counted from its last `)`).
fn cpu_seconds(stat: &str) -> Option<f64> {
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / TICKS_PER_SECOND)
}

/// `/proc/<pid>/cmdline` (NUL-separated) as a label: the program's file name, plus
/// `:<port>` of a `--secure-port` flag.
fn program_label(cmdline: &[u8]) -> String {
    let text = String::from_utf8_lossy(cmdline);
    let mut args = text.split('\0');
    let program = args.next().unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    let name = if name.is_empty() { "(kernel)" } else { name };
    match args.find_map(|a| a.strip_prefix("--secure-port=")) {
        Some(port) => format!("{name}:{port}"),
        None => name.to_string(),
    }
}

/// CPU seconds per program used between two [`cpu_seconds_by_program`] snapshots.
pub fn cpu_spent(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(label, t)| (label.clone(), t - before.get(label).unwrap_or(&0.0)))
        .filter(|(_, spent)| *spent > 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        let values: Vec<_> = (1..=100).map(ms).collect();
        assert_eq!(percentile(values.clone(), 0.5), ms(51));
        assert_eq!(percentile(values.clone(), 0.99), ms(99));
        assert_eq!(percentile(values, 1.0), ms(100));
        assert_eq!(percentile(Vec::new(), 0.5), Duration::ZERO);
    }

    #[test]
    fn this_process_has_a_peak_rss() {
        assert!(peak_rss_mib(std::process::id()) > 0.0);
    }

    /// Fields are counted after the command name, which may hold spaces and parentheses.
    #[test]
    fn cpu_time_is_user_plus_system_ticks() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 9";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(cpu_seconds("garbage"), None);
    }

    /// Programs are labelled by file name, and by port where several serve.
    #[test]
    fn programs_are_labelled_by_name_and_port() {
        let label = |s: &str| program_label(s.replace(' ', "\0").as_bytes());
        assert_eq!(label("/usr/bin/etcd --data-dir=/x"), "etcd");
        assert_eq!(
            label("/cache/kube-apiserver --etcd-servers=x --secure-port=16443"),
            "kube-apiserver:16443"
        );
        assert_eq!(label(""), "(kernel)");
        let spent = cpu_spent(
            &[("a".to_string(), 1.0)].into(),
            &[("a".to_string(), 3.5), ("b".to_string(), 0.0)].into(),
        );
        assert_eq!(spent, [("a".to_string(), 2.5)].into());
    }
}
