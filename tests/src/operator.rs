//! The operator binary, run as a real process against the test bed's host cluster.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{
    bed::{TestBed, workspace_binary},
    scrape, wait,
};

/// `target/<profile>/vnest-operator`, built by the test command before the tests run.
pub fn operator_binary() -> PathBuf {
    workspace_binary("vnest-operator", "VNEST_OPERATOR_BIN")
}

/// A running operator; killed when dropped.
pub struct OperatorProcess {
    child: Child,
    pub metrics_port: u16,
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts the operator watching `namespace`, leader-electing on a Lease in that namespace.
    pub fn start(bed: &TestBed, namespace: &str, identity: &str, metrics_port: u16) -> Self {
        Self::start_with_args(bed, namespace, identity, metrics_port, &[])
    }

    /// Like [`OperatorProcess::start`], with extra command-line arguments.
    pub fn start_with_args(
        bed: &TestBed,
        namespace: &str,
        identity: &str,
        metrics_port: u16,
        args: &[String],
    ) -> Self {
        Self::start_as(
            &operator_binary(),
            &bed.host_kubeconfig(),
            Some(namespace),
            namespace,
            identity,
            metrics_port,
            args,
        )
    }

    /// Like [`OperatorProcess::start`], with a given build of the operator (benchmarks use
    /// release) authenticating with `kubeconfig` (the bed's admin, or for example a token of
    /// the Helm chart's ServiceAccount, to prove its RBAC is enough), watching `watch` or every
    /// namespace, with its Lease in `lease_namespace` and `extra_args` (such as `--selector=...`).
    pub fn start_as(
        binary: &std::path::Path,
        kubeconfig: &std::path::Path,
        watch: Option<&str>,
        lease_namespace: &str,
        identity: &str,
        metrics_port: u16,
        extra_args: &[String],
    ) -> Self {
        let namespace = watch.unwrap_or("all");
        let log = std::env::temp_dir().join(format!("vnest-operator-{namespace}-{identity}.log"));
        let file = std::fs::File::create(&log).expect("operator log file");
        let child = Command::new(binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(watch.map(|ns| format!("--namespace={ns}")))
            .arg(format!("--leader-election-namespace={lease_namespace}"))
            .args(["--identity", identity])
            .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
            .args(extra_args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start vnest-operator");
        OperatorProcess {
            child,
            metrics_port,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process at once (as a crash or eviction would).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The operator's `/metrics` text.
    pub async fn metrics(&self) -> Result<String, String> {
        scrape::get(self.metrics_port, "/metrics").await
    }

    /// Sum of a counter over all its label sets, e.g. `vnest_api_writes_total`.
    pub async fn counter(&self, name: &str) -> Result<f64, String> {
        Ok(scrape::counter(&self.metrics().await?, name))
    }

    /// `vnest_api_writes_total` once it stays unchanged for `quiet` (the trailing reconciles
    /// have settled); panics after `timeout`.
    pub async fn settled_writes(&self, quiet: Duration, timeout: Duration) -> f64 {
        wait::until("operator writes to settle", timeout, || async {
            let before = self.counter("vnest_api_writes_total").await?;
            tokio::time::sleep(quiet).await;
            let after = self.counter("vnest_api_writes_total").await?;
            if before == after {
                Ok(after)
            } else {
                Err(format!("{before} -> {after}"))
            }
        })
        .await
    }

    /// Proves the operator writes nothing for `window`: `vnest_api_writes_total` stays at
    /// `writes` on every look.
    pub async fn writes_stay_at(&self, writes: f64, window: Duration) {
        let what = format!("operator API writes staying at {writes}");
        wait::holds(&what, window, || async {
            let now = self.counter("vnest_api_writes_total").await?;
            (now == writes)
                .then_some(())
                .ok_or(format!("it wrote: {writes} -> {now}"))
        })
        .await
    }

    /// Returns once `vnest_reconcile_total` reaches `at_least`; panics after `timeout`.
    pub async fn reconciled(&self, at_least: f64, timeout: Duration) {
        let what = format!("{at_least} operator reconciles");
        wait::until(&what, timeout, || async {
            let done = self.counter("vnest_reconcile_total").await?;
            if done >= at_least {
                Ok(())
            } else {
                Err(format!("{done}"))
            }
        })
        .await
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
