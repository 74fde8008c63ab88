//! The syncer binary, run as a real process wired as the StatefulSet wires it: the
//! operator's `vc-config-<name>` configuration, a host kubeconfig carrying a token of the
//! operator-made `vc-<name>` ServiceAccount (so only the operator's Role applies), and the
//! virtual API server's admin kubeconfig.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use vnest_crds::meta::SYNCER_CONFIG_KEY;

use crate::{
    bed::{bed, service_account_kubeconfig, workspace_binary},
    scrape, wait,
};

/// `$VNEST_SYNCER_BIN`, or `target/debug/vnest-syncer` built by the test command.
pub fn syncer_binary() -> PathBuf {
    workspace_binary("vnest-syncer", "VNEST_SYNCER_BIN")
}

/// A running syncer; killed when dropped, its log printed if the test is failing.
pub struct SyncerProcess {
    child: Child,
    pub metrics_port: u16,
    pub log: PathBuf,
}

/// How to start a syncer: the files it reads and the virtual namespaces it syncs.
pub struct SyncerWiring {
    pub config: PathBuf,
    pub host_kubeconfig: PathBuf,
    pub virtual_kubeconfig: PathBuf,
    pub virtual_namespace: String,
}

impl SyncerWiring {
    /// The wiring of virtual cluster `vc` in host namespace `namespace` once the operator
    /// made its pieces: `vc-config-<vc>` written to a file, a token of ServiceAccount
    /// `vc-<vc>` (bound by the operator's RoleBinding), the bed's virtual admin kubeconfig.
    pub async fn from_operator(
        host: &Client,
        namespace: &str,
        vc: &str,
        virtual_namespace: &str,
    ) -> Self {
        let timeout = Duration::from_secs(60);
        let secrets: Api<Secret> = Api::namespaced(host.clone(), namespace);
        let config_secret = format!("vc-config-{vc}");
        let config = wait::until(&config_secret, timeout, || async {
            let secret = secrets
                .get_opt(&config_secret)
                .await
                .map_err(|e| e.to_string())?;
            let data = secret.and_then(|s| s.data).ok_or("no config secret yet")?;
            let bytes = data.get(SYNCER_CONFIG_KEY).ok_or("no config.yaml")?;
            Ok::<_, String>(bytes.0.clone())
        })
        .await;
        let config_path =
            std::env::temp_dir().join(format!("vnest-syncer-{namespace}-config.yaml"));
        std::fs::write(&config_path, config).expect("write syncer config");
        let account = format!("vc-{vc}");
        for (kind, name) in [
            ("serviceaccount", account.as_str()),
            ("rolebinding", account.as_str()),
            ("service", vc),
        ] {
            wait::until(
                &format!("{kind} {name} from the operator"),
                timeout,
                || async { bed().kubectl(&["-n", namespace, "get", kind, name, "-o", "name"]) },
            )
            .await;
        }
        SyncerWiring {
            config: config_path,
            host_kubeconfig: service_account_kubeconfig(namespace, &account).await,
            virtual_kubeconfig: bed().virtual_kubeconfig(),
            virtual_namespace: virtual_namespace.to_string(),
        }
    }
}

impl SyncerProcess {
    pub fn start(wiring: &SyncerWiring, metrics_port: u16) -> Self {
        let log = std::env::temp_dir().join(format!(
            "vnest-syncer-{}-{metrics_port}.log",
            wiring.virtual_namespace
        ));
        let file = std::fs::File::create(&log).expect("syncer log file");
        let child = Command::new(syncer_binary())
            .arg("--config")
            .arg(&wiring.config)
            .arg("--host-kubeconfig")
            .arg(&wiring.host_kubeconfig)
            .arg("--virtual-kubeconfig")
            .arg(&wiring.virtual_kubeconfig)
            .arg(format!("--virtual-namespace={}", wiring.virtual_namespace))
            .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
            .env("RUST_LOG", "info")
            .env_remove("POD_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start vnest-syncer");
        SyncerProcess {
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

    /// `/metrics`, `/readyz` or `/healthz`; the body, or why not.
    pub async fn get(&self, path: &str) -> Result<String, String> {
        scrape::get(self.metrics_port, path).await
    }

    /// Sum of a counter over all its label sets.
    pub async fn counter(&self, name: &str) -> Result<f64, String> {
        Ok(scrape::counter(&self.get("/metrics").await?, name))
    }
}

fn print_tail(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
    let _ = writeln!(
        std::io::stderr(),
        "--- syncer log {} ---\n{tail}",
        log.display()
    );
}

impl Drop for SyncerProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            print_tail(&self.log);
        }
    }
}
