//! What the benchmarks report: percentiles of latencies and a process's peak RSS; and the
//! one number a benchmark takes on its command line.

use std::{str::FromStr, time::Duration};

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
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
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
}
