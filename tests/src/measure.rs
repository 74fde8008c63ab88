//! What the benchmarks report: percentiles of latencies and a process's peak RSS.

use std::time::Duration;

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
